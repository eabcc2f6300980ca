"""The scheduler: runs one program on every task of a cluster, in-process or over MPI ranks.

Time advances in conservative windows (a classic parallel discrete-event simulation scheme).
Each window starts at the earliest pending event over all ranks, T, and is as wide as the
fastest link between two tasks, L: a message sent inside [T, T+L) cannot arrive before T+L, so
every rank can run its tasks' events in that window without hearing from the others. Between
windows the ranks swap the window's messages (one allgather of headers, payloads by buffer
calls) and every rank advances the same network model on the same inputs (or, untraced,
only its own machines' ports: ``Simulation.apart``). The in-process transport runs the very
same loop with a single rank, which is why both give identical traces.
"""

from __future__ import annotations

import contextlib
import gc
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

from simdist.hardware.cluster import ClusterSpec, task_to_rank
from simdist.sim.bulletin import Bulletin
from simdist.sim.context import TaskContext
from simdist.sim.core import INFINITY, Environment, SimulationDeadlock
from simdist.hardware.devices import Hardware, HardwareCatalog
from simdist.base.errors import InvalidArgumentError
from simdist.sim.flows import FIDELITIES
from simdist.base.checks import check_seed
from simdist.sim.limits import DEFAULT_LIMITS, RunLimitError, RunLimits, check_limits
from simdist.sim.network import APART, NETWORK_STREAM, Network, new_header, nic_name
from simdist.sim.payloads import rebuild_payload
from simdist.trace.schema import TRACE_MAX_MB, Trace, Tracer, build_trace, max_records_per_stream
from simdist.sim.transports import InProcessTransport
from simdist.hardware.units import format_ns


@dataclass
class SimulationResult:
    """What ``simulate`` returns (complete on rank 0; other ranks get their own part)."""

    trace: Trace | None
    end_time: int
    returns: dict = field(default_factory=dict)
    events: int = 0
    windows: int = 0
    messages: int = 0
    bytes_sent: int = 0
    transport: str = "inprocess"
    ranks: int = 1
    rank: int = 0
    fidelity: str = "message"
    flows: int = 0  # flow-level collectives run (fidelity "flow")
    #: the trace holds only the records before this time (its cap was reached), or None
    trace_cut_ns: int | None = None


class WindowReport(NamedTuple):
    """What one rank tells every other at the end of a window (the window's allgather)."""

    #: each message its tasks sent in the window: its MessageHeader's fields as a plain
    #: tuple (pickled 3 to 4 times faster than the NamedTuple; ``new_header`` rebuilds it);
    #: in one process None (no other rank reads them)
    headers: list | None
    next_time: int | float  # when its next event happens (INFINITY: none is scheduled)
    live: int  # its processes started and not ended (daemons included)
    now: int  # its simulated time
    events: int  # the events it has scheduled so far
    out_of_time: bool  # its run has taken longer than ``RunLimits`` allow (wall clock)
    joins: list  # a FlowJoin for each flow-level collective its tasks joined
    #: the payload arrays of its messages to other ranks' tasks, by (src, seq), when they
    #: are small enough to ride in the report (``INLINE_BYTES``); else None: they move apart
    payloads: dict | None
    notices: list  # what its tasks posted in the window (``bulletin.Bulletin``)
    messages: int  # the messages its network has delivered so far (``Network.messages``)


class RankResult(NamedTuple):
    """What one rank hands rank 0 when the run has ended (``Simulation.result``)."""

    streams: dict  # its tasks' trace records, by stream
    returns: dict  # its tasks' return values, by task name
    events: int  # the events it scheduled
    end_time: int  # its simulated time at the end
    cuts: dict  # where its capped trace streams were cut (``Tracer.cuts``)
    messages: int  # the messages its network delivered
    bytes_sent: int  # and their bytes


class TraceCapWarning(UserWarning):
    """The trace reached its cap (``trace_max_mb``): it holds the start of the run only."""


def trace_cap_message(result: SimulationResult, max_mb) -> str:
    """One line: where the trace was cut and how to keep more."""
    share = result.trace_cut_ns / result.end_time * 100 if result.end_time else 100.0
    return (f"trace capped at {max_mb:g} MB: it keeps the first {format_ns(result.trace_cut_ns)}"
            f" of {format_ns(result.end_time)} simulated ({share:.1f}%); raise "
            "--trace-max-mb (trace_max_mb=) to keep more, or run without a trace")


def default_hardware() -> Hardware:
    return Hardware.from_catalog(HardwareCatalog.default(), "cpu")


def simulate(cluster, main, *, hardware: Hardware | None = None, seed: int = 0,
             trace: bool = True, transport=None, metadata: dict | None = None,
             limits: RunLimits | None = DEFAULT_LIMITS, fidelity: str = "message",
             trace_max_mb: float | None = TRACE_MAX_MB) -> SimulationResult:
    """Run ``main(ctx)`` (a generator function) as the program of every task of ``cluster``.

    ``cluster`` is a ClusterSpec or its dict; ``transport`` is ``InProcessTransport()``
    (default) or ``MPITransport()`` under mpiexec; ``limits`` (``RunLimits``) ends a run
    that takes too many events or too much simulated time with a ``RunLimitError``, by
    default at ``simdist run``'s defaults (``DEFAULT_LIMITS``: 10 million events, a
    simulated day; None: no limit), so that a program that never ends stops; ``fidelity`` is
    "message" (every message of a collective simulated) or "flow" (a collective over
    size-only values is a few flows: ``simdist.collectives.flow``); ``trace_max_mb`` caps
    the trace's memory (``trace.Tracer``; None: no cap). Returns the trace, the simulated
    end time and each task's return value.
    """
    with _collector_paused():
        simulation = Simulation(cluster, main, hardware=hardware, seed=seed, trace=trace,
                                transport=transport, metadata=metadata, limits=limits,
                                fidelity=fidelity, trace_max_mb=trace_max_mb)
        simulation.advance()
        result = simulation.result()
        for stream in simulation.tracer.streams.values():  # in the trace now: freed before
            stream.clear()  # the collector resumes, which would walk each of them once more
    return result


@contextlib.contextmanager
def _collector_paused():
    """A run allocates many small objects that live to the end (trace records, messages);
    Python's cyclic collector would rescan them again and again, so pause it meanwhile."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            if gc.get_freeze_count() == 0:  # (unless the program froze objects of its own)
                # what the run allocated goes to the oldest generation, as its survivors
                # (the trace) would after two collections, without the young collection
                # walking each (0.23 s for a trace of 500,000 records): freeze moves every
                # tracked object aside, unfreeze into the oldest generation, both in O(1)
                gc.freeze()
                gc.unfreeze()
            gc.enable()


class Simulation:
    """One simulation of a cluster, advanced window by window: ``simulate`` runs it to the
    end; a TF1 session that outlives one ``Session.run`` advances it run by run."""

    def __init__(self, cluster, main, *, hardware: Hardware | None = None, seed: int = 0,
                 trace: bool = True, transport=None, metadata: dict | None = None,
                 limits: RunLimits | None = DEFAULT_LIMITS, fidelity: str = "message",
                 trace_max_mb: float | None = TRACE_MAX_MB):
        cluster = cluster if isinstance(cluster, ClusterSpec) else ClusterSpec(cluster)
        self.hardware = hardware = hardware or default_hardware()
        self.transport = transport = transport or InProcessTransport()
        check_seed(seed)  # numpy's generators refuse a negative one
        limits = check_limits(limits)
        if fidelity not in FIDELITIES:
            raise InvalidArgumentError(f"fidelity {fidelity!r}: expected one of "
                                       f"{', '.join(FIDELITIES)}")
        self.seed, self.trace, self.metadata, self.limits = seed, trace, metadata, limits
        self.fidelity, self.trace_max_mb = fidelity, trace_max_mb
        tasks = cluster.tasks()
        self.names = names = [t.name for t in tasks]
        self.rank_of = rank_of = task_to_rank(len(tasks), transport.size)
        me = transport.rank

        self.env = env = Environment()
        self.tracer = tracer = Tracer(trace, max_records_per_stream(trace_max_mb, len(tasks)))
        self.outbox: list = []
        self.joins: list = []  # flow-level collectives joined in this window (FlowJoin)
        self.bulletin = Bulletin()  # notices every rank learns at a window's end
        self.contexts: dict[int, TaskContext] = {}
        self.procs = {}
        for order, task in enumerate(tasks):
            if rank_of[order] != me:
                continue
            ctx = self.contexts[order] = TaskContext(env, cluster, task, hardware, tracer, seed,
                                                     self.outbox, fidelity, self.joins,
                                                     self.bulletin)
            generator = main(ctx)
            if not hasattr(generator, "send"):
                raise InvalidArgumentError(
                    f"the program's main({ctx.name}) returned {generator!r}, expected a "
                    "generator: write it as a function that yields events (env.timeout, "
                    "ctx.recv, ...)")
            self.procs[order] = env.process(generator, name=f"{task.name}/main", order=order)

        self.network = Network(hardware, names, tracer if me == 0 else Tracer(enabled=False))
        self.window = self.network.min_latency()
        if self.window <= 0:
            raise InvalidArgumentError(f"the smallest link latency is {self.window} ns; every "
                                       "link needs a latency > 0 ns for the time windows to "
                                       "advance")
        self.payloads: dict = {}
        self.windows = 0
        #: each rank prices only its own machines' ports: possible when every machine's tasks
        #: are on one rank (its NIC's FIFOs then see that rank's messages only) and nobody
        #: traces the network (rank 0 draws every message); else every rank runs the whole
        #: network model on every window's headers
        first = {}
        self.apart = transport.size > 1 and not trace and all(
            first.setdefault(hardware.layout.machine_of(o), rank) == rank
            for o, rank in enumerate(rank_of))
        self.local = [rank == me for rank in rank_of]

    def advance(self, until=None) -> None:
        """Run time windows until the event ``until`` has happened (in-process only), or,
        with None, until nothing is left to run; a run that stops with processes still
        waiting (daemons aside) is a ``SimulationDeadlock``."""
        with _collector_paused():
            self._advance(until)

    def _advance(self, until) -> None:
        env, network, transport, outbox = self.env, self.network, self.transport, self.outbox
        contexts, payloads, limits = self.contexts, self.payloads, self.limits
        out_of_time = limits.out_of_time if limits is not None else None
        joins, bulletin = self.joins, self.bulletin
        over_ranks = transport.size > 1
        while until is None or not until.processed:
            sent, outbox[:] = list(outbox), []
            joined, joins[:] = list(joins), []
            remote = _remote(transport.rank, sent, self.rank_of) if over_ranks else []
            if self.apart:  # this rank's messages priced here, the others' by their ranks
                outgoing, due = network.egress(sent, self.local)
                report_headers, next_time = outgoing, min(env.peek(), network.next_time(), due)
            else:
                report_headers = [tuple(m[0]) for m in sent] if over_ranks else None
                next_time = env.peek()
            info = transport.allgather(WindowReport(
                report_headers, next_time, env.live_processes, env.now, env.events_scheduled,
                out_of_time is not None and out_of_time(), joined, _inline(remote),
                bulletin.take(), network.messages))
            bulletin.deliver([key for report in info for key in report.notices])
            headers = []  # the other ranks' messages, by rank
            if self.apart:
                headers = _accept(network, info, transport.rank, self.local)
            elif over_ranks:
                headers = [[] if rank == transport.rank else list(map(new_header, r.headers))
                           for rank, r in enumerate(info)]
            if over_ranks:
                _move_payloads(transport, remote, info, headers, self.rank_of, payloads,
                               contexts)
            if not self.apart:
                network.egress(sent + [(h, None, APART) for part in headers for h in part])
            if any(report.joins for report in info):
                network.flows.join([j for report in info for j in report.joins])
            start = min(min(report.next_time for report in info), network.next_time())
            live = sum(report.live for report in info)
            if start == INFINITY:
                if live:  # processes still live: a deadlock unless daemons
                    _raise_deadlock(transport, env, info, self.names)
                break
            if limits is not None:  # every rank sees the same numbers: all stop together
                events = sum(report.events for report in info)
                reached = limits.reached(events, start,
                                         any(report.out_of_time for report in info))
                if reached:
                    messages = (sum(report.messages for report in info) if self.apart else
                                network.messages)
                    raise RunLimitError(reached, events, start, self.windows, messages, live)
            limit = bulletin.window_end = start + self.window
            for arrival, header, payload in network.ingress(limit):
                ctx = contexts.get(header[3])  # header.dst (a hot path: fields by index)
                if ctx is not None:
                    if payload is APART:  # it came from another rank: by (src, seq)
                        payload = payloads.pop((header[1], header[2]))
                    ctx.deliver_at(arrival, header, payload)
            for done in network.flows.advance(limit):
                ctx = contexts.get(done.order)
                if ctx is not None:
                    ctx.flow_done_at(done.time, done.key, done.phases)
            env.run_until(limit)
            self.windows += 1

    def result(self) -> SimulationResult:
        """The run's result (complete on rank 0), once ``advance()`` has run it to the end."""
        env, network, transport, names = self.env, self.network, self.transport, self.names
        me = transport.rank
        returns = {names[o]: p.value for o, p in self.procs.items()}
        parts = transport.gather(RankResult(self.tracer.streams, returns, env.events_scheduled,
                                            env.now, self.tracer.cuts(), network.messages,
                                            network.bytes_sent))
        result = SimulationResult(
            trace=None, end_time=env.now, returns=returns, events=env.events_scheduled,
            windows=self.windows, messages=network.messages, bytes_sent=network.bytes_sent,
            transport=transport.name, ranks=transport.size, rank=me, fidelity=self.fidelity,
            flows=network.flows.flows)
        if me != 0:
            return result
        streams: dict = {}
        for part in parts:
            streams.update(part.streams)
            if part.cuts:
                cut = min(part.cuts.values())
                result.trace_cut_ns = min(cut, result.trace_cut_ns or cut)
        result.returns = {n: r for part in parts for n, r in part.returns.items()}
        result.returns = {n: result.returns[n] for n in names}
        result.events = sum(part.events for part in parts)
        if self.apart:  # each rank delivered its own tasks' messages
            result.messages = sum(part.messages for part in parts)
            result.bytes_sent = sum(part.bytes_sent for part in parts)
        result.end_time = max(part.end_time for part in parts)
        if self.trace:
            result.trace = self.build_trace(streams, result.end_time, result.trace_cut_ns)
            if result.trace_cut_ns is not None:
                warnings.warn(TraceCapWarning(trace_cap_message(result, self.trace_max_mb)),
                              stacklevel=3)
        return result

    def build_trace(self, streams, end_time: int, cut: int | None = None) -> Trace:
        hardware, names = self.hardware, self.names
        machines = hardware.layout.num_machines(len(names))
        nics = [nic_name(m) for m in range(machines)] if machines > 1 else []
        meta = {**(self.metadata or {}), "seed": self.seed, "system": hardware.system.name,
                "tasks": len(names), "machines": machines,
                "tasks_per_machine": hardware.layout.tasks_per_machine,
                "end_time_ns": end_time}
        if self.fidelity != "message":
            meta["fidelity"] = self.fidelity
        if cut is not None:
            meta["truncated"] = {"before_ns": cut, "trace_max_mb": self.trace_max_mb}
        return build_trace(streams, names + [NETWORK_STREAM], names + nics, meta, cut)


#: the most payload bytes a rank's window report carries itself (beyond: buffer calls apart)
INLINE_BYTES = 1 << 18


def _remote(me, sent, rank_of) -> list:
    """This window's messages to other ranks' tasks, as (dst rank, (src, seq), arrays)."""
    remote = []
    for header, arrays, _ in sent:
        dst_rank = rank_of[header.dst]
        if dst_rank != me:
            remote.append((dst_rank, (header.src, header.seq), arrays))
    return remote


def _inline(remote) -> dict | None:
    """The payloads that ride in the window report: all of them when they are small."""
    if sum(a.nbytes for _, _, arrays in remote for a in arrays) > INLINE_BYTES:
        return None
    return {key: arrays for _, key, arrays in remote}


def _move_payloads(transport, remote, info, headers, rank_of, payloads, contexts):
    """Hand this window's payload arrays to the rank of each message's destination (into the
    receive buffer its receiver offered, when there is one: ``TaskContext.landing_buffer``):
    from the senders' reports when they carry them, else by buffer calls."""
    me = transport.rank
    mine = info[me].payloads
    outgoing = [] if mine is not None else remote
    incoming, descs = [], {}
    for src_rank, report in enumerate(info):
        if src_rank == me:
            continue
        for h in headers[src_rank]:
            if rank_of[h.dst] != me:
                continue
            key = (h.src, h.seq)
            into = contexts[h.dst].landing_buffer(h)  # where the one array may land
            if report.payloads is not None:
                arrays = report.payloads[key]
                if into is not None:
                    into[...] = arrays[0]
                    arrays = [into]
                payloads[key] = rebuild_payload(h.desc, arrays)
            else:  # (dtype, shape) of each array
                incoming.append((src_rank, key, h.desc[-1], into))
                descs[key] = h.desc
    if outgoing or incoming:
        received = transport.exchange_payloads(outgoing, incoming)
        for key, specs_desc in descs.items():
            payloads[key] = rebuild_payload(specs_desc, received[key])


def _accept(network, info, me, local) -> list:
    """The messages of other ranks' tasks to this rank's (``Simulation.apart``), into
    ``network`` as their senders' ranks priced them; returns each rank's as MessageHeaders
    (this rank's own: none), for ``_move_payloads``."""
    headers = []
    for rank, report in enumerate(info):
        part = []
        if rank != me:
            for fields, start, ser, due in report.headers:
                if local[fields[3]]:  # its dst (MessageHeader's fourth field)
                    header = new_header(fields)
                    network.accept(header, start, ser, due)
                    part.append(header)
        headers.append(part)
    return headers


def _raise_deadlock(transport, env, info, names):
    blocked = [b for part in transport.allgather(env.blocked()) for b in part]
    if not blocked:  # every live process is a daemon (e.g. a server in join()): a clean end
        return
    order = {n: i for i, n in enumerate(names)}
    blocked.sort(key=lambda b: (order.get(b[0].split("/")[0], len(order)), b[0]))
    raise SimulationDeadlock(max(report.now for report in info), blocked)
