"""``simdist run``'s limits on the command line: ``--max-events``, ``--max-sim-time`` and the
wall-clock ``--timeout``, with sane defaults, so that no run goes on for hours unasked.

The simulator checks the limits once per time window (``simdist.sim.limits``); the wall clock is
read here, in the command layer, never by the simulator. A task whose own code never yields
(or that loops at one simulated instant) never reaches the end of its window, so a timer
thread backs the check up: it interrupts the run shortly after the timeout. A run whose size
options promise more events than ``--max-events`` is refused before it starts, with the
estimate (a program's ``cost``).
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import threading
import time

from simdist.base.errors import DeadlineExceededError, InvalidArgumentError
from simdist.sim.limits import MAX_EVENTS, MAX_SIM_TIME_NS, RunLimits, check_events, \
    estimated_minutes
from simdist.hardware.units import parse_quantity
from simdist.commands import option_type, timeout_seconds, whole_number

#: the defaults: 10 million events (about 8 minutes on one core) and one simulated day, as
#: the Python API's (``limits.DEFAULT_LIMITS``), and an hour of wall clock
TIMEOUT_S = 3600.0


def _sim_time(text) -> int:
    ns = parse_quantity(text, "ns")
    if ns < 1:
        raise InvalidArgumentError(f"{text!r}: expected a simulated time > 0 (ns, or '10 s')")
    return round(ns)


def add_arguments(parser) -> None:
    parser.add_argument("--max-events", type=option_type(whole_number), default=MAX_EVENTS,
                        metavar="N", help=f"stop the run with an error after N events "
                                          f"(default {MAX_EVENTS:,}, about "
                                          f"{estimated_minutes(MAX_EVENTS):.0f} min on one "
                                          "core); bigger sizes are refused up front")
    parser.add_argument("--max-sim-time", type=option_type(_sim_time), default=MAX_SIM_TIME_NS,
                        metavar="TIME", help="stop the run with an error after this much "
                                             "simulated time: ns, or '10 s', '5 ms' (default "
                                             "86400 s, a simulated day)")
    parser.add_argument("--timeout", type=option_type(timeout_seconds), default=TIMEOUT_S,
                        metavar="S", help=f"stop the run with an error after S seconds of wall "
                                          f"clock (default {TIMEOUT_S:g}); under mpiexec, a "
                                          "rank that stops answering for S seconds ends the job")


#: the options of ``simdist run``'s programs whose product makes a run's events (by dest)
SIZE_OPTIONS = {"workers": "--workers", "tasks": "--tasks", "p": "--participants",
                "steps": "--steps", "rounds": "--rounds", "pieces": "--pieces"}


def check_cost(program, args) -> None:
    """Refuse a run whose size options promise more events than ``--max-events``, naming
    the sizes given."""
    if program.cost is None:
        return
    sizes = ", ".join(f"{flag} {getattr(args, name)}" for name, flag in SIZE_OPTIONS.items()
                      if isinstance(getattr(args, name, None), int)
                      and not isinstance(getattr(args, name), bool))
    check_events(program.cost(args), args.max_events,
                 f"give smaller sizes than {sizes} (an all-reduce costs the square of its "
                 "replicas or tasks)" if sizes else "give smaller sizes (an all-reduce costs "
                 "the square of its replicas or tasks)")


@contextlib.contextmanager
def run_limits(args):
    """The ``RunLimits`` of a run, with its wall-clock timeout read here; a run that passes
    the timeout inside one window is interrupted and ends with DeadlineExceededError."""
    deadline = time.monotonic() + args.timeout
    lock, state = threading.Lock(), {"running": True, "fired": False}
    stop = threading.Event()

    def interrupt():
        # until the run ends: one interrupt can be lost (caught by code the task calls)
        if stop.wait(args.timeout + max(1.0, args.timeout / 10)):
            return
        while True:
            with lock:
                if not state["running"]:
                    return
                state["fired"] = True
                _thread.interrupt_main()  # a KeyboardInterrupt in the main thread
            if stop.wait(1.0):
                return

    # interrupt_main does nothing while SIGINT is ignored or left to the OS: Python's own
    # handler for the run (only the main thread may set it)
    restore = None
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        restore = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Thread(target=interrupt, name="simdist --timeout", daemon=True)
    timer.start()
    try:
        yield RunLimits(args.max_events, args.max_sim_time,
                        lambda: time.monotonic() > deadline, args.timeout)
    except KeyboardInterrupt:
        if not state["fired"]:
            raise  # a real Ctrl-C
        raise DeadlineExceededError(
            f"the run passed its wall-clock timeout of {args.timeout:g} s (--timeout) inside "
            "one time window: a task's code runs without yielding (a loop with no yield in "
            "it), or loops without letting simulated time advance (yield ctx.timeout(0) "
            "forever)") from None
    finally:
        with lock:
            state["running"] = False
        stop.set()
        timer.join()
        if restore is not None:
            signal.signal(signal.SIGINT, restore)
