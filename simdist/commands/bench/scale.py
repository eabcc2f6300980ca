"""``simdist bench scale``: how the simulator's cost grows with the simulated devices.

Workload: ``simdist run data_parallel`` (synchronous data-parallel training of a model of
--params parameters, size-only gradients, ring all-reduce), D workers x --steps steps, for D
from 64 to 4,096, at each fidelity (message: every message of the ring; flow: one flow per
phase), tracing off and on, in one and in two MPI ranks. Each point runs in a process of
its own (``mpiexec -n 2`` for two ranks), which reports the run's wall time, the kernel's
events and the peak resident memory of its ranks together. Then: the speed-up of flow over
message at each D, and the growth law of events and wall time in D (a least-squares line
through log-log points). A point estimated over --max-point-s is not run (its events by the
fitted law, or the program's event count from one point, at the seconds per event measured
at the largest point): the table shows the estimate. Last, the target run: 1,024 workers x
100 steps in flow mode, tracing off, one rank, under 60 s.

The CSV (--csv) gets a row as each point ends. This module reads the wall clock: it
measures the simulator from outside; the simulator itself never does.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import NamedTuple

DEVICES = (64, 128, 256, 512, 1024, 2048, 4096)
QUICK_DEVICES = (8, 32)
TARGET = {"devices": 1024, "steps": 100, "seconds": 60.0}
FIELDS = ["devices", "fidelity", "trace", "ranks", "steps", "status", "wall_s", "events",
          "events_per_s", "messages", "flows", "peak_mb", "estimate_s"]


class Point(NamedTuple):
    """One run of the matrix."""

    devices: int
    fidelity: str
    trace: bool
    ranks: int

    @property
    def series(self) -> tuple:
        return self.fidelity, self.trace, self.ranks

    def describe(self) -> str:
        return (f"{self.devices} devices, {self.fidelity}, trace "
                f"{'on' if self.trace else 'off'}, {self.ranks} rank(s)")


def events_model(devices: int, steps: int, fidelity: str) -> int:
    """About the events of a point: the program's own estimate (``data_parallel.cost``)."""
    from simdist.training.programs.data_parallel import cost

    return cost(argparse.Namespace(workers=devices, steps=steps, fidelity=fidelity))


# -- one point, in its own process ----------------------------------------------------------

def run_point(devices: int, fidelity: str, trace: bool, steps: int, params: float,
              transport=None) -> dict | None:
    """Run one point here (under mpiexec: on every rank); rank 0 returns its measures."""
    import resource

    from simdist.training.programs.data_parallel import train
    from simdist.sim.scheduler import simulate

    if transport is not None:
        transport.barrier()
    start = time.perf_counter()
    result = simulate({"worker": devices}, lambda ctx: train(ctx, int(params), steps, 32),
                      trace=trace, transport=transport, fidelity=fidelity)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    peaks = [peak] if transport is None else transport.gather(peak)
    if result.rank != 0:
        return None
    return {"wall_s": seconds, "events": result.events, "messages": result.messages,
            "flows": result.flows, "peak_mb": sum(peaks) / 1e6,
            "trace_records": result.trace.records() if result.trace else 0}


def _point_main(argv) -> int:
    """``python -m simdist.commands.bench.scale --point D FIDELITY TRACE STEPS PARAMS``: one JSON
    line on rank 0."""
    from simdist.sim.launcher import under_mpiexec

    devices, fidelity, trace, steps, params = argv
    transport = None
    if under_mpiexec():
        from simdist.sim.transports import MPITransport

        transport = MPITransport()
    measured = run_point(int(devices), fidelity, trace == "on", int(steps), float(params),
                         transport)
    if measured is not None:
        print(json.dumps(measured), flush=True)
    return 0


def measure(point: Point, steps: int, params: float, timeout: float) -> dict:
    """Run one point in a new process (two ranks: under mpiexec); its measures, or
    {"status": "failed", "error": ...}."""
    import subprocess

    from simdist.base.processes import die_with_parent
    from simdist.sim.launcher import run_mpi

    args = ["-m", "simdist.commands.bench.scale", "--point", str(point.devices), point.fidelity,
            "on" if point.trace else "off", str(steps), repr(params)]
    try:
        if point.ranks == 1:
            proc = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                                  timeout=timeout, preexec_fn=die_with_parent)
        else:
            proc = run_mpi(point.ranks, args, timeout=timeout)
    except (subprocess.TimeoutExpired, TimeoutError):
        return {"status": "failed", "error": f"over {timeout:.0f} s"}
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines() or ["no output"]
        return {"status": "failed", "error": f"exit {proc.returncode}: {lines[-1][:200]}"}
    measured = json.loads(proc.stdout.strip().splitlines()[-1])
    measured["status"] = "measured"
    measured["events_per_s"] = measured["events"] / measured["wall_s"]
    return measured


# -- the growth law -------------------------------------------------------------------------

def fit_power_law(xs, ys) -> tuple[float, float]:
    """(c, b) of y = c x^b: least squares on log y = log c + b log x (two points or more)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    b = sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sxx
    return math.exp(my - b * mx), b


def estimate_seconds(done: list[dict], point: Point, steps: int) -> float | None:
    """A point's wall time from its series' measured points: its events (by the fitted law
    from two points or more, by the program's event count from one) at the seconds per
    event of the largest point measured (wall times on a shared machine are noisier than
    event counts); None from none."""
    mine = sorted((r for r in done if (r["fidelity"], r["trace"], r["ranks"]) == point.series
                   and r["status"] == "measured"), key=lambda r: r["devices"])
    if not mine:
        return None
    last = mine[-1]
    if len(mine) >= 2:
        c, b = fit_power_law([r["devices"] for r in mine], [r["events"] for r in mine])
        events = c * point.devices ** b
    else:
        events = last["events"] * (events_model(point.devices, steps, point.fidelity)
                                   / events_model(last["devices"], steps, point.fidelity))
    return events * last["wall_s"] / last["events"]


def growth_laws(rows: list[dict]) -> list[str]:
    """One line per series with two measured points or more: events and wall time ~ D^b."""
    lines = []
    for series in sorted({(r["fidelity"], r["trace"], r["ranks"]) for r in rows},
                         key=lambda s: (s[0] != "message", s[1], s[2])):
        mine = [r for r in rows if (r["fidelity"], r["trace"], r["ranks"]) == series
                and r["status"] == "measured"]
        if len(mine) < 2:
            continue
        xs = [r["devices"] for r in mine]
        ce, be = fit_power_law(xs, [r["events"] for r in mine])
        cw, bw = fit_power_law(xs, [r["wall_s"] for r in mine])
        fidelity, trace, ranks = series
        lines.append(f"  {fidelity:<8} trace {'on ' if trace else 'off'} {ranks} rank(s): "
                     f"events = {ce:.3g} D^{be:.2f}, wall = {cw:.3g} D^{bw:.2f} s "
                     f"(D = {min(xs)}..{max(xs)}, {len(mine)} points)")
    return lines


# -- output -------------------------------------------------------------------------------

def _num(value, fmt) -> str:
    return "" if value in (None, "") else format(value, fmt)


def format_table(rows: list[dict]) -> str:
    head = (f"{'devices':>7}  {'fidelity':<8} {'trace':<5} {'ranks':>5} {'wall s':>9} "
            f"{'events':>11} {'events/s':>10} {'peak MB':>8}  note")
    out = [head, "-" * len(head)]
    for r in rows:
        if r["status"] == "measured":
            note = ""
        elif r["status"] == "skipped":
            note = f"not run: ~{r['estimate_s']:,.0f} s estimated"
        else:
            note = f"failed: {r.get('error', '')}"
        out.append(f"{r['devices']:>7}  {r['fidelity']:<8} {'on' if r['trace'] else 'off':<5} "
                   f"{r['ranks']:>5} {_num(r.get('wall_s'), '9.2f'):>9} "
                   f"{_num(r.get('events'), ',d'):>11} {_num(r.get('events_per_s'), ',.0f'):>10} "
                   f"{_num(r.get('peak_mb'), '8.0f'):>8}  {note}")
    return "\n".join(out)


def format_ratios(rows: list[dict]) -> str:
    """Flow vs message at each (D, trace, ranks): wall-time speed-up (an estimate, marked ~,
    where the message point was not run) and the ratio of their events."""
    by = {(r["devices"], r["fidelity"], r["trace"], r["ranks"]): r for r in rows}
    head = (f"{'devices':>7}  {'trace':<5} {'ranks':>5} {'message s':>10} {'flow s':>8} "
            f"{'speed-up':>10} {'events ratio':>13}")
    out = [head, "-" * len(head)]
    for (d, fidelity, trace, ranks), flow in sorted(by.items()):
        message = by.get((d, "message", trace, ranks))
        if fidelity != "flow" or flow["status"] != "measured" or message is None:
            continue
        if message["status"] == "measured":
            wall, mark = message["wall_s"], ""
            events = f"{message['events'] / flow['events']:.0f}x"
        elif message.get("estimate_s"):
            wall, mark, events = message["estimate_s"], "~", ""
        else:
            continue
        speed = f"{mark}{wall / flow['wall_s']:.0f}x"
        out.append(f"{d:>7}  {'on' if trace else 'off':<5} {ranks:>5} {mark + f'{wall:.2f}':>10} "
                   f"{flow['wall_s']:>8.2f} {speed:>10} {events:>13}")
    return "\n".join(out)


# -- the command --------------------------------------------------------------------------

def _counts(text: str, what: str, minimum: int) -> list[int]:
    """A comma-separated list of whole numbers >= ``minimum``, sorted, without repeats."""
    from simdist.base.errors import InvalidArgumentError

    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        values = []
    if not values or min(values) < minimum:
        raise InvalidArgumentError(f"{what} {text!r}: expected comma-separated whole numbers "
                                   f">= {minimum}")
    return values


def build_parser() -> argparse.ArgumentParser:
    from simdist.commands import option_type

    parser = argparse.ArgumentParser(
        prog="simdist bench scale", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"a small matrix ({', '.join(map(str, QUICK_DEVICES))} devices, 2 "
                             "steps, one rank, no target run): about 10 s")
    parser.add_argument("--devices", type=option_type(lambda t: _counts(t, "--devices", 2)),
                        default=None, metavar="LIST",
                        help="simulated devices (workers), comma-separated (default "
                             f"{','.join(map(str, DEVICES))})")
    parser.add_argument("--steps", type=int, default=None,
                        help="training steps per point (default 5; --quick 2)")
    parser.add_argument("--params", type=float, default=25e6,
                        help="the model's parameters (default 25e6: 100 MB of gradients)")
    parser.add_argument("--ranks", type=option_type(lambda t: _counts(t, "--ranks", 1)),
                        default=None, metavar="LIST",
                        help="MPI ranks per point, comma-separated (default 1,2; --quick 1; "
                             "at most 8 per CPU core and 256 in all: each rank is a Python "
                             "process, and more than 8 per core measure the OS scheduler)")
    parser.add_argument("--fidelity", choices=("message", "flow", "both"), default="both",
                        help="which fidelities to run (default both)")
    parser.add_argument("--tracing", choices=("off", "on", "both"), default="both",
                        help="run with tracing off, on, or both (default both)")
    parser.add_argument("--max-point-s", type=float, default=60.0, metavar="S",
                        help="do not run a point estimated to take longer (default 60)")
    parser.add_argument("--no-target", action="store_true",
                        help="leave out the 1,024 x 100-step target run")
    parser.add_argument("--csv", default="out/bench-scale.csv", metavar="FILE",
                        help="CSV written as points end (default out/bench-scale.csv)")
    return parser


def main(argv=None) -> int:
    from simdist.commands import reporting_errors

    argv = list(sys.argv[1:] if argv is None else argv)
    return reporting_errors("simdist bench scale", _run, build_parser().parse_args(argv))


def _run(args) -> int:
    from simdist.base.errors import InvalidArgumentError
    from simdist.base.files import check_outputs, write_csv
    from simdist.commands.progress import ProgressBar
    from simdist.sim.launcher import check_ranks

    devices = args.devices or (list(QUICK_DEVICES) if args.quick else list(DEVICES))
    steps = args.steps or (2 if args.quick else 5)
    ranks = [check_ranks(n) for n in args.ranks or ([1] if args.quick else [1, 2])]
    if steps < 1 or not args.params >= 1 or not args.max_point_s > 0:
        raise InvalidArgumentError(f"--steps {steps}, --params {args.params:g}, --max-point-s "
                                   f"{args.max_point_s:g}: expected values >= 1, >= 1, > 0")
    check_outputs({"--csv": args.csv})
    fidelities = ("message", "flow") if args.fidelity == "both" else (args.fidelity,)
    tracing = {"off": (False,), "on": (True,), "both": (False, True)}[args.tracing]
    points = [Point(d, fidelity, trace, r) for r in ranks for trace in tracing
              for fidelity in fidelities for d in devices]
    target = None if args.quick or args.no_target else Point(TARGET["devices"], "flow", False, 1)
    print(f"simdist bench scale: data_parallel, {args.params:.3g} parameters (float32 "
          f"gradients), ring all-reduce, {steps} steps per point; devices "
          f"{', '.join(map(str, devices))}; ranks {', '.join(map(str, ranks))}\n", flush=True)
    rows: list[dict] = []
    bar = ProgressBar(len(points) + (target is not None))
    timeout = max(60.0, 5 * args.max_point_s)
    written: list[dict] = []  # the CSV so far, written whole again as each point ends

    def write_row(row):
        written.append(row)
        write_csv(args.csv, FIELDS, written, extrasaction="ignore")

    for point in points:
        bar.show(point.describe(), _eta(rows, points[bar.done:], steps, args.max_point_s))
        row = {"devices": point.devices, "fidelity": point.fidelity,
               "trace": point.trace, "ranks": point.ranks, "steps": steps}
        estimate = estimate_seconds(rows, point, steps)
        failed = any(r["status"] == "failed" for r in rows
                     if (r["fidelity"], r["trace"], r["ranks"]) == point.series)
        if failed or (estimate is not None and estimate > args.max_point_s):
            row.update(status="skipped", estimate_s=estimate)
        else:
            began = time.perf_counter()
            row.update(measure(point, steps, args.params, timeout))
            row["elapsed_s"] = time.perf_counter() - began  # with the process's start
        rows.append(row)
        write_row({**row, "trace": "on" if point.trace else "off"})
        bar.done += 1
    target_row = None
    if target is not None:
        bar.show("target: " + target.describe() + f", {TARGET['steps']} steps",
                 _eta(rows, [], steps, args.max_point_s))
        target_row = measure(target, TARGET["steps"], args.params, timeout)
        bar.done += 1
        write_row({"devices": target.devices, "fidelity": "flow", "trace": "off",
                   "ranks": 1, "steps": TARGET["steps"], **target_row})
    bar.show("done", 0)
    bar.close()
    print("\n" + format_table(rows))
    print("\nflow vs message (speed-up = message wall time / flow wall time; ~: the message "
          "run estimated, not run)\n" + format_ratios(rows))
    laws = growth_laws(rows)
    print("\ngrowth laws (least squares on log-log points):\n" + "\n".join(laws or ["  (too "
                                                                                 "few points)"]))
    if target_row is not None:
        if target_row["status"] == "measured":
            ok = target_row["wall_s"] < TARGET["seconds"]
            print(f"\ntarget: {TARGET['devices']:,} workers x {TARGET['steps']} steps of a "
                  f"{args.params:.3g}-parameter model, flow, trace off, 1 rank: "
                  f"{target_row['wall_s']:.1f} s wall, {target_row['events']:,} events, peak "
                  f"{target_row['peak_mb']:.0f} MB (target < {TARGET['seconds']:.0f} s: "
                  f"{'ok' if ok else 'MISS'})")
        else:
            print(f"\ntarget run failed: {target_row.get('error')}")
    print(f"\nCSV: {args.csv}")
    return 0 if all(r["status"] != "failed" for r in rows) else 1


def _eta(rows, left, steps, max_point_s) -> float | None:
    """Seconds left: each point left by its estimate (its series' law, or the event model
    priced at the seconds per event measured so far) plus a process's start; those it will
    skip count nothing."""
    measured = [r for r in rows if r["status"] == "measured"]
    if not measured:
        return None
    per_event = sum(r["wall_s"] for r in measured) / sum(r["events"] for r in measured)
    start = sum(r["elapsed_s"] - r["wall_s"] for r in measured) / len(measured)  # a process
    total = 0.0
    for point in left:
        estimate = estimate_seconds(rows, point, steps)
        if estimate is None:
            estimate = per_event * events_model(point.devices, steps, point.fidelity)
        total += start + estimate if estimate <= max_point_s else 0.0
    return total


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--point":
        sys.exit(_point_main(sys.argv[2:]))
    sys.exit(main())
