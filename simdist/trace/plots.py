"""Timelines and per-task summaries of a trace (matplotlib, Agg backend; no TensorFlow).

``plot_timeline`` draws what the Perfetto trace viewer shows, as a PNG: one row per
(task, lane), spans as bars coloured by category, messages as arrows. ``summarize`` and
``format_summary`` print how busy each task was and how much it sent.
"""

from __future__ import annotations

from simdist.base.files import save_figure
from simdist.trace.figure_lang import word
from simdist.trace.schema import Trace
from simdist.hardware.units import format_bytes, format_ns, time_unit


def _pids(trace: Trace) -> list[str]:
    """``trace.processes`` in order, then any other pid the records use, in order of use."""
    pids = dict.fromkeys(trace.processes)
    pids.update(dict.fromkeys(trace.lane_map()))
    pids.update(dict.fromkeys(c.pid for c in trace.counters))
    return list(pids)


def _union_length(intervals: list[tuple[int, int]]) -> int:
    """The total length covered by ``(start, end)`` intervals, overlaps counted once."""
    total, cur_start, cur_end = 0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


# -- summary table ----------------------------------------------------------------------------

def summarize(trace: Trace) -> list[dict]:
    """One row per task: busy time (union of its spans), idle time, spans and messages."""
    end = trace.end_time()
    intervals: dict[str, list] = {}
    sent: dict[str, list] = {}
    received: dict[str, int] = {}
    for s in trace.spans:
        intervals.setdefault(s.pid, []).append((s.start, s.end))
    for f in trace.flows:
        sent.setdefault(f.src_pid, []).append(f.args.get("bytes", 0))
        received[f.dst_pid] = received.get(f.dst_pid, 0) + 1
    rows = []
    for pid in _pids(trace):
        busy = _union_length(intervals.get(pid, []))
        rows.append({
            "task": pid,
            "busy_ns": busy,
            "idle_ns": max(end - busy, 0),
            "busy_pct": 100.0 * busy / end if end else 0.0,
            "spans": len(intervals.get(pid, [])),
            "messages_sent": len(sent.get(pid, [])),
            "bytes_sent": sum(sent.get(pid, [])),
            "messages_received": received.get(pid, 0),
        })
    return rows


def format_summary(rows: list[dict], end_ns: int) -> str:
    """``summarize``'s rows as a fixed-width text table, durations in one common unit."""
    unit = time_unit(end_ns)
    header = ("task", "busy", "idle", "busy %", "msgs sent", "bytes sent", "msgs recv")
    table = [header] + [
        (r["task"], format_ns(r["busy_ns"], unit), format_ns(r["idle_ns"], unit),
         f"{r['busy_pct']:.1f}", str(r["messages_sent"]), format_bytes(r["bytes_sent"]),
         str(r["messages_received"]))
        for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = []
    for line in table:
        cells = [line[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(line[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"simulated time: {format_ns(end_ns)}")
    return "\n".join(lines)


# -- timeline ---------------------------------------------------------------------------------

def category_colors(categories) -> dict[str, tuple]:
    """A fixed colour per category: tab10, then tab20's light shades, in sorted order."""
    from matplotlib import colormaps

    tab20 = colormaps["tab20"].colors
    palette = list(colormaps["tab10"].colors) + [tab20[i] for i in range(1, 20, 2)]
    return {cat: palette[i % len(palette)] for i, cat in enumerate(sorted(set(categories)))}


def _text_color(rgb) -> str:
    r, g, b = rgb[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "white"


def _sample(items: list, limit: int) -> list:
    """At most ``limit`` items, evenly spread over ``items``."""
    if len(items) <= limit:
        return list(items)
    return [items[i * len(items) // limit] for i in range(max(limit, 0))]


def step_windows(trace: Trace) -> list[tuple[int, int]]:
    """(start, end) of every training step, in order: the spans of category "step" (one per
    task and step, as the training loops of ``simdist.distribute`` record them) grouped by
    their ``step`` argument, from the first one's start to the last one's end."""
    windows: dict = {}
    for s in trace.spans:
        if s.cat == "step" and "step" in s.args:
            start, end = windows.get(s.args["step"], (s.start, s.end))
            windows[s.args["step"]] = (min(start, s.start), max(end, s.end))
    return [windows[k] for k in sorted(windows)]


def plot_timeline(trace: Trace, path=None, title: str | None = None, max_flows: int = 400,
                  steps_shown: int | None = None, lang: str | None = None):
    """Draw the trace as a timeline (one row per task lane) and save it as a PNG if ``path``;
    its own labels in ``lang`` (default: ``figure_lang.set_language``'s, English).

    ``steps_shown=N``: when the trace holds more than N training steps (``step_windows``),
    the first panel draws only the first N, large enough to read every compute span, ring
    phase, update and message, and a second panel the whole run, with those steps shaded.
    """
    from matplotlib.figure import Figure

    rows = [(pid, lane) for pid in _pids(trace) for lane in trace.lanes(pid)]
    end = trace.end_time()
    steps = step_windows(trace)
    window = None
    if steps_shown is not None and 0 < steps_shown < len(steps):
        first, last = steps[0][0], steps[steps_shown - 1][1]
        margin = (last - first) // 50  # a little of what comes before and after
        window = (max(first - margin, 0), min(last + margin, end))

    n = max(len(rows), 3)
    height = 2.4 + 0.3 * min(n, 64) + 0.15 * max(n - 64, 0)  # rows get thinner past 64
    counters = _counter_series(trace)
    heights = [height] + ([1.6] if counters else []) + ([1.2 + 0.1 * n] if window else [])
    fig = Figure(figsize=(12, sum(heights)), layout="constrained")
    axes = fig.subplots(len(heights), 1, height_ratios=heights, squeeze=False)[:, 0]
    ax = axes[0]
    colors = category_colors(_color_key(s) for s in trace.spans)
    shown = window or (0, end)
    unit, scale = time_unit(shown[1] - shown[0])
    flows = _draw_lanes(ax, trace, rows, colors, shown, scale, max_flows)
    what = title or trace.metadata.get("program", "simdist trace")
    if window:
        what += word("steps_of", lang, s="s" if steps_shown > 1 else "", n=len(steps),
                     which="0" if steps_shown == 1 else f"0-{steps_shown - 1}")
    ax.set_title(what)
    ax.set_xlabel(word("simulated_time", lang, unit=unit))
    if not rows:
        ax.text(0.5, 0.5, word("empty", lang), transform=ax.transAxes,
                ha="center", va="center", color="0.4")
    if counters:  # queue depths, buffer sizes...: a panel of their own under the lanes
        ax.set_xlabel("")
        axes[1].sharex(ax)
        _plot_counters(axes[1], counters, scale, unit, lang)
    if window:  # the whole run, small, with the steps drawn above shaded
        overview = axes[-1]
        o_unit, o_scale = time_unit(end)
        _draw_lanes(overview, trace, rows, colors, (0, end), o_scale, 0, labels=False)
        overview.axvspan(window[0] / o_scale, window[1] / o_scale, color="gold", alpha=0.3,
                         zorder=0.8)
        overview.set_title(word("whole_run", lang, n=len(steps)), fontsize=9)
        overview.set_xlabel(word("simulated_time", lang, unit=o_unit))
        overview.tick_params(axis="y", labelsize=5)
    _legend(fig, trace, colors, flows, lang)
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def _color_key(span) -> str:
    """What a span is coloured by: its category, and its phase when it has one (a ring's
    reduce-scatter and all-gather, a tree's reduce and broadcast)."""
    phase = span.args.get("phase")
    return f"{span.cat}: {phase}" if phase else span.cat


def _draw_lanes(ax, trace: Trace, rows, colors, window, scale, max_flows, labels=True):
    """The lanes of ``rows`` between ``window`` = (start, end) ns on ``ax``: bars, names
    that fit (``labels``), message arrows (at most ``max_flows``) and instants. Returns the
    flows drawn."""
    row_of = {key: i for i, key in enumerate(rows)}
    w0, w1 = window
    width = (w1 - w0) / scale if w1 > w0 else 1.0
    ax.set_xlim(w0 / scale, w0 / scale + width * 1.01)
    ax.set_ylim(len(rows) - 0.5 if rows else 0.5, -0.5)
    ax.set_yticks(range(len(rows)), [f"{pid} / {lane}" for pid, lane in rows],
                  fontsize=8 if labels else 5)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)

    # Group rows by task: shade every other task, a line between tasks.
    first = 0
    for n, pid in enumerate(dict.fromkeys(pid for pid, _ in rows)):
        count = sum(1 for p, _ in rows if p == pid)
        if n % 2:
            ax.axhspan(first - 0.5, first + count - 0.5, color="0.96", zorder=0)
        if first:
            ax.axhline(first - 0.5, color="0.75", linewidth=0.8, zorder=0.5)
        first += count

    bars: dict[tuple[int, str], list] = {}
    ticks: dict[str, list] = {}
    axes_px = ax.figure.get_figwidth() * 0.78 * 120  # the axes' approximate width at 120 dpi
    for s in trace.spans:
        if s.end < w0 or s.start > w1:
            continue
        y, key = row_of[(s.pid, s.lane)], _color_key(s)
        if s.dur <= 0:
            ticks.setdefault(key, []).append((s.start / scale, y))
            continue
        bars.setdefault((y, key), []).append((s.start / scale, s.dur / scale))
        start, stop = max(s.start, w0), min(s.end, w1)  # the visible part
        chars = int((stop - start) / scale / width * axes_px / 6.5)  # ~6.5 px a character
        if labels and chars >= 5:
            name = s.name if len(s.name) <= chars else s.name.split(" (")[0]  # no aside
            name = name if len(name) <= chars else name[:chars - 1] + "…"
            ax.text((start + stop) / 2 / scale, y, name, ha="center", va="center",
                    fontsize=7, color=_text_color(colors[key]), clip_on=True, zorder=4.5)
    for (y, key), xranges in bars.items():
        ax.broken_barh(xranges, (y - 0.35, 0.7), facecolors=colors[key],
                       edgecolors=colors[key], linewidth=0.3, zorder=2)
    for key, points in ticks.items():
        ax.vlines([x for x, _ in points], [y - 0.4 for _, y in points],
                  [y + 0.4 for _, y in points], color=colors[key], linewidth=1, zorder=1.9)

    visible = [f for f in trace.flows if f.t_recv >= w0 and f.t_send <= w1]
    flows = _sample(visible, max_flows)
    for f in flows:
        ax.annotate("", xy=(f.t_recv / scale, row_of[(f.dst_pid, f.dst_lane)]),
                    xytext=(f.t_send / scale, row_of[(f.src_pid, f.src_lane)]),
                    arrowprops=dict(arrowstyle="-|>", color="0.25", linewidth=0.6,
                                    alpha=0.7, mutation_scale=7, shrinkA=0, shrinkB=0),
                    zorder=4, annotation_clip=True)
    instants = [i for i in trace.instants if w0 <= i.t <= w1]
    if instants:
        ax.scatter([i.t / scale for i in instants], [row_of[(i.pid, i.lane)] for i in instants],
                   marker="v", s=28, color="black", zorder=5)
    return flows, len(visible)


def _legend(fig, trace: Trace, colors, flows, lang: str | None = None):
    """The categories' colours, the message arrows and instants, under the panels."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    drawn, total = flows
    handles = [Patch(color=color, label=key) for key, color in colors.items()]
    if drawn:
        label = word("message", lang) if len(drawn) == total else \
            word("message_some", lang, drawn=len(drawn), total=total)
        handles.append(Line2D([], [], color="0.25", linewidth=0.8, marker=">",
                              markersize=4, label=label))
    if trace.instants:
        handles.append(Line2D([], [], color="black", marker="v", linestyle="",
                              markersize=5, label=word("instant", lang)))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 8),
                   fontsize=8, frameon=False)


def _counter_series(trace: Trace) -> dict:
    """{"task: counter (value)": [(t, value)]} of every counter in the trace."""
    series: dict = {}
    for c in trace.counters:
        for key, value in c.values.items():
            label = f"{c.pid}: {c.name}" + ("" if key == "size" else f" ({key})")
            series.setdefault(label, []).append((c.t, value))
    return series


def _plot_counters(ax, series: dict, scale: float, unit: str, lang: str | None = None):
    for label, points in series.items():
        ax.step([t / scale for t, _ in points], [v for _, v in points], where="post",
                label=label, linewidth=1)
    ax.set_ylabel(word("counters", lang), fontsize=8)
    ax.set_xlabel(word("simulated_time", lang, unit=unit))
    ax.grid(color="0.9", linewidth=0.6)
    ax.legend(fontsize=7, loc="upper left", frameon=False)


def plot_queue_occupancy(trace: Trace, queue: str, path=None, title: str | None = None,
                         lang: str | None = None):
    """A queue's size over time (its "queue NAME" counter) above the time its consumers
    spent waiting on it (the "wait" spans of its dequeue ops): where the second is not
    empty, the consumer was starved. Saved as a PNG if ``path``."""
    return plot_queue_comparison({"": trace}, queue, path, title, lang)


def plot_queue_comparison(traces: dict, queue: str, path=None, title: str | None = None,
                          lang: str | None = None):
    """``plot_queue_occupancy`` for several runs of one program ({label: trace}, e.g. the
    simulated and the real one), one pair of panels each, on one time axis; its own labels
    in ``lang`` (default: ``figure_lang.set_language``'s)."""
    from matplotlib.figure import Figure

    end = max([1] + [trace.end_time() for trace in traces.values()])
    unit, scale = time_unit(end)
    fig = Figure(figsize=(11, 1.2 + 3 * len(traces)), layout="constrained")
    axes = fig.subplots(2 * len(traces), 1, sharex=True, height_ratios=[3, 1] * len(traces),
                        squeeze=False)[:, 0]
    fig.suptitle(title or word("queue_title", lang, queue=queue))
    for k, (label, trace) in enumerate(traces.items()):
        top, bottom = axes[2 * k], axes[2 * k + 1]
        samples = [(c.t, c.values["size"]) for c in trace.counters
                   if c.name == f"queue {queue}"]
        waits = [s for s in trace.spans
                 if s.cat == "wait" and s.name.startswith(f"{queue}_Dequeue")]
        if samples:
            times = [0] + [t / scale for t, _ in samples] + [trace.end_time() / scale]
            sizes = [0] + [n for _, n in samples] + [samples[-1][1]]
            top.step(times, sizes, where="post", color="tab:blue")
            top.fill_between(times, sizes, step="post", alpha=0.25, color="tab:blue")
        top.set_ylabel(f"{label}\n{word('in_queue', lang)}" if label else
                       word("in_queue", lang))
        top.grid(color="0.9", linewidth=0.6)
        for span in waits:
            bottom.broken_barh([(span.start / scale, span.dur / scale)], (0, 1),
                               color="tab:red")
        starved = sum(s.dur for s in waits)
        share = 100 * starved / max(trace.end_time(), 1)
        bottom.set_yticks([0.5], [word("starved", lang, share=share)], fontsize=8)
        bottom.set_ylim(0, 1)
    clocks = {trace.metadata.get("clock", "simulated") for trace in traces.values()}
    axes[-1].set_xlabel(word("simulated_time" if clocks == {"simulated"} else "time", lang,
                             unit=unit))
    axes[-1].set_xlim(0, end / scale)
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig
