"""What the commands that measure on real TensorFlow (``simdist calibrate``, ``simdist bench
predict``) share: their measuring options, the progress bars over the measuring and the fit,
and the tables of errors they print. The plan, the measuring protocol, the measuring itself
and the fit are the calibration layer's (``simdist.calibration``)."""

from __future__ import annotations

import sys

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.calibration.fit import Measurement, fit
from simdist.calibration.measuring import measure_real
from simdist.calibration.protocol import (EXTRA_RUNS, MIN_STEPS, REPEAT, SETTLED, SKIPPED_STEPS,
                                          STEPS)
from simdist.commands import option_type, timeout_seconds, whole_number, whole_number_or_zero
from simdist.commands.progress import ProgressBar

#: where simdist calibrate writes the profile, and simdist bench predict reads it
DEFAULT_OUTPUT = "out/calibrated.json"
#: where simdist calibrate --anchor writes the reference profile scaled to this machine
ANCHORED_OUTPUT = "out/anchored.json"


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


def add_measure_options(parser, what: str) -> None:
    """--steps, --repeat, --extra and --timeout, the same for every command that measures."""
    parser.add_argument("--steps", type=option_type(check_steps), default=STEPS,
                        help=f"training steps per run of each {what}; the first "
                             f"{SKIPPED_STEPS} of a run are left out (default {STEPS}: a run "
                             f"of 40 steps lasts a few tenths of a second here, and its median "
                             f"moves about twice as much from run to run)")
    parser.add_argument("--repeat", type=option_type(whole_number), default=REPEAT,
                        help="runs per exercise, each pass through the plan in its own "
                             f"shuffled order, their steps pooled (default {REPEAT})")
    parser.add_argument("--extra", type=option_type(whole_number_or_zero), default=EXTRA_RUNS,
                        help=f"then up to this many more runs of each {what} whose runs' "
                             f"medians still spread (standard error over {SETTLED:.0%}% of "
                             f"their mean; default {EXTRA_RUNS}, 0: none)")
    parser.add_argument("--timeout", type=option_type(timeout_seconds), default=300,
                        help="seconds each run may take (default 300)")


def runs_text(args) -> str:
    """How an exercise is measured, from --repeat, --extra and --steps, for a command's
    first line."""
    more = f", up to {args.extra} more where they spread" if args.extra else ""
    runs = "1 run" if args.repeat == 1 else f"{args.repeat} runs"
    return f"{runs} of {args.steps} steps each{more}"


def measure_with_progress(exercises, csv_path, args, stream=None, more=None, more_fields=()
                          ) -> list[Measurement | None]:
    """``measure_real`` with the options of ``add_measure_options`` and a progress bar on
    ``stream`` (stderr by default)."""
    bar = ProgressBar(0, stream=stream)

    def progress(done, total, what, eta_s):
        bar.done, bar.total = done, total
        bar.show(what, eta_s)

    try:
        return measure_real(exercises, csv_path, args.timeout, args.repeat, more=more,
                            more_fields=more_fields, extra=args.extra, on_progress=progress)
    finally:
        bar.close()


def fit_with_progress(measurements):
    """``fit`` with a progress bar on stderr, its count the simulations done."""
    bar = ProgressBar(1, stream=sys.stderr)
    bar.show("fitting: simulating the exercises", None)

    def progress(done, total):
        bar.total = total
        bar.done = done
        if done % 10 == 0 or done == total:
            bar.show("fitting: simulating the exercises", None)

    try:
        return fit(measurements, on_progress=progress)
    finally:
        bar.close()


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
