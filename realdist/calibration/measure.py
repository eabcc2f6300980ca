"""Step times of exercises measured on real TensorFlow: what ``simdist calibrate`` fits a
hardware profile to and ``simdist bench predict`` checks the simulator against.

``python -m realdist measure PLAN.json`` reads a list of exercises (``Exercise.to_dict()``
each), trains each with its strategy's realdist runner and prints a JSON line as each run
ends, so that the caller can show progress and keep what finished. With ``--repeat N`` the
plan runs N times, each pass after the first in its own seeded shuffle
(``simdist.calibration.protocol.pass_order``: the machine's speed drifts, and a run's
neighbours and its place after TensorFlow's start change its times by 10-30% on a small
machine); an exercise's line with its statistics comes after its last run, over the steps
of all its runs:

    {"index": 3, "pass": 2, "median_ns": 2871000, "p25_ns": ..., "p75_ns": ..., "steps": 285,
     "runs": 3, "wall_s": ...}

(earlier passes print ``{"index": 3, "pass": 0, "wall_s": ...}``). With ``--extra K`` an
exercise whose runs' medians still spread after the N passes (``settled``: the standard
error of their mean over ``SETTLED`` of it) is run again, up to K more times, in passes of
its own after the planned ones: its line in the last planned pass (and in each extra pass
but its last) says ``"again": true`` instead of giving the statistics. The first
``SKIPPED_STEPS`` steps of each run are left out (``kept_steps``). The protocol's numbers and
rules are simdist's (``simdist.calibration.protocol``), shared with the commands that read
these lines. The strategies of one process (default, one_device, mirrored, central_storage)
share it: its logical CPU devices are made once, as many as the plan's largest replica count
asks. multi_worker_mirrored and parameter_server start their cluster's processes per run. A
failed exercise is a line with "error" instead of the times; the others go on.

A parameter_server run's step time is the coordinator's step rate (``coordinator_steps``): its
workers step asynchronously, so a step has no time of its own; the run's time from the start
of its first function to the end of its last (on the workers' clock, ``tf.timestamp``), over
its steps, every step that time. TensorFlow's tracing of the function, before the first one
starts, is left out as the first steps of the other strategies are.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.calibration.protocol import SETTLED, kept_steps, pass_order, settled
from simdist.training.exercises import Exercise

#: the strategies whose runs start a cluster of processes of their own
OWN_PROCESSES = ("multi_worker_mirrored", "parameter_server")


def step_statistics(step_times_ns) -> dict:
    """Median and quartiles (ns) of step times (those left after ``kept_steps``)."""
    kept = list(step_times_ns)
    p25, p75 = np.percentile(kept, [25, 75])
    return {"median_ns": int(statistics.median(kept)), "p25_ns": int(p25), "p75_ns": int(p75),
            "steps": len(kept)}


def run_steps(exercise: Exercise, timeout: float = 300) -> list:
    """Train ``exercise`` on real TF with its strategy's runner; its kept step times."""
    from realdist import run_exercise  # the runner a strategy's record names

    result = run_exercise(exercise, timeout=timeout)
    if exercise.strategy == "parameter_server":
        return kept_steps(coordinator_steps(result.trace.spans))
    return kept_steps(result.step_times_ns)


def coordinator_steps(spans) -> list[int]:
    """A parameter_server run's step times from its functions' spans (category "function",
    ``args["steps"]`` steps each): the time from the first one's start to the last one's
    end over the steps they ran, once per step (the coordinator's step rate)."""
    functions = [s for s in spans if s.cat == "function"]
    if not functions:
        raise ValueError("the parameter_server run reported no function")
    steps = sum(s.args["steps"] for s in functions)
    first = min(s.start for s in functions)
    last = max(s.start + s.dur for s in functions)
    return [(last - first) // steps] * steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="realdist measure",
        description="Measure the step times of a plan of exercises on real TensorFlow; JSON "
                    "lines on stdout, an exercise's statistics after its last run.")
    parser.add_argument("plan", help="JSON file: a list of exercises (Exercise.to_dict())")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the plan this many times, each pass in its own shuffled "
                             "order, pooling each exercise's steps (default 1)")
    parser.add_argument("--extra", type=int, default=0,
                        help="after the passes, up to this many more runs of each exercise "
                             f"whose runs' medians spread more (standard error over "
                             f"{SETTLED:.0%}% of their mean) (default 0)")
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds each run may take (default 300)")
    args = parser.parse_args(argv)
    try:
        if args.repeat < 1:
            raise InvalidArgumentError(f"--repeat {args.repeat}: expected a whole number >= 1")
        if args.extra < 0:
            raise InvalidArgumentError(f"--extra {args.extra}: expected a whole number >= 0")
        with open(args.plan, encoding="utf-8") as f:
            plan = [Exercise.from_dict(d) for d in json.load(f)]
    except (OSError, ValueError, TypeError, InvalidArgumentError) as error:
        print(f"realdist measure: error: {args.plan}: {error}", file=sys.stderr)
        return 2
    in_process = [e for e in plan if e.strategy not in OWN_PROCESSES]
    if in_process:
        from realdist.runtime.devices import configure_cpus

        configure_cpus(max(e.num_replicas for e in in_process))
        try:  # a warm-up, unrecorded: no measured run is the process's first
            run_steps(in_process[0], args.timeout)
        except Exception:  # noqa: BLE001 -- the exercise's own run reports its error
            pass
    pooled: dict[int, list] = {k: [] for k in range(len(plan))}
    medians: dict[int, list] = {k: [] for k in range(len(plan))}
    errors: dict[int, str] = {}
    again: list[int] = []
    last = args.repeat + args.extra - 1
    for p in range(last + 1):
        # the planned passes; then the exercises left unsettled, in the order they were left
        order, again = (pass_order(len(plan), p) if p < args.repeat else again), []
        for index in order:
            start = time.monotonic()
            if index not in errors:
                try:
                    times = run_steps(plan[index], args.timeout)
                    pooled[index] += times
                    medians[index].append(statistics.median(times))
                except Exception as error:  # noqa: BLE001 -- reported, and the plan goes on
                    errors[index] = f"{type(error).__name__}: {error}"
            line = {"index": index, "pass": p}
            if p >= args.repeat - 1:
                if index in errors:
                    line["error"] = errors[index]
                elif p < last and not settled(medians[index]):
                    line["again"] = True  # another run of it comes after this pass
                    again.append(index)
                else:
                    line.update(step_statistics(pooled[index]), runs=len(medians[index]))
            line["wall_s"] = round(time.monotonic() - start, 2)
            print(json.dumps(line), flush=True)
    return 0
