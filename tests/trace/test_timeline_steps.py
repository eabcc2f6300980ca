"""Timelines of training runs: the first steps large enough to read, the whole run under them
(plot_timeline(steps_shown=N), simdist run/plot --steps-shown)."""

import struct

import pytest

from simdist.commands.cli import main as simdist_main
from simdist.trace.plots import plot_timeline, step_windows
from simdist.trace.schema import Flow, Span, Trace


def training_trace(steps=3, step_ns=1_000) -> Trace:
    """Two workers, each step: compute, a ring's two phases (a message each), an update."""
    trace = Trace(processes=["worker:0", "worker:1"], metadata={"program": "unit-test"})
    for k in range(steps):
        t = k * step_ns
        for w in ("worker:0", "worker:1"):
            trace.spans += [
                Span(w, "train", f"step {k}", "step", t, step_ns - 10 * (w == "worker:1"),
                     {"step": k}),
                Span(w, "CPU:0", "forward+backward", "compute", t, 300),
                Span(w, "CPU:0 collective", "ring step 0 (reduce-scatter)", "ring", t + 300,
                     250, {"phase": "reduce-scatter"}),
                Span(w, "CPU:0 collective", "ring step 1 (all-gather)", "ring", t + 550, 250,
                     {"phase": "all-gather"}),
                Span(w, "CPU:0", "apply SGD", "compute", t + 800, 150),
            ]
        trace.flows.append(Flow(k, "ring", "message", "worker:0", "CPU:0 collective",
                                t + 300, "worker:1", "CPU:0 collective", t + 500))
    return trace


def png_size(path):
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    return width, height


def test_step_windows_span_every_task_of_each_step():
    assert step_windows(training_trace(3)) == [(0, 1_000), (1_000, 2_000), (2_000, 3_000)]
    assert step_windows(Trace()) == []


def test_one_step_drawn_large_above_the_whole_run():
    fig = plot_timeline(training_trace(20), steps_shown=1)
    detail, overview = fig.axes
    assert detail.get_title() == "unit-test: step 0 of 20"
    start, end = detail.get_xlim()
    assert start == 0 and 1.0 <= end <= 1.05  # step 0 (µs) and a small margin
    assert overview.get_xlim()[1] >= 20.0  # the whole run
    texts = {t.get_text() for t in detail.texts}
    assert {"forward+backward", "ring step 0 (reduce-scatter)", "ring step 1 (all-gather)",
            "apply SGD"} <= texts
    assert not overview.texts  # the overview has bars only, no names or arrows
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"ring: reduce-scatter", "ring: all-gather", "compute", "message"} <= legend


def test_several_steps_and_no_overview_when_all_are_shown():
    assert plot_timeline(training_trace(5), steps_shown=2).axes[0].get_title() \
        == "unit-test: steps 0-1 of 5"
    for shown in (None, 0, 3, 7):
        fig = plot_timeline(training_trace(3), steps_shown=shown)
        assert len(fig.axes) == 1 and fig.axes[0].get_title() == "unit-test"


def test_simdist_run_draws_one_step_by_default(tmp_path, capsys):
    one, whole = tmp_path / "one.png", tmp_path / "whole.png"
    args = ["run", "mirrored", "--replicas", "2", "--steps", "4", "--quiet"]
    assert simdist_main([*args, "--timeline", str(one)]) == 0
    assert simdist_main([*args, "--timeline", str(whole), "--steps-shown", "0"]) == 0
    assert png_size(one)[1] > png_size(whole)[1]  # the overview panel under the step
    trace = tmp_path / "t.json"
    assert simdist_main([*args, "--trace", str(trace)]) == 0
    plotted = tmp_path / "p.png"
    assert simdist_main(["plot", str(trace), "-o", str(plotted)]) == 0
    assert png_size(plotted) == png_size(one)


@pytest.mark.parametrize("bad", ["-1", "x"])
def test_steps_shown_must_be_a_count(bad, capsys):
    with pytest.raises(SystemExit) as stop:
        simdist_main(["run", "mirrored", "--steps-shown", bad])
    assert stop.value.code == 2
    assert f"--steps-shown: '{bad}': expected a number of steps >= 0" in capsys.readouterr().err
