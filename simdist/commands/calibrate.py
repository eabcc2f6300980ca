"""``simdist calibrate``: fit a hardware profile to step times measured on this machine.

By default it measures a plan of real-TF runs (``calibration_plan``: one process with one,
two and four logical CPUs, one, two and four worker processes, two models at two batches
each), fits the parameters of the step-time model (``simdist.calibration.fit``) and
saves the profiles file, which ``simdist run ... --profiles-file FILE --profile calibrated``
and ``simdist bench predict`` read. ``--from-csv TABLE`` fits the same parameters to a
user's own table of measured times instead (``simdist.calibration.table``) and predicts the
rows marked ``check`` or with no time, printing each error.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

from simdist.calibration.fit import PARAMETERS, SYSTEM, Measurement, fit, predict, profile_document
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise
from simdist.base.files import check_output
from simdist.commands import reporting_errors
from simdist.commands.real_measure import (DEFAULT_OUTPUT, SIZES, add_measure_options, errors_table, label,
                           measure_real, runs_text)


def sized_exercise(strategy, size, model, hidden, batch, steps) -> Exercise:
    """``strategy`` on ``size`` logical CPUs of one process, or on ``size`` worker processes
    for multi_worker_mirrored."""
    multi = strategy == "multi_worker_mirrored"
    return Exercise(strategy=strategy, model=model,
                    dataset="regression" if model == "linear" else "digits",
                    hidden=hidden, global_batch=batch, steps=steps,
                    workers=size if multi else 1, devices_per_worker=1 if multi else size)


def calibration_plan(steps: int, quick: bool = False) -> list[Exercise]:
    """What ``simdist calibrate`` measures: every strategy and size that ``simdist bench
    predict`` checks, with other batches and models: softmax regression on the digits at 64
    and 1024 (64 pixels an example: input bytes, few FLOPs) and a 256-unit MLP at 128 and 900
    (FLOPs, and the largest gradients). predict uses softmax at 128 and 512, between those,
    and a 64-unit MLP, a model calibrate never runs, at 64 and 1024.

    The span is the matrix's on purpose: a step's time does not grow in a line with the
    batch here (on 2026-11-26, fitted on softmax at 128 and 512, the in-process exercises at
    1024 came out 9-29% long), so the calibration brackets the batches it is asked about
    rather than leaving predict to extrapolate. At 1024 the digits' 1797 examples come in
    batches of 1024 and 773 in turn; the simulator's median step is the middle of the two,
    as the measured median is. 900 cuts them into two near-equal batches (900 and 897)."""
    models = (("softmax", 32, 64), ("softmax", 32, 1024), ("mlp", 256, 128),
              ("mlp", 256, 900))
    plan = [(strategy, n, *model) for strategy, counts in SIZES.items() for n in counts
            for model in models]
    if quick:
        plan = [("one_device", 1, "linear", 32, 128), ("mirrored", 2, "mlp", 256, 256),
                ("multi_worker_mirrored", 2, "linear", 32, 128)]
    return [sized_exercise(*row, steps) for row in plan]


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
    check_output(output, "--output")
    if output.suffix.lower() not in (".json", ".yaml", ".yml"):
        raise InvalidArgumentError(f"--output {output}: expected a .json, .yaml or .yml file")
    csv_path = Path(args.csv) if args.csv else output.with_name(
        output.stem + "_measurements.csv")
    plan = calibration_plan(args.steps, args.quick)
    print(f"measuring {len(plan)} exercises on real TensorFlow ({runs_text(args)}; rows in "
          f"{csv_path})", flush=True)
    measured = measure_real(plan, csv_path, args.timeout, args.repeat, extra=args.extra)
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


def this_machine() -> str:
    """The machine measured, for a profile's description."""
    return f"{platform.node()} ({platform.machine()}, {platform.processor() or 'cpu'})"


def fit_with_progress(measurements):
    from simdist.commands.bench.scale import ProgressBar

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


def write_profile(path: Path, document: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    else:
        import yaml

        path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")


def parameters_table(parameters: dict) -> str:
    """The fitted parameters, one per line with its unit and meaning."""
    head = f"{'parameter':<18} {'value':>12}  {'unit':<9} what it charges"
    lines = ["fitted parameters", head, "-" * len(head)]
    for p in PARAMETERS:
        lines.append(f"{p.name:<18} {parameters[p.name]:>12,.1f}  {p.unit:<9} {p.what}")
    return "\n".join(lines)


def fit_table(args) -> int:
    from simdist.calibration.table import read_table

    rows = read_table(args.from_csv)
    used = [r for r in rows if r.split == "fit" and r.step_ns is not None]
    if not used:
        raise InvalidArgumentError(f"{args.from_csv}: no row with a time and split 'fit': "
                                   "nothing to fit")
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
    output = Path(args.output)
    check_output(output, "--output")
    write_profile(output, profile_document(result, machine=f"the table {args.from_csv}"))
    print(f"\nprofile: {output} (system '{SYSTEM}')")
    return 0


__all__ = ["Measurement", "build_parser", "calibration_plan", "main"]
