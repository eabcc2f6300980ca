"""``simdist bench predict``: the calibrated simulator's step times against real TF runs.

A fixed matrix (``matrix``): every strategy realdist runs in synchronous steps here (default,
one_device, mirrored and central_storage on 1, 2 and 4 logical CPUs, multi_worker_mirrored
on 1, 2 and 4 worker processes) x two models (softmax regression and a 64-unit MLP on the
digits) x two global batches (64 and 1024). None of these is an exercise ``simdist
calibrate`` measured (it runs softmax at 128 and 512 and a 256-unit MLP), so the errors are
predictions, not residuals of the fit. Each row: the simulated step time with the
calibrated profile, the median measured over the steps of three runs (``--repeat``) of 100
steps, the first five steps of each left out (with ``--extra K``, up to K runs more where
they spread), and the error; then the median and worst
absolute error against the target (median <= 10%, worst <= 25%). The CSV (--csv) gets a
row as each measurement ends.

The machine's own speed moves: on the 2-core development machine the same exercise ran
30-50% slower than it had ten minutes before. So predict also measures the calibration's
softmax-at-128 exercises again (``anchors``: their step times at calibration are in the
profile file's record) and prints the median ratio of now to then (``drift``), and the
errors the predictions would have scaled by it: the part of the error that is the machine
changing, not the model. The verdict on the target is on the unscaled errors.

ParameterServerStrategy is left out: its workers step asynchronously through a
ClusterCoordinator, and the coordinator's own cost per scheduled function (25-250 ms
measured here, against the 100 us simdist assumes) is not part of the calibrated profile.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ..calibration import RECORD_FIELDS, SYSTEM, simulated_step_ns
from ..commands import reporting_errors
from ..commands.real_measure import (DEFAULT_OUTPUT, SIZES, add_measure_options, error_summary,
                                     errors_table, label, measure_real, row_of, runs_text)
from ..devices import HardwareCatalog, read_profile_file
from ..errors import InvalidArgumentError
from ..exercises import Exercise

TARGET_MEDIAN, TARGET_WORST = 0.10, 0.25
#: the (model, global batch) of the calibration exercises measured again (``anchors``)
ANCHOR = ("softmax", 128)

MODELS = (("softmax", 32), ("mlp", 64))
BATCHES = (64, 1024)


def matrix(steps: int, quick: bool = False, only=None) -> list[Exercise]:
    """The exercises predicted and measured (``quick``: 4 of them)."""
    sizes = {"mirrored": (2,), "multi_worker_mirrored": (2,)} if quick else SIZES
    models = MODELS[1:] if quick else MODELS
    batches = BATCHES[:1] if quick else BATCHES
    out = []
    for strategy, counts in sizes.items():
        if only and strategy not in only:
            continue
        multi = strategy == "multi_worker_mirrored"
        for n in counts:
            for model, hidden in models:
                for batch in batches:
                    out.append(Exercise(strategy=strategy, model=model, dataset="digits",
                                        hidden=hidden, global_batch=batch, steps=steps,
                                        workers=n if multi else 1,
                                        devices_per_worker=1 if multi else n))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simdist bench predict",
        description="Predict step times with the calibrated profile (simdist calibrate), "
                    "measure them on real TensorFlow, and print the validation table with "
                    "the median and worst error.")
    parser.add_argument("--profiles-file", default=DEFAULT_OUTPUT, metavar="FILE",
                        help=f"the calibrated profile (default {DEFAULT_OUTPUT}, what "
                             "simdist calibrate writes)")
    add_measure_options(parser, "exercise")
    parser.add_argument("--quick", action="store_true",
                        help="4 exercises instead of 44 (a check that it works)")
    parser.add_argument("--only", metavar="STRATEGY[,...]", default=None,
                        help=f"only these strategies: {', '.join(SIZES)}")
    parser.add_argument("--csv", default="out/predict.csv", metavar="FILE",
                        help="a row per exercise as it is measured (default out/predict.csv)")
    return parser


def main(argv=None) -> int:
    return reporting_errors("simdist bench predict", run, build_parser().parse_args(argv))


def load_calibrated(path) -> HardwareCatalog:
    """The catalog with a calibrated system, or an error saying how to make one."""
    path = Path(path)
    if not path.exists():
        raise InvalidArgumentError(
            f"no calibrated profile at {path}: run 'simdist calibrate' first (about 11 min; it "
            f"writes {DEFAULT_OUTPUT}), or give --profiles-file")
    catalog = HardwareCatalog.from_file(path)
    if SYSTEM not in catalog.systems:
        raise InvalidArgumentError(f"{path} has no '{SYSTEM}' system: expected a profile "
                                   "written by simdist calibrate")
    return catalog


def anchors(path, steps: int, only=None) -> list[tuple[Exercise, float]]:
    """Calibration exercises to measure again, with the step time (ns) ``simdist calibrate``
    measured for each: the ``ANCHOR`` model and batch on every strategy and size the profile
    file's record holds (none for a profile without that record)."""
    record = (read_profile_file(Path(path)).get("calibration") or {}).get("exercises") or []
    out = []
    for row in record:
        fields = {k: row["exercise"][k] for k in RECORD_FIELDS}
        if ((fields["model"], fields["global_batch"]) == ANCHOR
                and (not only or fields["strategy"] in only)):
            out.append((Exercise(**fields, steps=steps), float(row["measured_ns"])))
    return out


def drift(pairs) -> float | None:
    """How many times its step time at calibration the machine takes now: the median of
    (measured now / measured then) over the anchors measured (None: none was)."""
    ratios = [now / then for now, then in pairs if now is not None]
    return float(np.median(ratios)) if ratios else None


def run(args) -> int:
    only = None
    if args.only:
        only = [s.strip() for s in args.only.split(",")]
        unknown = [s for s in only if s not in SIZES]
        if unknown:
            raise InvalidArgumentError(f"--only {args.only}: unknown strategy "
                                       f"{', '.join(unknown)}: expected {', '.join(SIZES)}")
    catalog = load_calibrated(args.profiles_file)
    exercises = matrix(args.steps, args.quick, only)
    simulated = [simulated_step_ns(e, catalog) for e in exercises]
    again = [] if args.quick else anchors(args.profiles_file, args.steps, only)
    print(f"predicted {len(exercises)} exercises with '{SYSTEM}' from {args.profiles_file}; "
          f"measuring them on real TensorFlow ({runs_text(args)}), with {len(again)} "
          f"exercises of the calibration again (how far the machine's speed moved since)",
          flush=True)
    n = len(exercises)

    def more(k, m):
        if k >= n:
            return {"set": "anchor", "simulated_ms": "",
                    "error_pct": "", "calibration_ms": again[k - n][1] / 1e6}
        s = simulated[k]
        return {"set": "validation", "simulated_ms": s / 1e6, "calibration_ms": "",
                "error_pct": "" if m is None else round(100 * (s - m.median_ns) / m.median_ns,
                                                        2)}

    measured = measure_real(exercises + [e for e, _ in again], Path(args.csv), args.timeout,
                            args.repeat, more=more, extra=args.extra,
                            more_fields=("set", "simulated_ms", "error_pct", "calibration_ms"))
    rows = [(label(e), None if m is None else m.median_ns, s)
            for e, s, m in zip(exercises, simulated, measured)]
    print(errors_table(rows, "validation: simulated (calibrated profile) vs measured "
                             "(real TF, median step)"))
    summary = error_summary(rows)
    if summary is None:
        return 0
    median, worst, _ = summary
    verdict = "met" if median <= TARGET_MEDIAN and worst <= TARGET_WORST else "missed"
    print(f"target: median <= {TARGET_MEDIAN:.0%}, worst <= {TARGET_WORST:.0%}: {verdict} "
          f"(median {median:.1%}, worst {worst:.1%}); rows in {args.csv}")
    factor = drift([(None if m is None else m.median_ns, then)
                    for m, (_, then) in zip(measured[n:], again)])
    if factor is not None:
        adjusted = error_summary([(name, m, s * factor) for name, m, s in rows])
        print(f"the machine's speed: the calibration's {len(again)} {ANCHOR[0]} batch "
              f"{ANCHOR[1]} exercises took {factor:.2f}x their calibrated step time (median "
              f"ratio); with every prediction scaled by that, median {adjusted[0]:.1%}, worst "
              f"{adjusted[1]:.1%}: the part of the error that is the machine changing speed "
              f"between the two commands, not the model")
    return 0
