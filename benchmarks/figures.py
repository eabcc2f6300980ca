"""The studies' figures: panels of lines (matplotlib, Agg), each figure with the profile and
the assumptions it rests on written under it."""

from __future__ import annotations

import textwrap
from typing import NamedTuple

from simdist.base.files import save_figure


class Panel(NamedTuple):
    """One axes: its series {label: [(x, y), ...]} and how to draw them."""

    title: str
    xlabel: str
    ylabel: str
    series: dict
    logx: bool = True
    logy: bool = False
    ideal: list | None = None  # [(x, y), ...] drawn dashed as "ideal"
    ylim: tuple | None = None
    bars: bool = False  # grouped bars over the x values instead of lines


def efficiency_panel(series: dict, ylabel: str = "efficiency") -> Panel:
    """The scaling-efficiency panel of a study: efficiency vs devices, 0 to 1, the ideal 1
    dashed at every device count of the series."""
    xs = sorted({x for points in series.values() for x, _ in points})
    return Panel("scaling efficiency", "devices", ylabel, series, ylim=(0, 1.05),
                 ideal=[(x, 1.0) for x in xs])


def draw_panels(path, suptitle: str, panels: list[Panel], note: str) -> None:
    """Write the figure to ``path`` (PNG, small: 90 dpi)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.4), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        draw_axes(ax, panel)
    fig.suptitle(suptitle, fontsize=11)
    wrapped = "\n".join(textwrap.wrap(note, 175 if len(panels) > 1 else 95))
    fig.text(0.01, 0.01, wrapped, fontsize=7, va="bottom", ha="left", color="#333333")
    lines = wrapped.count("\n") + 1
    fig.tight_layout(rect=(0, 0.035 * lines + 0.02, 1, 0.95))
    save_figure(fig, path, dpi=90)
    plt.close(fig)


def draw_axes(ax, panel: Panel, legend: bool = True, fontsize: float = 10) -> None:
    """One panel on ``ax``: its lines (or bars), the ideal dashed, its axes and legend."""
    if panel.bars:
        _bars(ax, panel)
    else:
        for label, points in panel.series.items():
            xs, ys = zip(*points) if points else ((), ())
            ax.plot(xs, ys, marker="o", markersize=3.5, linewidth=1.4, label=label)
        if panel.ideal:
            xs, ys = zip(*panel.ideal)
            ax.plot(xs, ys, "k--", linewidth=0.9, label="ideal")
        if panel.logx:
            ax.set_xscale("log", base=2)
    if panel.logy:
        ax.set_yscale("log")
    if panel.ylim:
        ax.set_ylim(*panel.ylim)
    ax.set_title(panel.title, fontsize=fontsize)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        ax.legend(fontsize=7.5)


def _bars(ax, panel: Panel) -> None:
    xs = sorted({x for points in panel.series.values() for x, _ in points})
    width = 0.8 / max(len(panel.series), 1)
    for k, (label, points) in enumerate(panel.series.items()):
        values = dict(points)
        ax.bar([i + k * width for i in range(len(xs))], [values.get(x, 0) for x in xs],
               width, label=label)
    ax.set_xticks([i + width * (len(panel.series) - 1) / 2 for i in range(len(xs))])
    ax.set_xticklabels([str(x) for x in xs])
