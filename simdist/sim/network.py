"""The network between simulated tasks: links, NIC queues and message arrival times.

It models what a real cluster's interconnect does to TensorFlow's tensor transfers: a message
of n bytes over a link with latency a and bandwidth B takes a + n/B when the link is free.
Every endpoint (a machine's NIC, or a task's port on the machine's internal link) has one
FIFO per direction, so many workers pushing gradients to one parameter server queue up at
its NIC. Egress: the sender's NIC serializes messages in send order. Ingress: the receiver's
NIC serializes them in the order their first bit arrives.

The network is a deterministic state machine that every MPI rank runs identically on the
same inputs (all messages of a window, in a fixed order), so arrival times never depend on
how tasks are spread over ranks.
"""

from __future__ import annotations

from functools import partial
from heapq import heappop, heappush
from typing import Any, NamedTuple

from simdist.sim.core import INFINITY
from simdist.hardware.devices import LINK_KINDS, Hardware
from simdist.sim.flows import FlowModel
from simdist.sim.resources import Ports
from simdist.trace.schema import Tracer

NETWORK_STREAM = "network"


def nic_name(machine: int) -> str:
    """The trace process that shows one machine's NIC queues."""
    return f"machine:{machine} NIC"


class MessageHeader(NamedTuple):
    """What every rank learns of a message sent in a window (its payload travels apart)."""

    sent_at: int
    src: int  # task order of the sender
    seq: int  # the sender's message number
    dst: int  # task order of the receiver
    tag: Any
    nbytes: int
    desc: tuple  # the payload's description (payloads.describe_payload), with array specs
    src_device: int | None
    dst_device: int | None


#: ``new_header((sent_at, src, ...))``: a MessageHeader without NamedTuple's Python-level
#: ``__new__`` (a send is a hot path)
new_header = partial(tuple.__new__, MessageHeader)


class _Apart:
    def __repr__(self):
        return "APART"


#: a message's payload that travels by itself (from another rank: ``_move_payloads``)
APART = _Apart()


#: the id space of the TF1 executor's Send/Recv pairs between the devices of a task
EXECUTOR_FLOW_SPACE = 1 << 28


def flow_id(space: int, n: int) -> int:
    """The id of trace flow ``n`` (an arrow from a send to its receive, n < 2**32) of id
    ``space`` (bits 32 and up), so that no two arrows of a run share an id: the network
    numbers its messages' arrows 1, 2, ... (space 0); the transfers between the devices of
    task o use space o + 1 (``TaskContext.transfer``), and the TF1 executor's Send/Recv pairs
    inside a task ``EXECUTOR_FLOW_SPACE``."""
    return (space << 32) | n


class Network:
    """NIC FIFOs and link costs for the tasks of one cluster (a replicated state machine)."""

    def __init__(self, hardware: Hardware, task_names: list[str], tracer: Tracer):
        self.hardware = hardware
        self.task_names = task_names
        self.tracer = tracer
        self._ports = Ports()
        # a heap of (when it is due: its first bit's arrival + the link's cost per message,
        # dst order, src order, seq, message header, egress start, serialization ns, payload)
        self._heads: list = []
        self._flow_ids = 0
        # as many records as all the tasks together (it records all their messages)
        self._out = tracer.stream(NETWORK_STREAM, len(task_names)) if tracer.enabled else None
        self._lanes = {kind: (f"{kind} tx", f"{kind} rx") for kind in LINK_KINDS}
        self._machine = [hardware.layout.machine_of(i) for i in range(len(task_names))]
        self._nic = [("nic", m) for m in self._machine]  # a task's own port is its order
        self._nic_names = [nic_name(m) for m in self._machine]  # its NIC's trace process
        self.bytes_sent = 0
        self.messages = 0
        #: the flow-level collectives (``fidelity="flow"``), beside the messages
        self.flows = FlowModel(hardware, task_names, self.min_latency())

    def min_latency(self) -> int:
        """The window width for conservative synchronization: no message is due sooner.

        A message is due ``latency_ns`` after its start on the sender's port (its first bit
        arrives ``message_ns`` before, and the receiving port then spends at least
        ``message_ns`` on it). The receiving ports take messages in the order they are due,
        which on one port is the order their first bits arrive (one link, one
        ``message_ns``), so a window ingests every message due before its end, all of them
        known by then, whatever the links' costs per message."""
        return self.hardware.min_latency_ns(len(self.task_names))

    def egress(self, sent, local=None) -> tuple[list, float]:
        """Serialize newly sent messages on their senders' endpoints, in (time, source, seq),
        and keep them for ``ingress``. ``sent`` holds (header, arrays, payload) as
        ``TaskContext.send`` queues them (the payload ``APART`` for another rank's message:
        its payload comes by itself). With ``local`` (by task order: whether the task is on
        this rank), a rank that keeps its own machines' ports (``Simulation.apart``: a
        machine's senders are all on its rank) keeps only the messages to its tasks and
        returns the others as (header fields, egress start, serialization ns, due) for
        their receiver's rank (``accept``), with the earliest due among them."""
        ports, heads, out = self._ports, self._heads, self._out
        machine, nic = self._machine, self._nic
        network, intra = self.hardware.network, self.hardware.intra_link
        outgoing, first = [], INFINITY
        sent.sort()  # by header: (sent_at, src, seq), unique, so no later field is compared
        for header, _, payload in sent:
            sent_at, src, seq, dst, _, nbytes = header[:6]  # (a hot path: fields by index)
            if machine[src] != machine[dst]:
                link, endpoint = network, nic[src]
                start, ser, head = ports.send(endpoint, link, sent_at, nbytes)
                if ser and out is not None:
                    out.span(self._nic_names[src], "egress",
                             f"{self.task_names[src]} → {self.task_names[dst]}", "network",
                             start, ser, {"bytes": nbytes, "tag": str(header.tag)})
            else:
                link = intra
                start, ser, head = ports.send(src, link, sent_at, nbytes)
            due = head + link.message_ns
            if local is None or local[dst]:
                heappush(heads, (due, dst, src, seq, header, start, ser, payload))
            else:
                outgoing.append((tuple(header), start, ser, due))
                if due < first:
                    first = due
        return outgoing, first

    def accept(self, header, start: int, ser: int, due: int) -> None:
        """A message to one of this rank's tasks that its sender's rank serialized
        (``egress`` with ``local``), for ``ingress``; its payload comes apart."""
        heappush(self._heads,
                 (due, header.dst, header.src, header.seq, header, start, ser, APART))

    def next_time(self):
        """When the next message is due at its receiver, or the next flow event happens, or
        INFINITY."""
        head = self._heads[0][0] if self._heads else INFINITY
        return min(head, self.flows.next_time())

    def ingress(self, limit: int):
        """Deliver every message due before ``limit``.

        Returns (arrival time, header, payload) in a fixed order (the payload ``APART``
        when it travelled by itself); the receiver's endpoint serializes messages in the
        order their first bit arrived.
        """
        ports, heads, machine, nic = self._ports, self._heads, self._machine, self._nic
        network, intra = self.hardware.network, self.hardware.intra_link
        out, nbytes = [], 0
        while heads and heads[0][0] < limit:
            due, dst, src, seq, header, tx_start, ser, payload = heappop(heads)
            if machine[src] != machine[dst]:
                link, crosses, endpoint = network, True, nic[dst]
            else:
                link, crosses, endpoint = intra, False, dst
            head = due - link.message_ns
            start, arrival = ports.receive(endpoint, head, ser)
            if self._out is not None:
                self._record(header, link, crosses, tx_start, start, head, arrival)
            nbytes += header[5]  # its nbytes
            out.append((arrival, header, payload))
        self.messages += len(out)
        self.bytes_sent += nbytes
        return out

    def _record(self, header, link, crosses, tx_start, rx_start, head, arrival):
        """Trace one message: NIC spans, the sender's and receiver's transfer spans, a flow."""
        out = self._out
        sent_at, nbytes = header.sent_at, header.nbytes
        src_name, dst_name = self.task_names[header.src], self.task_names[header.dst]
        ser = arrival - rx_start
        tag = str(header.tag)
        if crosses and ser:
            out.span(self._nic_names[header.dst], "ingress", f"{src_name} → {dst_name}",
                     "network", rx_start, ser,
                     {"bytes": nbytes, "tag": tag, "queued_ns": rx_start - head})
        args = {"bytes": nbytes, "tag": tag, "link": link.name,
                "queued_ns": rx_start - head + tx_start - sent_at}
        tx_lane, rx_lane = self._lanes[link.kind]
        out.span(src_name, tx_lane, f"send {tag} → {dst_name}", "send", tx_start, ser, args)
        out.span(dst_name, rx_lane, f"recv {tag} ← {src_name}", "recv", rx_start, ser, args)
        self._flow_ids += 1
        out.flow(self._flow_ids, tag, "message", src_name, tx_lane, tx_start, dst_name, rx_lane,
                 arrival, {"bytes": nbytes, "sent_at_ns": sent_at, "link": link.name})
