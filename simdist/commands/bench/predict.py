"""``simdist bench predict``: the calibrated simulator's step times against real TF runs.

A fixed matrix (``matrix``): every strategy realdist runs in synchronous steps here (default,
one_device, mirrored and central_storage on 1, 2 and 4 logical CPUs, multi_worker_mirrored on
1, 2 and 4 worker processes) x two models on the digits x two global batches: softmax
regression at 128 and 512, a 64-unit MLP at 64 and 1024; and ParameterServerStrategy on 1 and 2
workers with one ps, softmax at 128 and the MLP at 64, 2 steps per scheduled function
(``PS_MODELS``). None of these is an exercise ``simdist calibrate`` measured (it runs softmax
at 64 and 1024 and a 256-unit MLP; ParameterServerStrategy at softmax 64, 1 and 4 steps per
function), so the errors are predictions, not residuals of the fit. Each row: the simulated
step time with the calibrated profile, the median (and quartiles) measured over the steps of
three runs (``--repeat``) of 100 steps, the first five steps of each left out (with ``--extra
K``, up to K runs more where they spread: the measuring protocol,
``simdist.calibration.protocol``), and the error; then the median and worst absolute error
against the target (median <= 10%, worst <= 25%). The CSV (--csv) gets a row as each
measurement ends.

The machine's own speed moves: on the 2-core development machine the same exercise ran
30-50% slower than it had ten minutes before. So predict also measures the calibration's
softmax-at-64 exercises again (``anchors``: their step times at calibration are in the
profile file's record) and prints the median ratio of now to then (``drift``), and the
errors the predictions would have scaled by it: the part of the error that is the machine
changing, not the model. The verdict on the target is on the unscaled errors.

``--one-session`` removes that drift instead of measuring it: the calibration's own plan
(``simdist calibrate``'s exercises) is measured again in the same ``realdist measure``
process, each pass alternating calibration and validation exercises, a profile is fitted to
the calibration rows only and written beside the CSV, and the matrix is predicted with it.
The validation rows still play no part in the fit, so the errors are still predictions; the
two sets just see the same machine. It takes about as long as calibrate and predict together.

ParameterServerStrategy's workers step asynchronously through a ClusterCoordinator, so a
step has no time of its own: its rows are the coordinator's step rate, the time from the
start of a run's first function to the end of its last over the run's steps (measured by
``realdist measure``, the function's tracing before the first one left out; simulated over the
run's own steps, epochs included), measured with the same repeats as the other rows. The
calibrated profile prices the coordinator's cost per scheduled function
(``HostCosts.schedule_overhead_ns``: tens of ms measured here, against the 100 us of the
built-in profiles), which ``simdist calibrate`` fits from its ParameterServerStrategy
exercises at two numbers of steps per function.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.base.files import check_outputs, write_csv
from simdist.calibration.fit import RECORD_FIELDS, SYSTEM, profile_document, simulated_step_ns
from simdist.calibration.plan import (ASYNCHRONOUS, SIZES, calibration_plan, label,
                                      sized_exercise)
from simdist.calibration.profile_file import this_machine, write_profile
from simdist.commands import reporting_errors
from simdist.commands.real_measure import (DEFAULT_OUTPUT, add_measure_options, error_summary,
                                           errors_table, fit_with_progress, measure_with_progress,
                                           runs_text)
from simdist.hardware.devices import HardwareCatalog, read_profile_file
from simdist.training.exercises import Exercise

TARGET_MEDIAN, TARGET_WORST = 0.10, 0.25
#: the (model, global batch) of the calibration exercises measured again (``anchors``)
ANCHOR = ("softmax", 64)

#: (model, hidden units, global batch): each on every synchronous strategy and size
MODELS = (("softmax", 32, 128), ("softmax", 32, 512), ("mlp", 64, 64), ("mlp", 64, 1024))
#: ParameterServerStrategy's: fewer (a run takes seconds: tens of ms per function), at
#: ``PS_STEPS_PER_EXECUTION`` steps per function, between the calibration's 1 and 4
PS_MODELS = (("softmax", 32, 128), ("mlp", 64, 64))
PS_STEPS_PER_EXECUTION = 2


def matrix(steps: int, quick: bool = False, only=None) -> list[Exercise]:
    """The exercises predicted and measured (``quick``: 2 of them)."""
    sizes = {"mirrored": (2,), "multi_worker_mirrored": (2,)} if quick else SIZES
    out = []
    for strategy, counts in sizes.items():
        if only and strategy not in only:
            continue
        if strategy in ASYNCHRONOUS:
            out += [sized_exercise(strategy, n, *model, steps, PS_STEPS_PER_EXECUTION)
                    for n in counts for model in PS_MODELS]
            continue
        models = MODELS[2:3] if quick else MODELS
        out += [sized_exercise(strategy, n, *model, steps) for n in counts for model in models]
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
                        help="2 exercises instead of 48 (a check that it works)")
    parser.add_argument("--only", metavar="STRATEGY[,...]", default=None,
                        help=f"only these strategies: {', '.join(SIZES)}")
    parser.add_argument("--csv", default="out/predict.csv", metavar="FILE",
                        help="a row per exercise as it is measured (default out/predict.csv)")
    parser.add_argument("--one-session", action="store_true",
                        help="calibrate here too: measure simdist calibrate's exercises "
                             "alternating with these in one session, fit a profile to them "
                             "(written beside --csv, *_profile.json) and predict with it "
                             "instead of reading --profiles-file (the machine's speed cannot "
                             "move between calibration and prediction; about twice as long)")
    return parser


def main(argv=None) -> int:
    return reporting_errors("simdist bench predict", run, build_parser().parse_args(argv))


def load_calibrated(path) -> HardwareCatalog:
    """The catalog with a calibrated system, or an error saying how to make one."""
    path = Path(path)
    if not path.exists():
        raise InvalidArgumentError(
            f"no calibrated profile at {path}: run 'simdist calibrate' first (about 10 min; it "
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
                and fields["strategy"] not in ASYNCHRONOUS  # a rate, not a step's time
                and (not only or fields["strategy"] in only)):
            out.append((Exercise(**fields, steps=steps), float(row["measured_ns"])))
    return out


def drift(pairs) -> float | None:
    """How many times its step time at calibration the machine takes now: the median of
    (measured now / measured then) over the anchors measured (None: none was)."""
    ratios = [now / then for now, then in pairs if now is not None]
    return float(np.median(ratios)) if ratios else None


def run(args) -> int:
    session_profile = Path(args.csv).with_name(Path(args.csv).stem + "_profile.json")
    check_outputs({"--csv": args.csv,
                   "--one-session's profile": session_profile if args.one_session else None},
                  {"--profiles-file": None if args.one_session else args.profiles_file})
    only = None
    if args.only:
        only = [s.strip() for s in args.only.split(",")]
        unknown = [s for s in only if s not in SIZES]
        if unknown:
            raise InvalidArgumentError(f"--only {args.only}: unknown strategy "
                                       f"{', '.join(unknown)}: expected {', '.join(SIZES)}")
    exercises = matrix(args.steps, args.quick, only)
    if args.one_session:
        simulated, measured = _one_session(args, exercises, only)
    else:
        simulated, measured, again = _after_calibrate(args, exercises, only)
    rows = [(label(e), None if m is None else m.median_ns, s)
            for e, s, m in zip(exercises, simulated, measured)]
    print(errors_table(rows, "validation: simulated (calibrated profile) vs measured "
                             "(real TF: the median step, and the quartiles of the steps)",
                       spread=[None if m is None else (m.p25_ns, m.p75_ns)
                               for m in measured[:len(exercises)]]))
    summary = error_summary(rows)
    if summary is None:
        return 0
    median, worst, _ = summary
    verdict = "met" if median <= TARGET_MEDIAN and worst <= TARGET_WORST else "missed"
    print(f"target: median <= {TARGET_MEDIAN:.0%}, worst <= {TARGET_WORST:.0%}: {verdict} "
          f"(median {median:.1%}, worst {worst:.1%}); rows in {args.csv}")
    if args.one_session:
        return 0
    n = len(exercises)
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


def _after_calibrate(args, exercises, only):
    """Predict with the profile ``simdist calibrate`` wrote, then measure the matrix and the
    anchors: (simulated, measured: the matrix's then the anchors', anchors)."""
    catalog = load_calibrated(args.profiles_file)
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
        return {"set": "validation", "simulated_ms": simulated[k] / 1e6, "calibration_ms": "",
                "error_pct": "" if m is None else _error_pct(simulated[k], m.median_ns)}

    measured = measure_with_progress(
        exercises + [e for e, _ in again], Path(args.csv), args, more=more,
        more_fields=("set", "simulated_ms", "error_pct", "calibration_ms"))
    return simulated, measured, again


def _error_pct(simulated_ns: float, measured_ns: float) -> float:
    """A CSV cell: the error of a simulated time against a measured one, in %."""
    return round(100 * (simulated_ns - measured_ns) / measured_ns, 2)


def alternate(first, second) -> list:
    """The items of two lists taken in turn (the rest of the longer one at the end)."""
    out = []
    for k in range(max(len(first), len(second))):
        out += first[k:k + 1] + second[k:k + 1]
    return out


def _one_session(args, exercises, only):
    """``--one-session``: measure the calibration plan and the matrix alternating in one
    process, fit a profile to the calibration rows and predict the matrix with it:
    (simulated, measured) of the matrix. The CSV is written again at the end, each row with
    its simulated time and error (residuals, for the calibration rows)."""
    plan = [e for e in calibration_plan(args.steps, args.quick)
            if not only or e.strategy in only]
    both = alternate([("calibration", e) for e in plan], [("validation", e) for e in exercises])
    csv_path = Path(args.csv)
    print(f"measuring {len(plan)} calibration and {len(exercises)} validation exercises "
          f"alternating on real TensorFlow ({runs_text(args)}); then fitting a profile to the "
          f"calibration rows and predicting the others with it", flush=True)
    written = []  # the index in ``both`` of each CSV row, in the order they come

    def more(k, m):
        written.append(k)
        return {"set": both[k][0]}

    measured = measure_with_progress([e for _, e in both], csv_path, args, more=more,
                                     more_fields=("set", "simulated_ms", "error_pct"))
    fitted = [m for (which, _), m in zip(both, measured) if which == "calibration" and m]
    if not fitted:
        raise InvalidArgumentError("no calibration exercise could be measured: nothing to fit"
                                   f" (errors in {csv_path})")
    result = fit_with_progress(fitted)
    print(errors_table([(label(m.exercise), m.median_ns, s)
                        for m, s in zip(result.measurements, result.simulated_ns)],
                       "fit residuals (the calibration exercises of this session)",
                       spread=[(m.p25_ns, m.p75_ns) for m in result.measurements]))
    profile = csv_path.with_name(csv_path.stem + "_profile.json")  # as run() checked
    write_profile(profile, profile_document(result, machine=this_machine()))
    print(f"profile: {profile} (system '{SYSTEM}')\n")
    simulated_all = [simulated_step_ns(e, result.catalog) for _, e in both]
    _write_errors(csv_path, [simulated_all[k] for k in written])
    validation = [(s, m) for (which, _), s, m in zip(both, simulated_all, measured)
                  if which == "validation"]
    return [s for s, _ in validation], [m for _, m in validation]


def _write_errors(csv_path: Path, simulated: list[float]) -> None:
    """Fill the CSV's rows, in order, with ``simulated`` (ns) and their errors."""
    with open(csv_path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, list(reader)
    for row, s in zip(rows, simulated, strict=True):
        row["simulated_ms"] = s / 1e6
        if row["median_ms"]:
            row["error_pct"] = _error_pct(s, float(row["median_ms"]) * 1e6)
    write_csv(csv_path, fields, rows)
