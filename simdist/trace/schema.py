"""The trace schema: spans, message flows, counters and instants of one run.

This is what TensorFlow's profiler (and its Chrome/Perfetto "trace viewer") shows for a real
job. simdist records it in simulated nanoseconds; realdist records the same schema from
wall-clock measurements. A trace exports to Chrome Trace Event JSON (pid = task, tid = lane,
microseconds), which opens in https://ui.perfetto.dev and chrome://tracing, and reads back.
"""

from __future__ import annotations

import json
import math
from operator import itemgetter
from dataclasses import dataclass, field
from pathlib import Path

from simdist.base.errors import InvalidArgumentError, brief
from simdist.base.files import write_atomic
from simdist.trace.chrome import check_event, id_order, is_int

SCHEMA_VERSION = 1


@dataclass(slots=True)
class Span:
    """Something a lane (a device, a NIC, a thread) was busy with from ``start`` for ``dur`` ns."""

    pid: str
    lane: str
    name: str
    cat: str
    start: int
    dur: int
    args: dict = field(default_factory=dict)

    @property
    def end(self) -> int:
        return self.start + self.dur


@dataclass(slots=True)
class Flow:
    """A message: sent by ``src_pid`` at ``t_send``, delivered to ``dst_pid`` at ``t_recv``."""

    id: int
    name: str
    cat: str
    src_pid: str
    src_lane: str
    t_send: int
    dst_pid: str
    dst_lane: str
    t_recv: int
    args: dict = field(default_factory=dict)


@dataclass(slots=True)
class Counter:
    """Sampled values (queue depth, bytes in flight, memory) of one named counter at ``t``."""

    pid: str
    name: str
    t: int
    values: dict


@dataclass(slots=True)
class Instant:
    """A point event: a fault, a checkpoint, a barrier released."""

    pid: str
    lane: str
    name: str
    cat: str
    t: int
    args: dict = field(default_factory=dict)


#: what one trace record costs in memory, about: its tuple, args and strings, then the Span
#: built from it (tracemalloc's peak for a 64-task ring all-reduce, 48,384 records: ~480 B
#: each); how --trace-max-mb counts
RECORD_BYTES = 500
#: the default cap on a run's trace, in MB (``simulate(trace_max_mb=...)``, ``--trace-max-mb``)
TRACE_MAX_MB = 512


def max_records_per_stream(max_mb: float | None, num_tasks: int) -> int | None:
    """Each task's stream's share of a cap of ``max_mb`` MB: half the cap for the tasks, in
    equal shares, half for the network's stream, which records every task's messages (a
    share that depends on the cluster alone cuts a run the same way in one process or on
    any number of MPI ranks); None: no cap."""
    if max_mb is None:
        return None
    if isinstance(max_mb, bool) or not isinstance(max_mb, (int, float)) or not max_mb > 0:
        raise InvalidArgumentError(f"trace_max_mb {brief(max_mb)}: expected a number of MB > 0 "
                                   "(or None: no cap)")
    return max(1, int(max_mb * 1e6 / RECORD_BYTES / (2 * num_tasks)))


class Stream(list):
    """The records of one simulated task (or of the network), in the order it produced them:
    plain tuples, so that a run spread over MPI ranks merges into the same trace as a run in
    one process. Past ``cap`` records it keeps none and notes in ``cut`` the earliest time of
    the records it dropped (``build_trace`` then keeps every stream's records before the
    earliest cut: a complete start of the run)."""

    __slots__ = ("cap", "cut")

    def __init__(self, cap: int | None = None):
        super().__init__()
        self.cap = math.inf if cap is None else cap
        self.cut = None

    def _add(self, record):
        if len(self) < self.cap:
            self.append(record)
        elif self.cut is None or record[1] < self.cut:
            self.cut = record[1]

    def span(self, pid, lane, name, cat, start, dur, args=None):
        if len(self) < self.cap:  # NOTE: inlined from _add for performance (the commonest)
            self.append(("X", start, pid, lane, name, cat, dur, args or {}))
        else:
            self._add(("X", start, pid, lane, name, cat, dur, args or {}))

    def flow(self, fid, name, cat, src_pid, src_lane, t_send, dst_pid, dst_lane, t_recv,
             args=None):
        self._add(("F", t_send, fid, name, cat, src_pid, src_lane, dst_pid, dst_lane, t_recv,
                   args or {}))

    def counter(self, pid, name, t, values):
        self._add(("C", t, pid, name, dict(values)))

    def instant(self, pid, lane, name, cat, t, args=None):
        self._add(("i", t, pid, lane, name, cat, args or {}))


class Tracer:
    """Collects trace records, one ``Stream`` per simulated task (plus one for the network),
    each of at most ``max_records`` records (None: no cap).

    ``enabled=False`` makes every call a no-op (the fastest way to simulate); a hot writer
    keeps its own ``stream(key)`` and checks ``enabled`` once.
    """

    def __init__(self, enabled: bool = True, max_records: int | None = None):
        self.enabled = enabled
        self.max_records = max_records
        self.streams: dict[str, Stream] = {}

    def stream(self, key: str, shares: int = 1) -> Stream:
        """The stream of ``key``; a new one may hold ``shares`` times ``max_records``."""
        try:
            return self.streams[key]
        except KeyError:
            cap = None if self.max_records is None else shares * self.max_records
            stream = self.streams[key] = Stream(cap)
            return stream

    def cuts(self) -> dict[str, int]:
        """The streams that reached their cap, and the earliest time each dropped."""
        return {key: s.cut for key, s in self.streams.items() if s.cut is not None}

    def span(self, stream, pid, lane, name, cat, start, dur, args=None):
        if self.enabled:
            self.stream(stream).span(pid, lane, name, cat, start, dur, args)

    def flow(self, stream, fid, name, cat, src_pid, src_lane, t_send, dst_pid, dst_lane, t_recv,
             args=None):
        if self.enabled:
            self.stream(stream).flow(fid, name, cat, src_pid, src_lane, t_send, dst_pid,
                                     dst_lane, t_recv, args)

    def counter(self, stream, pid, name, t, values):
        if self.enabled:
            self.stream(stream).counter(pid, name, t, values)

    def instant(self, stream, pid, lane, name, cat, t, args=None):
        if self.enabled:
            self.stream(stream).instant(pid, lane, name, cat, t, args)


def build_trace(streams: dict[str, list[tuple]], stream_order: list[str], processes: list[str],
                metadata: dict, cut: int | None = None) -> Trace:
    """Merge record streams into a Trace: streams in ``stream_order``, then stably by time;
    with ``cut``, only the records before that time (a capped run's complete start)."""
    records = [rec for key in stream_order for rec in streams.get(key, ())]
    if cut is not None:
        records = [rec for rec in records if rec[1] < cut]
    records.sort(key=itemgetter(1))
    trace = Trace(processes=list(processes), metadata=dict(metadata))
    spans, flows, counters, instants = trace.spans, trace.flows, trace.counters, trace.instants
    for rec in records:
        kind = rec[0]
        if kind == "X":
            _, start, pid, lane, name, cat, dur, args = rec
            spans.append(Span(pid, lane, name, cat, start, dur, args))
        elif kind == "F":
            _, t_send, fid, name, cat, src_pid, src_lane, dst_pid, dst_lane, t_recv, args = rec
            flows.append(Flow(fid, name, cat, src_pid, src_lane, t_send, dst_pid, dst_lane,
                              t_recv, args))
        elif kind == "C":
            _, t, pid, name, values = rec
            counters.append(Counter(pid, name, t, values))
        else:
            _, t, pid, lane, name, cat, args = rec
            instants.append(Instant(pid, lane, name, cat, t, args))
    return trace


def _us(ns: int) -> float:
    return ns / 1000


def _ns(us) -> int:
    return round(float(us) * 1000)


@dataclass
class Trace:
    """One run's events, in the order Chrome's trace viewer and simdist's plots read them."""

    processes: list[str] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    flows: list[Flow] = field(default_factory=list)
    counters: list[Counter] = field(default_factory=list)
    instants: list[Instant] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)

    def lanes(self, pid: str) -> list[str]:
        """The lanes of one process in order of first use."""
        return self.lane_map().get(pid, [])

    def lane_map(self) -> dict[str, list[str]]:
        """Every process's lanes, in order of first use."""
        seen: dict[str, dict[str, None]] = {}
        for pid, lane in self._lane_uses():
            seen.setdefault(pid, {}).setdefault(lane, None)
        return {pid: list(lanes) for pid, lanes in seen.items()}

    def _lane_uses(self):
        for s in self.spans:
            yield s.pid, s.lane
        for i in self.instants:
            yield i.pid, i.lane
        for f in self.flows:
            yield f.src_pid, f.src_lane
            yield f.dst_pid, f.dst_lane

    def end_time(self) -> int:
        """The last simulated (or measured) time any record reaches, in ns."""
        ends = [s.end for s in self.spans] + [f.t_recv for f in self.flows]
        ends += [c.t for c in self.counters] + [i.t for i in self.instants]
        return max(ends, default=0)

    def records(self) -> int:
        """How many records (spans, flows, counters, instants) the trace holds."""
        return len(self.spans) + len(self.flows) + len(self.counters) + len(self.instants)

    def first(self, max_records: int) -> Trace:
        """The trace cut to its earliest ``max_records`` records (by start time; ties all
        kept or all cut), the cut noted in its metadata ("truncated"); itself if it is short
        enough."""
        if self.records() <= max_records:
            return self
        times = sorted([s.start for s in self.spans] + [f.t_send for f in self.flows]
                       + [c.t for c in self.counters] + [i.t for i in self.instants])
        cut = times[max_records]  # records starting at or after it go
        return Trace(list(self.processes), [s for s in self.spans if s.start < cut],
                     [f for f in self.flows if f.t_send < cut],
                     [c for c in self.counters if c.t < cut],
                     [i for i in self.instants if i.t < cut],
                     {**self.metadata, "truncated": {"records": self.records(), "before_ns": cut}})

    # -- Chrome Trace Event JSON -------------------------------------------------------------

    def to_chrome(self) -> dict:
        """Chrome Trace Event format: pid = task, tid = lane, times in microseconds."""
        pids = {name: i for i, name in enumerate(self.processes)}
        for name in self._all_pids():
            pids.setdefault(name, len(pids))
        lane_map = self.lane_map()
        tids = {(pid, lane): tid for pid in pids
                for tid, lane in enumerate(lane_map.get(pid, []))}
        events: list[dict] = []
        for name, pid in pids.items():
            events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"name": name}})
            events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"sort_index": pid}})
        for (pname, lane), tid in tids.items():
            events.append({"name": "thread_name", "ph": "M", "pid": pids[pname], "tid": tid,
                           "args": {"name": lane}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": pids[pname],
                           "tid": tid, "args": {"sort_index": tid}})
        for s in self.spans:
            events.append({"name": s.name, "cat": s.cat, "ph": "X", "ts": _us(s.start),
                           "dur": _us(s.dur), "pid": pids[s.pid], "tid": tids[(s.pid, s.lane)],
                           "args": s.args})
        for f in self.flows:
            src = {"name": f.name, "cat": f.cat, "ph": "s", "id": f.id, "ts": _us(f.t_send),
                   "pid": pids[f.src_pid], "tid": tids[(f.src_pid, f.src_lane)],
                   "args": f.args}
            dst = {"name": f.name, "cat": f.cat, "ph": "f", "bp": "e", "id": f.id,
                   "ts": _us(f.t_recv), "pid": pids[f.dst_pid],
                   "tid": tids[(f.dst_pid, f.dst_lane)], "args": {}}
            events += [src, dst]
        for c in self.counters:
            events.append({"name": c.name, "ph": "C", "ts": _us(c.t), "pid": pids[c.pid],
                           "tid": 0, "args": c.values})
        for i in self.instants:
            events.append({"name": i.name, "cat": i.cat, "ph": "i", "s": "t", "ts": _us(i.t),
                           "pid": pids[i.pid], "tid": tids[(i.pid, i.lane)], "args": i.args})
        other = {"schema_version": SCHEMA_VERSION, **self.metadata}
        return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}

    def _all_pids(self):
        for pid, _ in self._lane_uses():
            yield pid
        for c in self.counters:
            yield c.pid

    def to_json(self) -> str:
        """Deterministic JSON text: one event per line, so that equal runs give equal bytes."""
        chrome = self.to_chrome()
        lines = [json.dumps(e, separators=(",", ":")) for e in chrome["traceEvents"]]
        head = json.dumps({"displayTimeUnit": chrome["displayTimeUnit"],
                           "otherData": chrome["otherData"]}, separators=(",", ":"),
                          sort_keys=True)
        return head[:-1] + ',"traceEvents":[\n' + ",\n".join(lines) + "\n]}\n"

    def save(self, path) -> Path:
        """Write the trace's JSON to ``path``, whole or not at all."""
        return write_atomic(path, self.to_json())

    @classmethod
    def load(cls, path) -> Trace:
        """Read a Chrome Trace Event JSON file written by simdist or realdist."""
        from simdist.base.files import read_json

        return cls.from_chrome(read_json(path, "trace"), source=f"trace file '{path}'")

    @classmethod
    def from_chrome(cls, data, source: str = "trace") -> Trace:
        """A trace from Chrome Trace Event JSON (as ``json.load`` gives it), checked: a
        hand-edited or wrong-kind one is an InvalidArgumentError naming ``source``, the event
        and what is wrong."""
        if isinstance(data, list):
            data = {"traceEvents": data}
        if isinstance(data, dict) and "losses" in data and "exercise" in data:
            raise InvalidArgumentError(
                f"{source} is a run result (simdist run --result, realdist run), not a trace: "
                "give the file of --trace, or 'simdist compare' the result")
        if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
            raise InvalidArgumentError(
                f"{source} has no 'traceEvents' list: expected Chrome Trace Event JSON")
        other = data.get("otherData", {})
        if not isinstance(other, dict):
            raise InvalidArgumentError(f"{source}: 'otherData' is {brief(other)}: expected an "
                                       "object")
        other = dict(other)
        version = other.pop("schema_version", None)
        if version is not None and (not is_int(version) or version < 1):
            raise InvalidArgumentError(f"{source}: schema_version {brief(version)}: expected "
                                       "an int >= 1")
        if version is not None and version > SCHEMA_VERSION:
            raise InvalidArgumentError(
                f"{source} has trace schema version {version}; this simdist reads up to "
                f"{SCHEMA_VERSION}: upgrade simdist")
        events = data["traceEvents"]
        for k, e in enumerate(events):
            check_event(e, f"{source}: event {k}")
        pnames: dict[int, str] = {}
        lanes: dict[tuple[int, int], str] = {}
        for e in events:
            if e.get("ph") == "M" and e.get("name") == "process_name":
                pnames[e["pid"]] = e["args"]["name"]
            elif e.get("ph") == "M" and e.get("name") == "thread_name":
                lanes[(e["pid"], e["tid"])] = e["args"]["name"]

        def pid_of(e):
            return pnames.get(e["pid"], str(e["pid"]))

        def lane_of(e):
            return lanes.get((e["pid"], e.get("tid", 0)), str(e.get("tid", 0)))

        trace = cls(processes=[pnames[k] for k in sorted(pnames, key=id_order)],
                    metadata=other)
        starts: dict = {}
        for e in events:
            ph = e.get("ph")
            if ph == "X":
                trace.spans.append(Span(pid_of(e), lane_of(e), e["name"], e.get("cat", ""),
                                        _ns(e["ts"]), _ns(e.get("dur", 0)), e.get("args", {})))
            elif ph == "s":
                starts[e["id"]] = e
            elif ph == "f" and e["id"] in starts:
                s = starts.pop(e["id"])
                trace.flows.append(Flow(e["id"], s["name"], s.get("cat", ""), pid_of(s),
                                        lane_of(s), _ns(s["ts"]), pid_of(e), lane_of(e),
                                        _ns(e["ts"]), s.get("args", {})))
            elif ph == "C":
                trace.counters.append(Counter(pid_of(e), e["name"], _ns(e["ts"]),
                                              e.get("args", {})))
            elif ph in ("i", "I"):
                trace.instants.append(Instant(pid_of(e), lane_of(e), e["name"],
                                              e.get("cat", ""), _ns(e["ts"]),
                                              e.get("args", {})))
        return trace
