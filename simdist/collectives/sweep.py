"""Every all-reduce algorithm over a range of message sizes: time and bus bandwidth vs size.

``sweep`` simulates one all-reduce of each size with size-only ``Phantom`` values (cheap at any
size) and returns one row per (algorithm, size). ``plot_sweep`` draws the two classic plots:
time vs size (log-log) and bus bandwidth vs size, with the latency-bound regime (small
messages: the time hardly grows with n) and the bandwidth-bound regime (large messages: the
time grows like n and busbw nears the link's bandwidth) marked. The boundary of one message
is n* = a x B (latency a = transfer time n/B); an algorithm that cuts the value into p chunks
(ring, halving-doubling, sharded ps) sends messages of n/p bytes, so it reaches the bandwidth
regime only past about p x n*.

``simdist plot-collectives [--profile SYSTEM] [-p P] [--tasks-per-machine K] [--sizes ...]
-o PNG`` (``commands/plot_collectives.py``) prints the table and writes the figure.
"""

from __future__ import annotations

import math

from simdist.base.files import save_figure
from simdist.sim.payloads import Phantom
from simdist.hardware.units import format_bytes, format_ns
from simdist.collectives.formulas import bus_bandwidth

#: 8 B to 256 MiB, every power of two
DEFAULT_SIZES = tuple(2 ** k for k in range(3, 29))


def _label(algorithm: str, options: dict) -> str:
    if options:
        return f"{algorithm} ({', '.join(f'{k}={v}' for k, v in options.items())})"
    return algorithm


def sweep(system: str = "cpu", p: int = 8, tasks_per_machine: int = 1, sizes=None,
          algorithms=None, catalog=None, notes: list | None = None,
          fidelity: str = "message") -> list[dict]:
    """One simulated all-reduce per (algorithm, size), with Phantom values, at ``fidelity``
    ("message" or "flow": ``flow.py``).

    Returns rows with: algorithm, label (with its options), p, bytes, time_ns (the latest
    return over members), algbw and busbw (bytes/s; busbw = algbw x 2(p-1)/p as in
    nccl-tests), system and tasks_per_machine. Algorithms that raise NotImplementedError
    are left out (named in ``notes``).
    """
    from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
    from simdist.base.errors import InvalidArgumentError
    from simdist.sim.scheduler import simulate
    from simdist.collectives.registry import ALGORITHMS, algorithm_named, all_reduce

    if not isinstance(p, int) or isinstance(p, bool) or p < 2:
        raise InvalidArgumentError(f"p must be an int >= 2 (an all-reduce over one task moves "
                                   f"nothing), got {p!r}")
    sizes = list(DEFAULT_SIZES if sizes is None else sizes)
    for n in sizes:
        if not isinstance(n, int) or n < 1:
            raise InvalidArgumentError(f"sizes must be ints >= 1 (bytes), got {n!r}")
    records = [algorithm_named(name) for name in (ALGORITHMS if algorithms is None
                                                  else algorithms)]
    catalog = catalog or HardwareCatalog.default()
    hardware = Hardware.from_catalog(catalog, system, Layout(tasks_per_machine=tasks_per_machine))
    notes = notes if notes is not None else []
    rows = []
    for record in records:
        algorithm, options = record.name, record.sweep_options(p)
        label = _label(algorithm, options)
        found = []
        try:
            for n in sorted(sizes):
                value = Phantom(n)

                def program(ctx, value=value):
                    yield from all_reduce(ctx, range(p), value, algorithm=algorithm, **options)
                    return ctx.now

                result = simulate({"worker": p}, program, hardware=hardware, trace=False,
                                  fidelity=fidelity)
                time_ns = max(result.returns.values())
                algbw = n * 1e9 / time_ns if time_ns else math.inf
                found.append({"algorithm": algorithm, "label": label, "p": p, "bytes": n,
                              "time_ns": time_ns, "algbw": algbw,
                              "busbw": bus_bandwidth(algbw, p),
                              "system": system, "tasks_per_machine": tasks_per_machine})
        except NotImplementedError as error:
            notes.append(f"{algorithm}: skipped, not implemented yet ({error})")
            continue
        rows.extend(found)
    return rows


def bottleneck_link(hardware, p: int):
    """The link an all-reduce over p tasks is limited by: the network if the tasks span two
    machines or more, else the machine's own link."""
    if hardware.layout.num_machines(p) > 1:
        return hardware.network
    return hardware.intra_link


def crossover_bytes(link) -> float:
    """n* = a x B: the message size whose transfer time n/B equals the link's latency a."""
    return link.latency_ns * link.bandwidth / 1e9


# -- table ------------------------------------------------------------------------------------


def format_rows(rows: list[dict]) -> str:
    """The sweep as a text table (one block per algorithm)."""
    header = ("algorithm", "p", "size", "time", "algbw GB/s", "busbw GB/s")
    table = [header]
    for r in rows:
        table.append((r["label"], str(r["p"]), format_bytes(r["bytes"]),
                      format_ns(r["time_ns"]), f"{r['algbw'] / 1e9:.3f}",
                      f"{r['busbw'] / 1e9:.3f}"))
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines, previous = [], None
    for i, line in enumerate(table):
        if i > 1 and line[0] != previous:
            lines.append("")
        previous = line[0]
        cells = [line[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(line[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# -- figure -----------------------------------------------------------------------------------


def _byte_ticks(lo: float, hi: float) -> list[int]:
    """Powers of two between lo and hi, at most 9 of them, aligned so that 1 KiB and 1 MiB
    are among them when the step allows."""
    e_lo, e_hi = math.ceil(math.log2(lo)), math.floor(math.log2(hi))
    for step in (1, 2, 4, 5, 10, 20):
        ticks = [e for e in range(e_lo, e_hi + 1) if e % step == 0]
        if len(ticks) <= 9:
            return [2 ** e for e in ticks]
    return [2 ** e_lo, 2 ** e_hi]


def _style(i: int) -> dict:
    markers = "osD^vP*Xh<>"
    styles = ("-", "--", "-.", ":")
    return {"marker": markers[i % len(markers)], "linestyle": styles[(i // 2) % len(styles)],
            "markersize": 3.5, "linewidth": 1.4}


def plot_sweep(rows: list[dict], path=None, title: str | None = None, hardware=None):
    """Draw ``sweep``'s rows: time vs size (log-log) and busbw vs size; save a PNG at ``path``.

    ``hardware`` (a ``Hardware``; default: the built-in system and layout the rows name) gives
    the link whose n* = a x B and bandwidth B are marked. Returns the matplotlib Figure.
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    from simdist.hardware.devices import Hardware, HardwareCatalog, Layout

    if not rows:
        raise ValueError("plot_sweep: no rows to draw (every algorithm was skipped?)")
    if hardware is None:
        hardware = Hardware.from_catalog(
            HardwareCatalog.default(), rows[0].get("system", "cpu"),
            Layout(tasks_per_machine=rows[0].get("tasks_per_machine", 1)))
    p = rows[0]["p"]
    link = bottleneck_link(hardware, p)
    n_star = crossover_bytes(link)
    labels = list(dict.fromkeys(r["label"] for r in rows))
    sizes = sorted({r["bytes"] for r in rows})
    lo, hi = sizes[0], sizes[-1]
    x_lo, x_hi = lo / 1.5, hi * 1.5

    fig = Figure(figsize=(14, 6.2), layout="constrained")
    ax_t, ax_b = fig.subplots(1, 2)
    colors = _colors(len(labels))
    for i, label in enumerate(labels):
        mine = [r for r in rows if r["label"] == label]
        xs = [r["bytes"] for r in mine]
        ax_t.plot(xs, [r["time_ns"] for r in mine], color=colors[i], label=label, **_style(i))
        ax_b.plot(xs, [r["busbw"] / 1e9 for r in mine], color=colors[i], label=label,
                  **_style(i))

    # regimes: latency-bound left of n*, bandwidth-bound right of p x n*
    wide = p * n_star
    for ax in (ax_t, ax_b):
        ax.set_xscale("log", base=2)
        ax.set_xlim(x_lo, x_hi)
        if n_star > x_lo:
            ax.axvspan(x_lo, min(n_star, x_hi), color="tab:blue", alpha=0.07, zorder=0)
        if wide < x_hi:
            ax.axvspan(max(wide, x_lo), x_hi, color="tab:orange", alpha=0.09, zorder=0)
        for x, style in ((n_star, "--"), (wide, ":")):
            if x_lo < x < x_hi:
                ax.axvline(x, color="0.35", linestyle=style, linewidth=1, zorder=1)
        ticks = _byte_ticks(x_lo, x_hi)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_bytes(v, compact=True)))
        ax.xaxis.set_minor_locator(FixedLocator(
            [2 ** e for e in range(math.ceil(math.log2(x_lo)), math.floor(math.log2(x_hi)) + 1)]))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("message size n per member (bytes, log scale)")
        ax.grid(which="major", color="0.88", linewidth=0.7)
        ax.set_axisbelow(True)

    ax_t.set_yscale("log")
    ax_t.yaxis.set_major_locator(LogLocator(base=10))
    ax_t.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_ns(v, compact=True)))
    ax_t.set_ylabel("time of one all-reduce (simulated, log scale)")
    ax_t.set_title("time vs message size")
    ax_b.set_ylabel("bus bandwidth (GB/s) = n/time x 2(p-1)/p")
    ax_b.set_title("bus bandwidth vs message size")
    peak = link.bandwidth / 1e9
    top = max([peak] + [r["busbw"] / 1e9 for r in rows])
    ax_b.set_ylim(0, top * 1.45)  # room above the curves for the labels
    ax_b.axhline(peak, color="black", linewidth=1, linestyle="-", zorder=1)
    ax_b.text(x_lo * 1.15, peak, f"link bandwidth B = {peak:g} GB/s ({link.name})",
              va="bottom", ha="left", fontsize=8.5)

    # regime labels at the top of each panel
    from matplotlib.transforms import blended_transform_factory

    for ax in (ax_t, ax_b):
        trans = blended_transform_factory(ax.transData, ax.transAxes)
        if n_star > x_lo:
            ax.text(math.sqrt(x_lo * min(n_star, x_hi)), 0.97,
                    "latency-bound\n(time ≈ steps × a)", transform=trans, ha="center",
                    va="top", fontsize=8.5, color="tab:blue")
        if wide < x_hi:
            ax.text(math.sqrt(max(wide, x_lo) * x_hi), 0.97, "bandwidth-bound\n(time ∝ n)",
                    transform=trans, ha="center", va="top", fontsize=8.5, color="tab:orange")
        box = {"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.5}
        if x_lo < n_star < x_hi:
            ax.text(n_star / 1.15, 0.84,
                    f"n* = a·B\n= {format_bytes(round(n_star), compact=True)}",
                    transform=trans, ha="right", va="top", fontsize=8, color="0.2", bbox=box)
        if x_lo < wide < x_hi:
            ax.text(wide * 1.15, 0.84, f"p·n*\n= {format_bytes(round(wide), compact=True)}",
                    transform=trans, ha="left", va="top", fontsize=8, color="0.2", bbox=box)

    handles, names = ax_t.get_legend_handles_labels()
    if hardware.layout.tasks_per_machine == 1:  # one task per machine: the same as the ring
        names = [f"{n} (= ring: 1 task/machine)" if n == "hierarchical" else n for n in names]
    fig.legend(handles, names, loc="outside lower center", ncols=min(len(names), 5),
               fontsize=9, frameon=False)
    machines = hardware.layout.num_machines(p)
    fig.suptitle(title or (
        f"all-reduce over p = {p} tasks on '{hardware.system.name}' ({machines} machine(s), "
        f"{hardware.layout.tasks_per_machine} per machine): {link.name} a = "
        f"{format_ns(link.latency_ns, compact=True)}, B = {peak:g} GB/s\n"
        f"shaded: latency-bound below n* = a·B (where one message's n/B equals a), "
        f"bandwidth-bound above p·n* (where even chunks of n/p take longer than a)"),
        fontsize=10.5)
    if path is not None:
        save_figure(fig, path, dpi=110)
    return fig


def _colors(k: int) -> list:
    from matplotlib import colormaps

    palette = list(colormaps["tab10"].colors)
    return [palette[i % len(palette)] for i in range(k)]
