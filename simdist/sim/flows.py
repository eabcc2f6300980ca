"""Flow-level network (``fidelity="flow"``): a collective's phases as fluid flows, not messages.

What packet-level and flow-level network simulators (SimGrid's fluid model, ASTRA-sim's
analytical backend) do: instead of one event per message, each phase of a collective is one
flow that moves a known number of bytes through each NIC it uses, and concurrent flows share
a NIC's bandwidth max-min fairly (progressive filling). A phase alone on the network lasts
exactly its closed-form time: it is ``head`` ns of latency (the first bits in flight), then
``W`` ns of transfer (W = its busiest port's time, below; a flow running at speed s < 1
because others share its ports takes W/s), then the rest of its latency.

A collective starts when its last member joins (the members of a message-mode collective may
start their first sends before). Like ``network.Network``, this is a deterministic state
machine that every MPI rank runs on the same joins, so the flows' times never depend on how
tasks are spread over ranks. A port's time in a phase is its bytes / bandwidth plus the
link's ``message_ns`` for each of its messages but the first, whose cost is inside the
latency (as in message mode: k messages through a port take a + k m/B + (k-1) o).
``head`` is the time window's width (the smallest latency): a flow learned of at the end of
a window only starts using bandwidth after that window, so no flow already finished can be
slowed down by one that starts later.
"""

from __future__ import annotations

import math
from heapq import heappop, heappush
from typing import NamedTuple

from simdist.sim.core import INFINITY
from simdist.hardware.devices import Hardware
from simdist.base.errors import InvalidArgumentError

#: how collectives over size-only values are simulated: every message, or a few flows
FIDELITIES = ("message", "flow")
#: the two kinds of link a flow's traffic may cross
NETWORK, INTRA = "network", "intra"


class PortTraffic(NamedTuple):
    """What one member's port sends and receives in a phase: bytes and messages."""

    order: int  # the member's task order
    link: str  # NETWORK or INTRA
    tx: int  # bytes sent
    rx: int  # bytes received
    tx_messages: int = 0
    rx_messages: int = 0

    def busy_ns(self, link) -> tuple[float, float]:
        """(sending, receiving) time of this traffic on ``link`` (a LinkProfile), ns."""
        per_byte = 1e9 / link.bandwidth
        return (self.tx * per_byte + self.tx_messages * link.message_ns,
                self.rx * per_byte + self.rx_messages * link.message_ns)


class FlowPhase(NamedTuple):
    """One phase of a collective (a reduce-scatter, a push...): its time alone on the network
    (ns, from the closed form) and what each member's port sends and receives."""

    name: str
    duration_ns: float
    traffic: tuple  # a PortTraffic per member and link


class FlowJoin(NamedTuple):
    """A member joining a flow-level collective (what crosses MPI ranks in a window)."""

    time: int
    order: int  # the member's task order
    key: tuple  # the same on every member of one call
    members: int  # how many joins the call waits for
    phases: tuple | None  # sent by one member only (the others send None): the plan
    what: str  # the call as this member made it: every member's must be the same


class PhaseSpan(NamedTuple):
    """When one phase of a flow-level collective ran, in whole ns."""

    name: str
    start: int
    end: int


class FlowEnd(NamedTuple):
    """A flow-level collective ending for one of its members (``FlowModel.advance``)."""

    time: int  # when the call ends, ns
    order: int  # the member's task order
    key: tuple  # the call's key (``FlowJoin.key``)
    phases: tuple  # a PhaseSpan for each phase of the call


class _PendingFlow:
    """A call whose members are still joining."""

    __slots__ = ("times", "phases", "first")

    def __init__(self, first: FlowJoin):
        self.times: dict = {}  # member's task order -> when it joined
        self.phases = None  # the plan, once the member that sends it has joined
        self.first = first  # the first join: every other member's ``what`` must match it


class _Phase:
    """A phase running: its ports' rates at full speed (bytes/ns) and its work left (ns)."""

    __slots__ = ("flow", "index", "rates", "work", "speed", "since", "version", "tail")

    def __init__(self, flow, index, rates, work, tail):
        self.flow, self.index, self.rates, self.work, self.tail = flow, index, rates, work, tail
        self.speed, self.since, self.version = 0.0, 0.0, 0


class _Flow:
    __slots__ = ("key", "orders", "phases", "ends")

    def __init__(self, key, orders, phases):
        self.key, self.orders, self.phases, self.ends = key, orders, phases, []


class FlowModel:
    """The flows of one run: joins in, members' completion times out."""

    def __init__(self, hardware: Hardware, task_names, head_ns: int):
        self.hardware, self.head, self.task_names = hardware, head_ns, task_names
        machine = [hardware.layout.machine_of(i) for i in range(len(task_names))]
        self._nic = {NETWORK: lambda o: ("nic", machine[o]), INTRA: lambda o: ("port", o)}
        self._link = {NETWORK: hardware.network, INTRA: hardware.intra_link}
        self._pending: dict[tuple, _PendingFlow] = {}  # by the call's key
        self._events: list = []  # (time, seq, kind, phase or flow, version)
        self._seq = 0
        self._fluid: list[_Phase] = []  # phases moving bytes now
        self._now = 0.0
        self.flows = 0

    # -- joins ------------------------------------------------------------------------------

    def join(self, joins) -> None:
        """Take this window's joins (every rank passes the same list in the same order); a
        call whose members have all joined starts at the last join."""
        for j in sorted(joins, key=lambda j: (j.time, j.order)):
            call = self._pending.get(j.key)
            if call is None:
                call = self._pending[j.key] = _PendingFlow(j)
            first = call.first
            if j.what != first.what:
                names = self.task_names
                raise InvalidArgumentError(
                    f"{names[first.order]} called {first.what} where {names[j.order]} called "
                    f"{j.what}: every member of a collective must pass values of the same size "
                    "and the same options")
            call.times[j.order] = j.time
            if j.phases is not None:
                call.phases = j.phases
            if len(call.times) == first.members and call.phases is not None:
                del self._pending[j.key]
                self.flows += 1
                flow = _Flow(j.key, sorted(call.times), call.phases)
                self._begin(flow, 0, float(max(call.times.values())))

    def _push(self, time, kind, item, version=0):
        self._seq += 1
        heappush(self._events, (time, self._seq, kind, item, version))

    def _begin(self, flow: _Flow, index: int, start: float):
        """Phase ``index`` of ``flow`` starts at ``start`` (after the last phase: done)."""
        flow.ends.append(start)
        if index == len(flow.phases):
            self._push(start, "done", flow)
            return
        plan = flow.phases[index]
        loads: dict = {}
        for traffic in plan.traffic:
            link = traffic.link
            port = self._nic[link](traffic.order)
            for direction, busy in enumerate(traffic.busy_ns(self._link[link])):
                if busy:
                    key = (port, direction, link)
                    loads[key] = loads.get(key, 0.0) + busy  # ns
        for key, busy in list(loads.items()):  # the first message's cost is inside the latency
            busy -= self._link[key[2]].message_ns
            if busy > 0:
                loads[key] = busy
            else:
                del loads[key]
        work = max(loads.values(), default=0.0)  # W: the busiest port's time
        rates = {port: busy / work for port, busy in loads.items()} if work else {}
        # rates: the share of each port's bandwidth the phase uses at full speed (<= 1)
        tail = max(0.0, plan.duration_ns - work - self.head)
        phase = _Phase(flow, index, rates, work, tail)
        self._push(start + self.head, "fluid", phase)

    # -- time -------------------------------------------------------------------------------

    def next_time(self):
        """When the next flow event happens (whole ns, rounded up), or INFINITY."""
        while self._events and self._events[0][2] == "drain" and \
                self._events[0][4] != self._events[0][3].version:
            heappop(self._events)  # a drain time that sharing has since moved
        return math.ceil(self._events[0][0]) if self._events else INFINITY

    def advance(self, limit: int) -> list[FlowEnd]:
        """Run the flows' events before ``limit``. Returns a FlowEnd for each member of each
        call that completed, in a fixed order."""
        done = []
        events = self._events
        while events and events[0][0] < limit:
            time, _, kind, item, version = heappop(events)
            if kind == "drain" and version != item.version:
                continue
            if kind == "fluid":
                self._share(time, add=item)
            elif kind == "drain":
                self._share(time, remove=item)
                self._push(time + item.tail, "end", item)
            elif kind == "end":
                self._begin(item.flow, item.index + 1, time)
            else:  # done
                flow = item
                ends = [math.ceil(t) for t in flow.ends]
                spans = tuple(PhaseSpan(phase.name, ends[i], ends[i + 1])
                              for i, phase in enumerate(flow.phases))
                done.extend(FlowEnd(ends[-1], order, flow.key, spans) for order in flow.orders)
        return done

    def _share(self, now: float, add: _Phase | None = None, remove: _Phase | None = None):
        """Bring every moving phase's work up to ``now``, then share the ports again."""
        for phase in self._fluid:
            phase.work -= phase.speed * (now - phase.since)
            phase.since = now
        if remove is not None:
            self._fluid.remove(remove)
        if add is not None:
            add.since = now
            if not add.work:  # nothing to move (one member): straight to its tail
                self._push(now + add.tail, "end", add)
                return
            self._fluid.append(add)
        for phase, speed in zip(self._fluid, max_min_speeds([p.rates for p in self._fluid])):
            phase.speed = speed
            phase.version += 1
            self._push(now + max(phase.work, 0.0) / speed, "drain", phase, phase.version)


def max_min_speeds(demands: list[dict]) -> list[float]:
    """Max-min fair speeds (each <= 1) of flows that, at speed 1, use the given share of each
    port: progressive filling, raising every unfrozen flow's speed together until a port is
    full (its flows freeze) or the speed reaches 1."""
    speeds = [0.0] * len(demands)
    free = {}
    for rates in demands:
        for port in rates:
            free[port] = 1.0
    active = set(range(len(demands)))
    level = 0.0
    while active:
        step = 1.0 - level
        loads: dict = {}
        for i in active:
            for port, rate in demands[i].items():
                loads[port] = loads.get(port, 0.0) + rate
        for port, load in loads.items():
            step = min(step, free[port] / load)
        level += step
        full = set()
        for port, load in loads.items():
            free[port] -= step * load
            if free[port] <= 1e-12:
                full.add(port)
        frozen = {i for i in active if level >= 1.0 or full & demands[i].keys()}
        for i in frozen:
            speeds[i] = level
        active -= frozen
    return speeds
