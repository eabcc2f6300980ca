"""Failures an exercise injects into a parameter-server cluster, in one syntax everywhere
(``simdist run --fail``, ``simdist ps --fail``, ``train_on_ps(failures=...)``, realdist):
"worker:1@2ms+1ms" fails worker 1 at 2 ms and brings it back 1 ms later (never, without
"+"); times take a unit (ns, us, ms, s)."""

from __future__ import annotations

from typing import NamedTuple

from simdist.base.errors import InvalidArgumentError, brief
from simdist.hardware.units import parse_quantity

SYNTAX = "TASK@TIME[+DOWN]"
_UNITS = (("s", 10**9), ("ms", 10**6), ("us", 10**3), ("ns", 1))


class Failure(NamedTuple):
    """An injected failure: ``task`` fails at ``at_ns``, back ``down_ns`` later (None:
    never). ``str()`` writes it in the syntax ``parse`` reads."""

    task: str
    at_ns: int
    down_ns: int | None

    def __str__(self) -> str:
        when = f"{self.task}@{_spelled(self.at_ns)}"
        return when if self.down_ns is None else f"{when}+{_spelled(self.down_ns)}"

    @classmethod
    def parse(cls, text, old_unit: str = "us") -> Failure:
        """"worker:1@2ms" or "ps:0@5ms+1ms" (task@time[+downtime]); a Failure as it is.
        The old form "ps:0,8000,2000" or ("ps:0", 8000, 2000), times in ``old_unit``, is
        refused with its new spelling."""
        if isinstance(text, cls):  # a record made by hand: held to the same rules
            if not (isinstance(text.task, str) and _is_ns(text.at_ns)
                    and (text.down_ns is None or _is_ns(text.down_ns))):
                raise InvalidArgumentError(f"failure {brief(tuple(text))}: expected a task "
                                           "'worker:N' or 'ps:N' and whole nanoseconds, the "
                                           "time >= 0 and the downtime > 0")
            cls.parse(str(text))  # the task, and a downtime > 0
            return text
        if not isinstance(text, str) or "@" not in text:
            new = _new_spelling(text, old_unit)
            if new is not None:
                u = old_unit.upper()
                old = f"TASK,AT_{u},DOWN_{u}" if isinstance(text, str) else \
                    f"(task, at_{old_unit}, down_{old_unit})"
                raise InvalidArgumentError(f"failure {brief(text)}: the old form {old} is "
                                           f"gone: write '{new}' ({SYNTAX}, times with units)")
            raise InvalidArgumentError(f"failure {brief(text)}: expected {SYNTAX}, "
                                       "e.g. 'worker:1@2ms+1ms'")
        task, _, when = text.partition("@")
        at, _, down = when.partition("+")
        job, _, index = task.partition(":")
        if job not in ("worker", "ps") or not index.isdigit():
            raise InvalidArgumentError(f"failure {text!r}: the task must be worker:N or ps:N, "
                                       f"got {task!r}")
        try:
            at_ns = parse_quantity(at, "ns")
            down_ns = parse_quantity(down, "ns") if down else None
        except (InvalidArgumentError, ValueError):
            raise InvalidArgumentError(f"failure {text!r}: times must read like 2ms or "
                                       "500us") from None
        if not isinstance(at_ns, int) or at_ns < 0 or (
                down_ns is not None and (not isinstance(down_ns, int) or down_ns < 1)):
            raise InvalidArgumentError(f"failure {text!r}: expected whole nanoseconds, the "
                                       "time >= 0 and the downtime > 0")
        return cls(f"{job}:{int(index)}", at_ns, down_ns)


def _is_ns(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _spelled(ns: int) -> str:
    """``ns`` in the largest unit that holds it whole: 2000000 -> "2ms", 1500000 ->
    "1500us"."""
    unit, scale = next((u, s) for u, s in _UNITS if ns % s == 0)
    return f"{ns // scale}{unit}"


def _new_spelling(value, old_unit: str) -> str | None:
    """The failure that the old "TASK,AT,DOWN" text or (task, at, down) tuple, times in
    ``old_unit``, wrote, in the new syntax; None if ``value`` is not one."""
    parts = value.split(",") if isinstance(value, str) else value
    if not isinstance(parts, (tuple, list)) or len(parts) != 3 or not isinstance(parts[0], str):
        return None
    task, at, down = (str(p).strip() if p is not None else None for p in parts)
    text = f"{task}@{at}{old_unit}" + ("" if down is None else f"+{down}{old_unit}")
    try:
        return str(Failure.parse(text))
    except InvalidArgumentError:
        return None


def check_failures(exercise) -> list[Failure]:
    """The exercise's failures, parsed, each of a task its cluster has."""
    failures = [Failure.parse(f) for f in exercise.failures]
    for f in failures:
        job, index = f.task.split(":")
        if int(index) >= (exercise.workers if job == "worker" else exercise.ps):
            raise InvalidArgumentError(f"failure of {f.task}: the cluster has "
                                       f"{exercise.workers} workers and {exercise.ps} ps")
    return failures
