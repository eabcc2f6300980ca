"""``simdist bench allreduce-formulas``: simulated all-reduce times against their closed forms.

For every all-reduce algorithm (``simdist.collectives.ALGORITHMS``), every p in 2, 3, 4, 8 and
every size n in 8 B, 64 KiB, 4 MiB, one simulation with size-only ``Phantom`` values on a
hardware system (default "cpu": 10 GbE between machines, shared memory inside one), in this
process. "simulated" is the latest time at which a member's all-reduce returned; "formula" is
the algorithm's alpha-beta closed form (``simdist.collectives.formulas``; a = the link's
latency, B = its bandwidth, o = its cost per message on a port). Each algorithm's record says
which options and layout it is checked with: every member has its own machine, except for
"hierarchical", which puts 2 tasks on each machine (its formula has a local and a network
part); "ps" runs with one parameter server, with a shard on half the members and with a shard
on every member (num_ps = p).

A row is "ok" when |simulated - formula| <= 1% of the formula. Algorithms whose record says
``bound`` have a closed form that is exact only for p a power of two; for other p the row says
"bound" (and "bound!" if the simulation took longer than the bound). Algorithms that are not
written yet (they raise NotImplementedError) are skipped with a note; algorithms without a
closed form show their simulated time only.
"""

from __future__ import annotations

import argparse
import math
import sys

from simdist.sim.flows import FIDELITIES
from simdist.sim.payloads import Phantom

PS = (2, 3, 4, 8)
SIZES = (8, 64 << 10, 4 << 20)
TOLERANCE_PCT = 1.0


def _is_power_of_two(p: int) -> bool:
    return p & (p - 1) == 0


def simulated_time(algorithm: str, p: int, n: int, hardware, fidelity: str = "message",
                   **options) -> int:
    """The simulated end of one all-reduce of ``n`` bytes (Phantom) over p tasks, in ns: the
    latest time at which a member's call returned."""
    from simdist.collectives import all_reduce
    from simdist.sim.scheduler import simulate

    value = Phantom(n)

    def program(ctx):
        yield from all_reduce(ctx, range(p), value, algorithm=algorithm, **options)
        return ctx.now

    result = simulate({"worker": p}, program, hardware=hardware, trace=False,
                      fidelity=fidelity)
    return max(result.returns.values())


def _label(record, options: dict) -> str:
    """A row's label: "ps num_ps=2", "hierarchical 2/machine", "ring"."""
    words = [record.name] + [f"{k}={v}" for k, v in options.items()]
    if record.tasks_per_machine > 1:
        words.append(f"{record.tasks_per_machine}/machine")
    return " ".join(words)


def compare(system: str = "cpu", ps=PS, sizes=SIZES, algorithms=None, catalog=None,
            tolerance_pct: float = TOLERANCE_PCT, notes: list | None = None,
            fidelity: str = "message") -> list[dict]:
    """One row per (algorithm run, p, n): simulated and closed-form times and the verdict.

    Rows: algorithm, label, p, bytes, simulated_ns, formula_ns (None without a closed form),
    error_pct (None likewise), status ("ok", "MISS", "bound", "bound!" or "no formula").
    Algorithms that raise NotImplementedError are left out and named in ``notes``.
    """
    from simdist.collectives import ALGORITHMS, algorithm_named
    from simdist.hardware.devices import Hardware, HardwareCatalog, Layout

    catalog = catalog or HardwareCatalog.default()
    notes = notes if notes is not None else []
    rows = []
    for algorithm in (list(ALGORITHMS) if algorithms is None else algorithms):
        record = algorithm_named(algorithm)
        hardware = Hardware.from_catalog(catalog, system,
                                         Layout(tasks_per_machine=record.tasks_per_machine))
        try:
            for p in ps:
                for options in record.checked_options(p):
                    for n in sizes:
                        sim = simulated_time(algorithm, p, n, hardware, fidelity, **options)
                        formula = record.closed_form(p, n, hardware, **options)
                        rows.append(_row(algorithm, _label(record, options), p, n, sim,
                                         formula, record.bound and not _is_power_of_two(p),
                                         tolerance_pct))
        except NotImplementedError as error:
            rows = [r for r in rows if r["algorithm"] != algorithm]
            notes.append(f"{algorithm}: skipped, not implemented yet ({error})")
    return rows


def _row(algorithm, label, p, n, sim, formula, bound, tolerance_pct) -> dict:
    if formula is None:
        error, status = None, "no formula"
    else:
        error = (sim - formula) / formula * 100 if formula else (0.0 if sim == 0 else math.inf)
        if bound:
            status = "bound" if sim <= formula * (1 + tolerance_pct / 100) else "bound!"
        else:
            status = "ok" if abs(error) <= tolerance_pct else "MISS"
    return {"algorithm": algorithm, "label": label, "p": p, "bytes": n, "simulated_ns": sim,
            "formula_ns": formula, "error_pct": error, "status": status}


def format_table(rows: list[dict]) -> str:
    from simdist.hardware.units import format_bytes, format_ns

    header = ("algorithm", "p", "n", "simulated", "formula", "error %", "")
    table = [header]
    for r in rows:
        formula = "-" if r["formula_ns"] is None else format_ns(round(r["formula_ns"]))
        error = "-" if r["error_pct"] is None else f"{r['error_pct']:+.3f}"
        table.append((r["label"], str(r["p"]), format_bytes(r["bytes"]),
                      format_ns(r["simulated_ns"]), formula, error, r["status"]))
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = []
    for line in table:
        cells = [line[0].ljust(widths[0])] + [c.rjust(w) for c, w in
                                              zip(line[1:-1], widths[1:-1])] + [line[-1]]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths[:-1]) + "  " + "-" * 6)
    return "\n".join(lines)


def summary_line(rows: list[dict], tolerance_pct: float = TOLERANCE_PCT) -> str:
    checked = [r for r in rows if r["status"] in ("ok", "MISS")]
    ok = sum(r["status"] == "ok" for r in checked)
    bound = [r for r in rows if r["status"].startswith("bound")]
    free = sum(r["status"] == "no formula" for r in rows)
    text = f"{ok} of {len(checked)} rows within {tolerance_pct:g}% of the closed form"
    if bound:
        over = sum(r["status"] == "bound!" for r in bound)
        text += (f"; {len(bound)} row(s) where the formula is an upper bound (p not a power "
                 f"of two), {len(bound) - over} at or under it")
    if free:
        text += f"; {free} row(s) without a closed form"
    return text


def main(argv=None) -> int:
    """``simdist bench allreduce-formulas``: 0 when every checked row is within the
    tolerance (and no bound is exceeded), 1 otherwise."""
    parser = argparse.ArgumentParser(prog="simdist bench allreduce-formulas",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu", metavar="SYSTEM",
                        help="hardware system (default cpu; see 'simdist list')")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE_PCT, metavar="PCT",
                        help=f"allowed |error| in percent (default {TOLERANCE_PCT:g})")
    parser.add_argument("--fidelity", choices=FIDELITIES, default="message",
                        help="message (default): every message; flow: each phase one flow")
    from simdist.commands import reporting_errors

    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return reporting_errors("simdist bench allreduce-formulas", _run, args)


def _run(args) -> int:
    from simdist.base.checks import check_number
    from simdist.hardware.devices import Hardware, HardwareCatalog
    from simdist.hardware.units import format_ns

    check_number(args.tolerance, "--tolerance", 0.0, None, "a percentage")

    hardware = Hardware.from_catalog(HardwareCatalog.default(), args.profile)
    net, intra = hardware.network, hardware.intra_link
    print(f"simdist bench allreduce-formulas: system '{args.profile}', network {net.name} "
          f"(a = {format_ns(net.latency_ns)}, B = {net.bandwidth / 1e9:g} GB/s, "
          f"o = {format_ns(net.message_ns)}), in a machine {intra.name} "
          f"(a = {format_ns(intra.latency_ns)}, B = {intra.bandwidth / 1e9:g} GB/s, "
          f"o = {format_ns(intra.message_ns)}); Phantom values, fidelity {args.fidelity}\n")
    notes: list[str] = []
    rows = compare(args.profile, tolerance_pct=args.tolerance, notes=notes,
                   fidelity=args.fidelity)
    print(format_table(rows))
    print()
    for note in notes:
        print(f"note: {note}")
    print(summary_line(rows, args.tolerance))
    bad = [r for r in rows if r["status"] in ("MISS", "bound!")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
