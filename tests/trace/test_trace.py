"""Chrome Trace Event JSON: valid, complete, non-overlapping per lane, readable back."""

import json

import numpy as np
import pytest

from simdist import Trace, simulate
from simdist.commands.cli import main as simdist_main
from simdist.base.errors import InvalidArgumentError
from simdist.trace.schema import SCHEMA_VERSION

from tests.conftest import PROGRAMS

REQUIRED = {"X": {"name", "cat", "ph", "ts", "dur", "pid", "tid"},
            "s": {"name", "ph", "id", "ts", "pid", "tid"},
            "f": {"name", "ph", "id", "ts", "pid", "tid", "bp"},
            "C": {"name", "ph", "ts", "pid", "args"},
            "i": {"name", "ph", "ts", "pid", "tid", "s"},
            "M": {"name", "ph", "pid", "args"}}


@pytest.fixture(scope="module")
def chatter_json(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "chatter.json"
    assert simdist_main(["run", str(PROGRAMS / "chatter.py"), "--quiet", "--trace",
                         str(path)]) == 0
    return path


def test_chrome_json_loads_and_every_event_has_its_required_fields(chatter_json):
    data = json.loads(chatter_json.read_text())
    assert data["otherData"]["schema_version"] == SCHEMA_VERSION
    assert data["displayTimeUnit"] == "ns"
    events = data["traceEvents"]
    phases = {e["ph"] for e in events}
    assert {"X", "s", "f", "C", "M"} <= phases
    for e in events:
        missing = REQUIRED[e["ph"]] - set(e)
        assert not missing, f"{e} lacks {missing}"
        assert isinstance(e["pid"], int)
        if "ts" in e:
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert {"chief:0", "worker:0", "ps:1", "machine:0 NIC"} <= names


def test_spans_do_not_overlap_within_a_lane(chatter_json):
    data = json.loads(chatter_json.read_text())
    lanes = {}
    for e in data["traceEvents"]:
        if e["ph"] == "X":
            lanes.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    assert len(lanes) > 10
    for lane, spans in lanes.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end - 1e-9, f"overlap in lane {lane}: {end} > {start}"


def test_flows_pair_up_and_point_forward_in_time(chatter_json):
    data = json.loads(chatter_json.read_text())
    starts = {e["id"]: e for e in data["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: e for e in data["traceEvents"] if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and len(starts) == 60  # chatter.py: --messages 60
    for fid, s in starts.items():
        assert ends[fid]["ts"] >= s["ts"]


def test_trace_reads_back_to_the_same_records(chatter_json):
    trace = Trace.load(chatter_json)
    again = Trace.from_chrome(json.loads(trace.to_json()))
    assert again.spans == trace.spans and again.flows == trace.flows
    assert again.counters == trace.counters and again.instants == trace.instants
    assert trace.to_json() == chatter_json.read_text()
    assert trace.metadata["program"] == "chatter"


def test_times_survive_the_microsecond_conversion_exactly():
    def main(ctx):
        yield ctx.timeout(123_456_789)
        ctx.instant("cpu", "checkpoint", step=1)
        ctx.span("cpu", "odd", "compute", ctx.now, 1)

    trace = simulate({"worker": 1}, main).trace
    back = Trace.from_chrome(json.loads(trace.to_json()))
    assert back.instants[0].t == 123_456_789 and back.spans[0].dur == 1


def test_unreadable_trace_files_are_clear_errors(tmp_path):
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        Trace.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidArgumentError, match="is not valid JSON"):
        Trace.load(bad)
    bad.write_text('{"foo": 1}')
    with pytest.raises(InvalidArgumentError, match="no 'traceEvents'"):
        Trace.load(bad)


def test_tracing_off_records_nothing_but_gives_the_same_results():
    def main(ctx):
        if ctx.order == 0:
            ctx.send(1, "x", np.ones(1000))
        else:
            return (yield ctx.recv()).arrived_at

    on = simulate({"worker": 2}, main, trace=True)
    off = simulate({"worker": 2}, main, trace=False)
    assert off.trace is None and on.trace.spans
    assert on.returns == off.returns and on.end_time == off.end_time
