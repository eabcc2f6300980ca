"""Failures an exercise injects into a parameter-server cluster: "worker:1@2ms+1ms" fails
worker 1 at 2 ms of simulated time and brings it back 1 ms later (never, without "+")."""

from __future__ import annotations

from typing import NamedTuple

from simdist.base.errors import InvalidArgumentError, brief
from simdist.hardware.units import parse_quantity


class Failure(NamedTuple):
    """An injected failure: ``task`` fails at ``at_ns``, back ``down_ns`` later (None:
    never)."""

    task: str
    at_ns: int
    down_ns: int | None

    @classmethod
    def parse(cls, text) -> Failure:
        """"worker:1@2ms" or "ps:0@5ms+1ms" (task@time[+downtime])."""
        if not isinstance(text, str) or "@" not in text:
            raise InvalidArgumentError(f"failure {brief(text)}: expected TASK@TIME[+DOWN], "
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


def check_failures(exercise) -> list[Failure]:
    """The exercise's failures, parsed, each of a task its cluster has."""
    failures = [Failure.parse(f) for f in exercise.failures]
    for f in failures:
        job, index = f.task.split(":")
        if int(index) >= (exercise.workers if job == "worker" else exercise.ps):
            raise InvalidArgumentError(f"failure of {f.task}: the cluster has "
                                       f"{exercise.workers} workers and {exercise.ps} ps")
    return failures
