"""``simdist calibrate``: fit a hardware profile to step times measured on this machine.

By default it measures a plan of real-TF runs (``simdist.calibration.plan``: one process
with one, two and four logical CPUs, one, two and four worker processes, two models at two
batches each) with the measuring protocol (``simdist.calibration.protocol``), fits the
parameters of the step-time model (``simdist.calibration.fit``) and saves the profiles file,
which ``simdist run ... --profiles-file FILE --profile calibrated`` and ``simdist bench
predict`` read. ``--from-csv TABLE`` fits the same parameters to a user's own table of
measured times instead (``simdist.calibration.table``) and predicts the rows marked
``check`` or with no time, printing each error; a table of real networks on GPU profiles
(a published table: ``simdist.calibration.gpu_table``) fits each hardware kind's own costs
(``simdist.calibration.gpu_fit``) and says which it cannot determine. ``--anchor`` measures
three short exercises instead and scales the shipped reference profile to this machine by
them (``simdist.calibration.reference``): a prediction in half a minute, as ``make demo``
makes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simdist.base.errors import InvalidArgumentError
from simdist.base.files import check_outputs
from simdist.calibration.fit import PARAMETERS, SYSTEM, predict, profile_document
from simdist.calibration.gpu_table import GpuRow
from simdist.calibration.plan import calibration_plan, label
from simdist.calibration.profile_file import this_machine, write_profile
from simdist.calibration.reference import ANCHORS, anchor_exercises, anchored, short_description
from simdist.commands import reporting_errors
from simdist.commands.real_measure import (ANCHORED_OUTPUT, DEFAULT_OUTPUT, add_measure_options,
                                           errors_table,
                                           fit_with_progress, measure_with_progress, runs_text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simdist calibrate",
        description="Fit a hardware profile to step times measured on real TensorFlow on this "
                    "machine (or to your own table with --from-csv), print the fit with its "
                    "errors, and save the profiles file.",
        epilog="Then: simdist run mirrored --profiles-file out/calibrated.json --profile "
               "calibrated; simdist bench predict (checks it on other exercises).")
    parser.add_argument("-o", "--output", default=None, metavar="FILE",
                        help=f"the profiles file to write, .json or .yaml (default "
                             f"{DEFAULT_OUTPUT}; with --anchor {ANCHORED_OUTPUT})")
    parser.add_argument("--csv", metavar="FILE", default=None,
                        help="the measurements, a row per exercise as it ends (default: "
                             "beside --output, *_measurements.csv)")
    add_measure_options(parser, "exercise")
    parser.add_argument("--quick", action="store_true",
                        help=f"{len(calibration_plan(1, quick=True))} exercises instead of "
                             f"{len(calibration_plan(1))} (a check that it works, not a "
                             "profile to trust)")
    parser.add_argument("--from-csv", metavar="TABLE", default=None,
                        help="fit your own table of measured times instead of measuring: "
                             "toy exercises on this machine, or zoo models on a hardware "
                             "column's GPU profiles (columns: docs/guides/calibration.md)")
    parser.add_argument("--anchor", action="store_true",
                        help=f"measure {len(ANCHORS)} short exercises only (about half a "
                             "minute) and scale the reference profile shipped with DistLab "
                             "(fitted on a 2-core machine) to this machine by them")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.anchor and (args.from_csv or args.quick):
        print(f"simdist calibrate: error: --anchor measures its own {len(ANCHORS)} exercises: "
              f"not with {'--from-csv' if args.from_csv else '--quick'}", file=sys.stderr)
        return 2
    if args.output is None:
        args.output = ANCHORED_OUTPUT if args.anchor else DEFAULT_OUTPUT
    command = fit_table if args.from_csv else calibrate_anchored if args.anchor else calibrate
    return reporting_errors("simdist calibrate", command, args)


def checked_outputs(args) -> tuple[Path, Path]:
    """(the profile file, the measurements' CSV) of a calibration that measures, checked."""
    output = Path(args.output)
    csv_path = Path(args.csv) if args.csv else output.with_name(
        output.stem + "_measurements.csv")
    check_outputs({"--output": output, "--csv": csv_path})
    if output.suffix.lower() not in (".json", ".yaml", ".yml"):
        raise InvalidArgumentError(f"--output {output}: expected a .json, .yaml or .yml file")
    return output, csv_path


def calibrate(args) -> int:
    output, csv_path = checked_outputs(args)
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


def calibrate_anchored(args) -> int:
    """``--anchor``: the reference profile scaled to this machine by the anchors."""
    output, csv_path = checked_outputs(args)
    print(f"reference profile: {short_description()}")
    plan = anchor_exercises(args.steps)
    print(f"measuring {len(plan)} anchor exercises on real TensorFlow ({runs_text(args)})",
          flush=True)
    measured = measure_with_progress(plan, csv_path, args)
    failed = [label(e) for e, m in zip(plan, measured) if m is None]
    if failed:
        raise InvalidArgumentError(f"anchor(s) not measured (errors in {csv_path}): "
                                   f"{'; '.join(failed)}")
    result = anchored(measured)
    width = max(len(label(e)) for e in plan)
    print(f"{'anchor':<{width}} {'here (ms)':>10} {'reference (ms)':>15} {'ratio':>7}")
    for e, here, there in zip(plan, result.measured_ns, result.reference_ns):
        print(f"{label(e):<{width}} {here / 1e6:>10.3f} {there / 1e6:>15.3f} "
              f"{here / there:>7.2f}")
    print(f"this machine is {result.scale:.2f}x the reference (the median ratio): every "
          f"fitted time scaled by it")
    write_profile(output, profile_document(
        result.fit, machine=f"{this_machine()}: the reference profile scaled "
                            f"{result.scale:.3f}x by {len(plan)} anchors"))
    print(f"profile: {output} (system '{SYSTEM}'). Use it: simdist run mirrored "
          f"--profiles-file {output} --profile {SYSTEM}; for a profile fitted to this machine "
          f"alone: simdist calibrate (about 12 minutes)")
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
    if isinstance(rows[0], GpuRow):
        return fit_published(args, rows, output)
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


def fit_published(args, rows: list, output: Path) -> int:
    """A published table's rows (``GpuRow``): each hardware kind's costs fitted to its own
    rows, the costs it cannot determine named with why, the check rows predicted."""
    from simdist.calibration import gpu_fit

    kinds: dict = {}
    for row in rows:
        kinds.setdefault(row.kind.name, []).append(row)
    fits = []
    for name, kind_rows in kinds.items():
        used = [r for r in kind_rows if r.split == "fit" and r.measured_ns is not None]
        if not used:
            raise InvalidArgumentError(
                f"{args.from_csv}: hardware {name} has no row with a time and split 'fit' "
                f"(lines {', '.join(str(r.line) for r in kind_rows)}): nothing to fit its "
                "costs to")
        fits.append(_fit_with_progress(gpu_fit.fit_kind, used[0].kind, used))
    if len(fits) > 1:
        print(f"{len(fits)} hardware kinds: each fits its own costs to its own rows ("
              + "; ".join(f"{f.kind.name}: {len(f.rows)} row(s)" for f in fits) + ")")
    for kind_fit in fits:
        print()
        print(costs_table(kind_fit))
        print()
        print(errors_table([(r.label, r.measured_ns, s)
                            for r, s in zip(kind_fit.rows, kind_fit.simulated_ns)],
                           f"{kind_fit.kind.name}: fit residuals (the rows the fit used, "
                           "their times as the table gives them)"))
        others = [r for r in kinds[kind_fit.kind.name] if r not in kind_fit.rows]
        if others:
            print()
            print(errors_table([(r.label, r.measured_ns, s) for r, s in
                                zip(others, gpu_fit.predict_rows(kind_fit, others))],
                               f"{kind_fit.kind.name}: predicted (rows marked check, or "
                               "with no time)"))
    write_profile(output, gpu_fit.profile_document(fits, f"the table {args.from_csv}"))
    print(f"\nprofile: {output} (system(s) {', '.join(repr(f.system) for f in fits)}): "
          f"simdist run data_parallel --profiles-file {output} --profile {fits[0].system} "
          "--model ... prices its FLOPs, links and each step's host work as the fit did; "
          "the per-run fixed cost is in its calibration record only")
    return 0


def costs_table(kind_fit) -> str:
    """A kind's costs: fitted ones with their start, then one line per cost the table cannot
    determine (kept at the profile's value) and per cost not fitted, each with why."""
    from simdist.calibration.gpu_fit import COSTS, DISPLAY, LARGER_SHARE, NOT_FITTED

    head = (f"{'cost':<24} {'fitted':>10} {'start':>10}  {'unit':<8} {'+-':>6}  what it "
            "charges")
    lines = [f"{kind_fit.kind.name}: costs fitted to {len(kind_fit.rows)} row(s), starting "
             f"from the profile of system {kind_fit.kind.system}", head, "-" * len(head)]
    kept = []
    for cost in COSTS:
        label, unit, shown = DISPLAY[cost.name]
        if cost.name in kind_fit.undetermined:
            kept.append(f"  {label} ({shown(kind_fit.start[cost.name]):,.4g} {unit}): "
                        f"{kind_fit.undetermined[cost.name]}")
            continue
        spread = kind_fit.spread[cost.name]
        lines.append(f"{label:<24} {shown(kind_fit.costs[cost.name]):>10,.4g} "
                     f"{shown(kind_fit.start[cost.name]):>10,.4g}  {unit:<8} "
                     f"{'>99%' if spread > 0.99 else f'{spread:.1%}':>6}  {cost.what}")
    lines.append("+-: how far the cost moves when each row's time is off by 1%")
    loose = [c.name for c in COSTS if kind_fit.spread.get(c.name, 0) > 0.99]
    if loose:
        lines.append("loosely determined (a 1% error in the rows would move it by more than "
                     "its value):")
        lines += [f"  {DISPLAY[n][0]}: a small share of every row's time; {LARGER_SHARE[n]} "
                  "would set it" for n in loose]
    if kept:
        lines.append("not determined by this table (each kept at the profile's value):")
        lines += kept
    lines.append("not fitted from any table (kept at the profile's values):")
    lines += [f"  {what}: {why}" for what, why in NOT_FITTED]
    return "\n".join(lines)


def _fit_with_progress(fit, kind, rows):
    """``fit(kind, rows, on_progress=...)`` with a progress bar on stderr, its count the
    simulations done."""
    from simdist.commands.real_measure import ProgressBar  # the bar the commands share

    bar = ProgressBar(1, stream=sys.stderr)
    label = f"fitting {kind.name}: simulating the rows"

    def progress(done, total):
        bar.total, bar.done = total, done
        if done % 10 == 0:
            bar.show(label, None)

    try:
        return fit(kind, rows, on_progress=progress)
    finally:
        bar.close()
