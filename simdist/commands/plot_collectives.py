"""``simdist plot-collectives``: time and bus bandwidth vs message size, every algorithm."""

from __future__ import annotations

import argparse
import sys

from simdist.base.files import check_outputs
from simdist.collectives import sweep
from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.sim.flows import FIDELITIES
from simdist.hardware.units import format_bytes, format_ns, parse_sizes
from simdist.commands import option_type, reporting_errors


def main(argv=None) -> int:
    """``simdist plot-collectives``: print the sweep's table and draw it."""
    parser = argparse.ArgumentParser(
        prog="simdist plot-collectives", description=sweep.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu", metavar="SYSTEM",
                        help="hardware system (default cpu; see 'simdist list')")
    parser.add_argument("--profiles-file", metavar="FILE",
                        help="JSON or YAML file adding or overriding hardware profiles")
    parser.add_argument("-p", type=int, default=8,
                        help="members of the all-reduce, >= 2 (default 8)")
    parser.add_argument("--tasks-per-machine", type=int, default=1, metavar="K",
                        help="tasks on one machine (default 1: every member on its own)")
    parser.add_argument("--sizes", type=option_type(parse_sizes), default=None, metavar="LIST",
                        help="comma-separated sizes in bytes: k/K, M, G = 1000, 1000**2, "
                             "1000**3; Ki, Mi, Gi (or KiB, MiB, GiB) = 1024, 1024**2, 1024**3 "
                             "(default every power of two from 8 B to 256 MiB)")
    parser.add_argument("--algorithms", default=None, metavar="LIST",
                        help="comma-separated algorithm names (default all)")
    parser.add_argument("--fidelity", choices=FIDELITIES, default="message",
                        help="message (default): every message; flow: each phase one flow "
                             "(the closed form, for large p)")
    parser.add_argument("--title", default=None, help="figure title")
    parser.add_argument("-o", "--output", required=True, metavar="PNG", help="PNG to write")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return reporting_errors("simdist plot-collectives", _plot, args)


def _plot(args) -> int:
    check_outputs({"-o": (args.output, ".png")}, {"--profiles-file": args.profiles_file})
    catalog = HardwareCatalog.default()
    if args.profiles_file:
        catalog.load_file(args.profiles_file)
    hardware = Hardware.from_catalog(catalog, args.profile,
                                     Layout(tasks_per_machine=args.tasks_per_machine))
    algorithms = None if args.algorithms is None else [
        a.strip() for a in args.algorithms.split(",") if a.strip()]
    notes: list[str] = []
    rows = sweep.sweep(args.profile, args.p, args.tasks_per_machine, args.sizes, algorithms,
                       catalog=catalog, notes=notes, fidelity=args.fidelity)
    link = sweep.bottleneck_link(hardware, args.p)
    print(f"all-reduce sweep: p = {args.p} on '{args.profile}' "
          f"({args.tasks_per_machine} task(s) per machine), Phantom values, fidelity "
          f"{args.fidelity}; bottleneck link "
          f"{link.name}: a = {format_ns(link.latency_ns, compact=True)}, "
          f"B = {link.bandwidth / 1e9:g} GB/s, "
          f"n* = a·B = {format_bytes(round(sweep.crossover_bytes(link)), compact=True)}\n")
    print(sweep.format_rows(rows))
    for note in notes:
        print(f"note: {note}")
    if not rows:
        print("nothing to draw", file=sys.stderr)
        return 1
    sweep.plot_sweep(rows, args.output, title=args.title, hardware=hardware)
    print(f"\nfigure: {args.output}")
    return 0
