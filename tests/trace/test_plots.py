"""Tests of simdist.trace.plots: the summary numbers, the text table and the timeline PNG."""

import pytest

from simdist.trace.plots import format_summary, plot_timeline, summarize
from simdist.trace.schema import Flow, Instant, Span, Trace

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def small_trace() -> Trace:
    """Two workers and a NIC; worker:0 runs overlapping spans on two lanes."""
    trace = Trace(processes=["worker:0", "worker:1", "machine:0 NIC"],
                  metadata={"program": "unit-test"})
    trace.spans += [
        Span("worker:0", "cpu:0", "matmul", "compute", 0, 4_000),
        Span("worker:0", "gpu:0", "conv2d", "compute", 2_000, 4_000),  # overlaps 2000..4000
        Span("worker:0", "cpu:0", "send grads", "send", 10_000, 1_000),
        Span("worker:0", "cpu:0", "marker", "compute", 10_500, 0),  # zero duration
        Span("worker:1", "cpu:0", "recv grads", "recv", 11_000, 2_000),
        Span("machine:0 NIC", "egress", "grads", "network", 10_000, 3_000),
    ]
    trace.flows += [
        Flow(1, "grads", "message", "worker:0", "cpu:0", 10_000, "worker:1", "cpu:0", 13_000,
             {"bytes": 1024 * 1024}),
        Flow(2, "ack", "message", "worker:1", "cpu:0", 13_000, "worker:0", "cpu:0", 14_000,
             {"bytes": 512}),
        Flow(3, "ping", "message", "worker:0", "cpu:0", 14_000, "worker:1", "cpu:0", 20_000),
    ]
    trace.instants.append(Instant("worker:1", "cpu:0", "checkpoint", "fault", 15_000))
    return trace


def test_summarize_counts_overlaps_once():
    trace = small_trace()
    rows = {row["task"]: row for row in summarize(trace)}
    assert list(rows) == ["worker:0", "worker:1", "machine:0 NIC"]
    assert trace.end_time() == 20_000
    w0, w1, nic = rows["worker:0"], rows["worker:1"], rows["machine:0 NIC"]
    assert w0["busy_ns"] == 6_000 + 1_000  # [0, 6000) and [10000, 11000)
    assert w0["idle_ns"] == 13_000
    assert w0["busy_pct"] == pytest.approx(35.0)
    assert w0["spans"] == 4
    assert (w0["messages_sent"], w0["bytes_sent"], w0["messages_received"]) == (2, 1024**2, 1)
    assert (w1["busy_ns"], w1["idle_ns"], w1["spans"]) == (2_000, 18_000, 1)
    assert (w1["messages_sent"], w1["bytes_sent"], w1["messages_received"]) == (1, 512, 2)
    assert (nic["busy_ns"], nic["messages_sent"], nic["bytes_sent"]) == (3_000, 0, 0)


def test_summarize_includes_pids_only_in_records():
    trace = Trace(processes=["worker:0"])
    trace.spans.append(Span("ps:0", "cpu:0", "apply", "compute", 0, 10))
    assert [row["task"] for row in summarize(trace)] == ["worker:0", "ps:0"]
    assert summarize(trace)[0]["idle_ns"] == 10


def test_format_summary_table():
    trace = small_trace()
    text = format_summary(summarize(trace), trace.end_time())
    for word in ("task", "busy", "idle", "busy %", "msgs sent", "bytes sent", "msgs recv",
                 "worker:0", "worker:1", "machine:0 NIC", "7.0 µs", "13.0 µs", "1.0 MiB",
                 "512 B", "35.0"):
        assert word in text
    assert text.splitlines()[-1] == "simulated time: 20.0 µs"
    assert len({len(line) for line in text.splitlines()[:2]}) == 1  # header matches rule


def test_plot_timeline_writes_png(tmp_path):
    trace = small_trace()
    path = tmp_path / "sub" / "timeline.png"
    fig = plot_timeline(trace, path)
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["worker:0 / cpu:0", "worker:0 / gpu:0", "worker:1 / cpu:0",
                      "machine:0 NIC / egress"]
    assert ax.get_title() == "unit-test"
    assert ax.get_xlabel() == "simulated time (µs)"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"compute", "send", "recv", "network"} <= set(legend)


def test_plot_timeline_limits_flows():
    trace = small_trace()
    fig = plot_timeline(trace, title="custom", max_flows=2)
    assert fig.axes[0].get_title() == "custom"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "message (2 of 3 shown)" in legend


def test_plot_timeline_empty_trace(tmp_path):
    path = tmp_path / "empty.png"
    fig = plot_timeline(Trace(), path)
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == []
    assert ax.get_title() == "simdist trace"
    assert any("empty" in t.get_text() for t in ax.texts)
    assert format_summary(summarize(Trace()), 0).endswith("simulated time: 0 ns")


def test_counters_get_a_panel_of_their_own_under_the_lanes(tmp_path):
    from simdist.trace.schema import Counter

    trace = Trace(processes=["ps:0"],
                  spans=[Span("ps:0", "CPU:0", "dequeue", "compute", 0, 500)],
                  counters=[Counter("ps:0", "queue q", t, {"size": n})
                            for t, n in ((0, 0), (100, 2), (300, 1))])
    fig = plot_timeline(trace, tmp_path / "t.png")
    lanes, panel = fig.axes[:2]
    assert [line.get_label() for line in panel.get_lines()] == ["ps:0: queue q"]
    assert list(panel.get_lines()[0].get_ydata()) == [0, 2, 1]
    assert len(plot_timeline(Trace(processes=["a"])).axes) == 1  # no counters: no panel
