"""Limits of a simulated run: how many events, how much simulated time, how much wall-clock
time it may take (``simdist run --max-events``, ``--max-sim-time``, ``--timeout``).

The scheduler checks them once per time window (``Simulation._advance``), on every rank with
the same numbers, so that every rank stops at the same window. simdist never reads the wall
clock itself: ``out_of_time`` is a callback the command layer gives, which reads it. The
Python API runs with ``DEFAULT_LIMITS``, the commands' default events and simulated time,
so that a program that never ends stops there too (``limits=None``: no limit); a run whose
sizes promise more events than its limit is refused before it starts (``check_events``).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from simdist.base.errors import InvalidArgumentError, ResourceExhaustedError, brief
from simdist.hardware.units import format_ns

#: roughly how many events per second one core simulates (``simdist bench engine``), for
#: the estimates in error messages
EVENTS_PER_SECOND = 20_000
#: the default limits: 10 million events (about 8 minutes on one core), one simulated day
MAX_EVENTS = 10_000_000
MAX_SIM_TIME_NS = 86_400 * 10**9


class RunLimits(NamedTuple):
    """What one run may use; None is no limit."""

    max_events: int | None = None
    max_sim_time: int | None = None  # simulated ns
    #: the command layer's wall-clock check: True once its timeout has passed
    out_of_time: Callable[[], bool] | None = None
    timeout_s: float | None = None  # what ``out_of_time`` checks, for the message

    def reached(self, events: int, now: int, late: bool) -> str | None:
        """The limit a run at ``events`` events and simulated time ``now`` has reached (a
        phrase naming it), or None; ``late``: some rank's ``out_of_time()`` said True."""
        if late:
            return f"its wall-clock timeout of {self.timeout_s:g} s (--timeout)"
        if self.max_events is not None and events > self.max_events:
            return f"its limit of {self.max_events} events (--max-events)"
        if self.max_sim_time is not None and now > self.max_sim_time:
            return (f"its limit of {format_ns(self.max_sim_time)} of simulated time "
                    "(--max-sim-time)")
        return None


class RunLimitError(ResourceExhaustedError):
    """A simulated run reached one of its ``RunLimits``."""

    def __init__(self, limit: str, events: int, now: int, windows: int, messages: int,
                 live: int):
        super().__init__(
            f"the run stopped at {limit}: {events} events, {windows} time windows and "
            f"{messages} messages so far, simulated time {format_ns(now)}, {live} processes "
            "still running. A program that never ends looks like this (a loop without an "
            "exit); if yours is meant to run this long, raise the limit (in Python: "
            "limits=RunLimits(max_events=..., max_sim_time=...))")


#: what the Python API runs with unless told otherwise: the commands' defaults
DEFAULT_LIMITS = RunLimits(MAX_EVENTS, MAX_SIM_TIME_NS)


def check_limits(limits, where: str = "limits") -> RunLimits | None:
    """``limits`` as a run takes it: None, or a ``RunLimits`` whose counts are ints >= 1 (or
    None); one line naming the bad value otherwise."""
    from simdist.base.checks import check_int

    if limits is None:
        return None
    if not isinstance(limits, RunLimits):
        raise InvalidArgumentError(f"{where}={brief(limits)}: expected a RunLimits(max_events, "
                                   "max_sim_time) or None (no limit)")
    for name in ("max_events", "max_sim_time"):
        if getattr(limits, name) is not None:
            check_int(getattr(limits, name), f"{where}.{name}")
    if limits.out_of_time is not None and not callable(limits.out_of_time):
        raise InvalidArgumentError(f"{where}.out_of_time={brief(limits.out_of_time)}: expected "
                                   "a function of no arguments, or None")
    return limits


def check_events(events: int, max_events: int | None, hint: str) -> None:
    """Refuse a run whose sizes promise ``events`` events, more than ``max_events`` (None: no
    limit), before it starts; ``hint`` says which sizes cost most."""
    if max_events is not None and events > max_events:
        raise ResourceExhaustedError(
            f"these sizes make about {events:,} events, more than --max-events "
            f"{max_events:,} (about {estimated_minutes(events):,.0f} min on one core): "
            f"{hint}, or a larger --max-events (limits=RunLimits(max_events=...) in Python) "
            "if you mean it")


def estimated_minutes(events: int) -> float:
    """About how many minutes one core takes to simulate ``events`` events."""
    return events / EVENTS_PER_SECOND / 60
