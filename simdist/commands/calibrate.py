"""``simdist calibrate``: fit a hardware profile to step times measured on this machine.

By default it measures a plan of real-TF runs (``simdist.calibration.plan``: one process
with one, two and four logical CPUs, one, two and four worker processes, two models at two
batches each) with the measuring protocol (``simdist.calibration.protocol``), fits the
parameters of the step-time model (``simdist.calibration.fit``) and saves the profiles file,
which ``simdist run ... --profiles-file FILE --profile calibrated`` and ``simdist bench
predict`` read. ``--from-csv TABLE`` fits the same parameters to a user's own table of
measured times instead (``simdist.calibration.table``) and predicts the rows marked
``check`` or with no time, printing each error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simdist.base.errors import InvalidArgumentError
from simdist.base.files import check_outputs
from simdist.calibration.fit import PARAMETERS, SYSTEM, predict, profile_document
from simdist.calibration.plan import calibration_plan, label
from simdist.calibration.profile_file import this_machine, write_profile
from simdist.commands import reporting_errors
from simdist.commands.real_measure import (DEFAULT_OUTPUT, add_measure_options, errors_table,
                                           fit_with_progress, measure_with_progress, runs_text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simdist calibrate",
        description="Fit a hardware profile to step times measured on real TensorFlow on this "
                    "machine (or to your own table with --from-csv), print the fit with its "
                    "errors, and save the profiles file.",
        epilog="Then: simdist run mirrored --profiles-file out/calibrated.json --profile "
               "calibrated; simdist bench predict (checks it on other exercises).")
    parser.add_argument("-o", "--output", default=DEFAULT_OUTPUT, metavar="FILE",
                        help=f"the profiles file to write, .json or .yaml (default "
                             f"{DEFAULT_OUTPUT})")
    parser.add_argument("--csv", metavar="FILE", default=None,
                        help="the measurements, a row per exercise as it ends (default: "
                             "beside --output, *_measurements.csv)")
    add_measure_options(parser, "exercise")
    parser.add_argument("--quick", action="store_true",
                        help="3 exercises instead of 44 (a check that it works, not a "
                             "profile to trust)")
    parser.add_argument("--from-csv", metavar="TABLE", default=None,
                        help="fit your own table of measured times instead of measuring "
                             "(columns: see simdist.calibration.table)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return reporting_errors("simdist calibrate", fit_table if args.from_csv else calibrate, args)


def calibrate(args) -> int:
    output = Path(args.output)
    csv_path = Path(args.csv) if args.csv else output.with_name(
        output.stem + "_measurements.csv")
    check_outputs({"--output": output, "--csv": csv_path})
    if output.suffix.lower() not in (".json", ".yaml", ".yml"):
        raise InvalidArgumentError(f"--output {output}: expected a .json, .yaml or .yml file")
    plan = calibration_plan(args.steps, args.quick)
    print(f"measuring {len(plan)} exercises on real TensorFlow ({runs_text(args)}; rows in "
          f"{csv_path})", flush=True)
    measured = measure_with_progress(plan, csv_path, args)
    failed = [label(e) for e, m in zip(plan, measured) if m is None]
    if failed:
        print(f"not measured (errors in {csv_path}): {'; '.join(failed)}", file=sys.stderr)
    measurements = [m for m in measured if m is not None]
    if not measurements:
        raise InvalidArgumentError("no exercise could be measured: nothing to fit")
    result = fit_with_progress(measurements)
    print(parameters_table(result.parameters))
    print()
    print(errors_table([(label(m.exercise), m.median_ns, s)
                        for m, s in zip(result.measurements, result.simulated_ns)],
                       "fit residuals (the exercises the fit used)",
                       spread=[(m.p25_ns, m.p75_ns) for m in result.measurements]))
    write_profile(output, profile_document(result, machine=this_machine()))
    print(f"\nprofile: {output} (system '{SYSTEM}'). Use it: simdist run mirrored "
          f"--profiles-file {output} --profile {SYSTEM}; check it on other exercises: "
          f"simdist bench predict --profiles-file {output}")
    return 0


def parameters_table(parameters: dict) -> str:
    """The fitted parameters, one per line with its unit and meaning."""
    width = max(len(p.name) for p in PARAMETERS)
    head = f"{'parameter':<{width}} {'value':>12}  {'unit':<9} what it charges"
    lines = ["fitted parameters", head, "-" * len(head)]
    for p in PARAMETERS:
        lines.append(f"{p.name:<{width}} {parameters[p.name]:>12,.1f}  {p.unit:<9} {p.what}")
    return "\n".join(lines)


def fit_table(args) -> int:
    from simdist.calibration.table import read_table, underdetermined

    output = Path(args.output)
    check_outputs({"--output": output}, {"--from-csv": args.from_csv})
    rows = read_table(args.from_csv)
    used = [r for r in rows if r.split == "fit" and r.step_ns is not None]
    if not used:
        raise InvalidArgumentError(f"{args.from_csv}: no row with a time and split 'fit': "
                                   "nothing to fit")
    warning = underdetermined(args.from_csv, rows)
    if warning:
        print(f"simdist calibrate: warning: {warning}", file=sys.stderr, flush=True)
    result = fit_with_progress([r.measurement for r in used])
    print(parameters_table(result.parameters))
    print()
    print(errors_table([(f"line {r.line}: {label(r.exercise)}", r.step_ns, s)
                        for r, s in zip(used, result.simulated_ns)],
                       "fit residuals (step times of the rows the fit used)"))
    others = [r for r in rows if r not in used]
    if others:
        simulated = predict(result.parameters, [r.exercise for r in others])
        print()
        print(errors_table([(f"line {r.line}: {label(r.exercise)}", r.step_ns, s)
                            for r, s in zip(others, simulated)],
                           "predicted (rows marked check, or with no time; step times)"))
    write_profile(output, profile_document(result, machine=f"the table {args.from_csv}"))
    print(f"\nprofile: {output} (system '{SYSTEM}')")
    return 0
