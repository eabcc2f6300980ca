"""Measuring exercises on real TensorFlow for ``simdist calibrate`` and ``simdist bench
predict``: a ``realdist measure`` process (simdist itself never imports TensorFlow), read
line by line, with a progress bar and a CSV row per exercise as each one ends."""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from simdist.commands.bench.scale import ProgressBar
from simdist.calibration.fit import Measurement
from simdist.base.errors import InvalidArgumentError, UnavailableError

#: where simdist calibrate writes the profile, and simdist bench predict reads it
DEFAULT_OUTPUT = "out/calibrated.json"
#: the strategies measured here and their sizes (replicas, or worker processes): every one
#: realdist runs in synchronous steps on this machine
SIZES = {"default": (1,), "one_device": (1,), "mirrored": (1, 2, 4),
         "central_storage": (1, 2, 4), "multi_worker_mirrored": (1, 2, 4)}

#: steps realdist measure leaves out of each run (realdist.calibration.measure.SKIP_STEPS), and the
#: fewest a run needs
SKIPPED_STEPS = 5
MIN_STEPS = SKIPPED_STEPS + 3


def check_steps(text) -> int:
    """``--steps``: a whole number of at least ``MIN_STEPS``."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < MIN_STEPS:
        raise InvalidArgumentError(f"--steps {text}: expected a whole number >= {MIN_STEPS} "
                                   f"(the first {SKIPPED_STEPS} of each run are left out)")
    return value


#: ``--extra``'s default: the runs an unsettled exercise may get after the planned passes
EXTRA_RUNS = 0


def add_measure_options(parser, what: str) -> None:
    """--steps, --repeat, --extra and --timeout, the same for every command that measures."""
    from simdist.commands import option_type, timeout_seconds, whole_number, whole_number_or_zero

    parser.add_argument("--steps", type=option_type(check_steps), default=100,
                        help=f"training steps per run of each {what}; the first "
                             f"{SKIPPED_STEPS} of a run are left out (default 100: a run of "
                             f"40 steps lasts a few tenths of a second here, and its median "
                             f"moves about twice as much from run to run)")
    parser.add_argument("--repeat", type=option_type(whole_number), default=3,
                        help="runs per exercise, each pass through the plan in its own "
                             "shuffled order, their steps pooled (default 3)")
    parser.add_argument("--extra", type=option_type(whole_number_or_zero), default=EXTRA_RUNS,
                        help=f"then up to this many more runs of each {what} whose runs' "
                             f"medians still spread (standard error over 5%% of their mean; "
                             f"default {EXTRA_RUNS}, 0: none)")
    parser.add_argument("--timeout", type=option_type(timeout_seconds), default=300,
                        help="seconds each run may take (default 300)")


def runs_text(args) -> str:
    """How an exercise is measured, from --repeat, --extra and --steps, for a command's
    first line."""
    more = f", up to {args.extra} more where they spread" if args.extra else ""
    runs = "1 run" if args.repeat == 1 else f"{args.repeat} runs"
    return f"{runs} of {args.steps} steps each{more}"


#: the CSV columns of a measured exercise
FIELDS = ["strategy", "workers", "replicas", "model", "dataset", "hidden", "global_batch",
          "steps", "runs", "median_ms", "p25_ms", "p75_ms", "wall_s", "error"]

#: about how long an exercise takes to measure (s): a worker process each vs one process
SECONDS = {"multi_worker_mirrored": 11.0}
SECONDS_IN_PROCESS = 1.2
START_S = 6.0  # TensorFlow's start


def row_of(exercise) -> dict:
    """An exercise's configuration columns."""
    return {"strategy": exercise.strategy, "workers": exercise.num_workers,
            "replicas": exercise.devices_per_worker, "model": exercise.model,
            "dataset": exercise.dataset, "hidden": exercise.hidden,
            "global_batch": exercise.global_batch, "steps": exercise.steps}


def label(exercise) -> str:
    """``mirrored x2 mlp(512) batch 1024``: an exercise in a few words."""
    size = (f"x{exercise.num_workers} workers" if exercise.num_workers > 1
            else f"x{exercise.devices_per_worker}")
    model = f"mlp({exercise.hidden})" if exercise.model == "mlp" else exercise.model
    return f"{exercise.strategy} {size} {model} batch {exercise.global_batch}"


def pass_order(n: int, p: int) -> list[int]:
    """The order of pass ``p`` through a plan of ``n`` exercises: the plan's own order first,
    then a shuffle seeded by the pass. The machine's speed drifts by tens of percent within
    minutes on a small shared machine; in a fixed or alternating order an exercise's runs
    fall at the same places in every pass (the ends of a reversed pass meet the next one's),
    so it samples the drift at a few moments, always the same, where shuffled passes spread
    every exercise's runs over the whole measurement."""
    order = list(range(n))
    if p:
        random.Random(p).shuffle(order)
    return order


def estimate_s(exercises) -> float:
    return START_S + sum(SECONDS.get(e.strategy, SECONDS_IN_PROCESS) for e in exercises)


def measure_real(exercises, csv_path: Path | None, timeout: float = 300, repeat: int = 3,
                 stream=None, more=None, more_fields=(), extra: int = 0
                 ) -> list[Measurement | None]:
    """Each exercise's measured step time (None where its run failed, with the error in
    the CSV), from one ``realdist measure`` process running the plan ``repeat`` times, then
    up to ``extra`` more runs of each exercise whose runs still spread; the CSV gets each
    row as its statistics come, with the columns ``more(index, measurement or None)`` adds
    (named in ``more_fields``)."""
    exercises = list(exercises)
    n = len(exercises)
    runs = [exercises[i] for p in range(repeat)
            for i in pass_order(n, p)]
    bar = ProgressBar(len(runs), stream=stream)
    out: list[Measurement | None] = [None] * len(exercises)
    writer = handle = None
    if csv_path is not None:
        csv_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(csv_path, "w", newline="", encoding="utf-8")
        writer = csv.DictWriter(handle, FIELDS + list(more_fields))
        writer.writeheader()
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "plan.json"
        plan.write_text(json.dumps([e.to_dict() for e in exercises]), encoding="utf-8")
        command = [sys.executable, "-m", "realdist", "measure", str(plan),
                   "--timeout", str(timeout), "--repeat", str(repeat), "--extra", str(extra)]
        bar.show(f"starting TensorFlow, then {label(exercises[0])}", estimate_s(runs))
        log = open(Path(tmp) / "stderr.txt", "w+", encoding="utf-8")  # TF's logging
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            for line in proc.stdout:
                if not line.startswith("{"):
                    continue
                got = json.loads(line)
                k = got["index"]
                bar.done += 1
                if got.get("again"):  # one more run of it, in the order these lines come
                    runs.append(exercises[k])
                    bar.total += 1
                left = runs[bar.done:]
                bar.show(label(left[0]) if left else "done",
                         estimate_s(left) - START_S if left else 0)
                if "median_ns" not in got and "error" not in got:
                    continue  # an earlier pass
                exercise = exercises[k]
                row = {**row_of(exercise), "runs": got.get("runs", ""),
                       "wall_s": got.get("wall_s"), "error": got.get("error", "")}
                if "median_ns" in got:
                    out[k] = Measurement(exercise, got["median_ns"], got["p25_ns"],
                                         got["p75_ns"])
                    row.update(median_ms=got["median_ns"] / 1e6, p25_ms=got["p25_ns"] / 1e6,
                               p75_ms=got["p75_ns"] / 1e6)
                if more is not None:
                    row.update(more(k, out[k]))
                if writer is not None:
                    writer.writerow(row)
                    handle.flush()
            proc.wait()
            log.seek(0)
            errors = log.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
            bar.close()
            if handle is not None:
                handle.close()
    if proc.returncode != 0:
        last = [ln for ln in errors.splitlines() if ln.strip()][-1:] or ["no message"]
        raise UnavailableError(f"realdist measure exited with {proc.returncode}: {last[0]}")
    return out


def error_summary(rows) -> tuple[float, float, int] | None:
    """(median, worst, count) of the absolute relative errors of (label, measured ns or None,
    simulated ns) rows that have a measurement; None when none has."""
    errors = [abs(simulated - measured) / measured
              for _, measured, simulated in rows if measured is not None]
    return (float(np.median(errors)), max(errors), len(errors)) if errors else None


def errors_table(rows, title: str, spread=None) -> str:
    """(label, measured ns or None, simulated ns) rows with their errors, then the median
    and worst absolute error; ``spread``: each row's measured steps' quartiles (p25, p75 in
    ns, or None), printed beside the median."""
    width = max([44] + [len(name) for name, _, _ in rows])
    quartiles = f" {'p25-p75':>13}" if spread is not None else ""
    head = f"{'exercise':<{width}} {'measured':>10}{quartiles} {'simulated':>10} {'error':>8}"
    lines = [title, head, "-" * len(head)]
    for k, (name, measured, simulated) in enumerate(rows):
        middle = ""
        if spread is not None:
            low_high = spread[k]
            middle = f" {'':>13}" if low_high is None or None in low_high else \
                f" {f'{low_high[0] / 1e6:.2f}-{low_high[1] / 1e6:.2f}ms':>13}"
        if measured is None:
            lines.append(f"{name:<{width}} {'-':>10}{middle} {simulated / 1e6:>8.2f}ms {'':>8}")
            continue
        error = (simulated - measured) / measured
        lines.append(f"{name:<{width}} {measured / 1e6:>8.2f}ms{middle} "
                     f"{simulated / 1e6:>8.2f}ms "
                     f"{error * 100:>+7.1f}%")
    summary = error_summary(rows)
    if summary is not None:
        median, worst, count = summary
        lines.append(f"median |error| {median * 100:.1f}%, worst {worst * 100:.1f}% over "
                     f"{count} exercises")
    return "\n".join(lines)
