"""Step times of exercises measured on real TensorFlow: what ``simdist calibrate`` fits a
hardware profile to and ``simdist bench predict`` checks the simulator against.

``python -m realdist measure PLAN.json`` reads a list of exercises (``Exercise.to_dict()``
each), trains each with its strategy's realdist runner and prints a JSON line as each run
ends, so that the caller can show progress and keep what finished. With ``--repeat N``
every exercise runs N times (``simdist.commands.real_measure.schedule``): the strategies of
one process (default, one_device, mirrored, central_storage) in N passes through the plan,
every other one in reverse order, in this process (its logical CPU devices made once, as
many as the plan's largest replica count asks); then the multi_worker_mirrored exercises,
one launch of worker processes per cluster size running all of that size's runs
(``realdist.multiworker.measure_multi_worker``), since starting TensorFlow in each worker
is most of such a run's time. An exercise's line with its statistics comes after its last
run, over the steps of all its runs:

    {"index": 3, "pass": 1, "median_ns": 2871000, "p25_ns": ..., "p75_ns": ..., "steps": 70}

(earlier runs print ``{"index": 3, "pass": 0, "wall_s": ...}``). The first ``SKIP_STEPS``
steps of each run are left out (step 0 traces the ``tf.function``s; the next ones warm
caches up). A failed exercise is a line with "error" instead of the times; the others go
on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from simdist.commands.real_measure import schedule
from simdist.errors import InvalidArgumentError
from simdist.exercises import Exercise

#: steps left out of each run: step 0 traces the functions, the next ones still warm up
SKIP_STEPS = 5


def step_statistics(step_times_ns) -> dict:
    """Median and quartiles (ns) of step times (those left after ``kept_steps``)."""
    kept = list(step_times_ns)
    p25, p75 = np.percentile(kept, [25, 75])
    return {"median_ns": int(statistics.median(kept)), "p25_ns": int(p25), "p75_ns": int(p75),
            "steps": len(kept)}


def kept_steps(step_times_ns) -> list:
    """The step times of one run after the first ``SKIP_STEPS``."""
    kept = list(step_times_ns)[SKIP_STEPS:]
    if len(kept) < 3:
        raise InvalidArgumentError(f"{len(step_times_ns)} steps leave {len(kept)} to measure "
                                   f"after the first {SKIP_STEPS}: give at least "
                                   f"{SKIP_STEPS + 3} steps")
    return kept


def run_steps(exercise: Exercise, timeout: float = 300) -> list:
    """Train ``exercise`` on real TF with its strategy's runner; its kept step times."""
    from . import run_exercise  # the runner a strategy's record names

    return kept_steps(run_exercise(exercise, timeout=timeout).step_times_ns)


def _run_batch(plan, batch, timeout: float, errors: dict) -> list[list]:
    """The kept step times of each run of a ``schedule`` batch (an empty list for a run
    that failed, or whose exercise failed before: its error is put in ``errors``)."""
    indices = [index for index, _ in batch]
    if plan[indices[0]].strategy == "multi_worker_mirrored":
        from .multiworker import measure_multi_worker

        group = sorted(set(indices))
        try:
            runs = measure_multi_worker([plan[i] for i in group],
                                        [group.index(i) for i in indices], timeout)
            return [kept_steps(times) for times in runs]
        except Exception as error:  # noqa: BLE001 -- reported, and the plan goes on
            errors.update({i: f"{type(error).__name__}: {error}" for i in group})
            return [[] for _ in batch]
    index = indices[0]
    if index in errors:
        return [[]]
    try:
        return [run_steps(plan[index], timeout)]
    except Exception as error:  # noqa: BLE001 -- reported, and the plan goes on
        errors[index] = f"{type(error).__name__}: {error}"
        return [[]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="realdist measure",
        description="Measure the step times of a plan of exercises on real TensorFlow; JSON "
                    "lines on stdout, an exercise's statistics after its last run.")
    parser.add_argument("plan", help="JSON file: a list of exercises (Exercise.to_dict())")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the plan this many times, every other pass in reverse "
                             "order, pooling each exercise's steps (default 1)")
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds each run may take (default 300)")
    args = parser.parse_args(argv)
    try:
        if args.repeat < 1:
            raise InvalidArgumentError(f"--repeat {args.repeat}: expected a whole number >= 1")
        with open(args.plan, encoding="utf-8") as f:
            plan = [Exercise.from_dict(d) for d in json.load(f)]
    except (OSError, ValueError, TypeError, InvalidArgumentError) as error:
        print(f"realdist measure: error: {args.plan}: {error}", file=sys.stderr)
        return 2
    in_process = [e.num_replicas for e in plan if e.strategy != "multi_worker_mirrored"]
    if in_process:
        from .devices import configure_cpus

        configure_cpus(max(in_process))
    pooled: dict[int, list] = {k: [] for k in range(len(plan))}
    errors: dict[int, str] = {}
    for batch in schedule(plan, args.repeat):
        start = time.monotonic()
        for (index, _), steps in zip(batch, _run_batch(plan, batch, args.timeout, errors)):
            pooled[index] += steps
        for index, p in batch:
            line = {"index": index, "pass": p}
            if p == args.repeat - 1:
                line.update({"error": errors[index]} if index in errors
                            else step_statistics(pooled[index]))
            line["wall_s"] = round((time.monotonic() - start) / len(batch), 2)
            print(json.dumps(line), flush=True)
    return 0
