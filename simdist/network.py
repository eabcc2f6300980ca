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

from heapq import heappop, heappush

from .core import INFINITY
from .devices import Hardware
from .trace import Tracer

NETWORK_STREAM = "network"


def nic_name(machine: int) -> str:
    """The trace process that shows one machine's NIC queues."""
    return f"machine:{machine} NIC"


class Network:
    """NIC FIFOs and link costs for the tasks of one cluster (a replicated state machine)."""

    def __init__(self, hardware: Hardware, task_names: list[str], tracer: Tracer):
        self.hardware = hardware
        self.task_names = task_names
        self.tracer = tracer
        self._egress_free: dict = {}
        self._ingress_free: dict = {}
        self._heads: list = []  # (head time, dst order, src order, seq, message header)
        self._flow_ids = 0
        self.bytes_sent = 0
        self.messages = 0

    def min_latency(self) -> int:
        """The window width for conservative synchronization: no message is faster."""
        return self.hardware.min_latency_ns(len(self.task_names))

    def _endpoint(self, order: int, crosses_network: bool):
        layout = self.hardware.layout
        return ("nic", layout.machine_of(order)) if crosses_network else ("port", order)

    def egress(self, headers) -> None:
        """Serialize newly sent messages on their senders' endpoints, in (time, source, seq).

        A header is (sent_at, src_order, seq, dst_order, tag, nbytes, payload description).
        """
        layout = self.hardware.layout
        for header in sorted(headers, key=lambda h: (h[0], h[1], h[2])):
            sent_at, src, seq, dst, _tag, nbytes, _desc = header
            crosses = not layout.same_machine(src, dst)
            link = self.hardware.network if crosses else self.hardware.intra_link
            endpoint = self._endpoint(src, crosses)
            start = max(sent_at, self._egress_free.get(endpoint, 0))
            ser = link.serialization_ns(nbytes)
            self._egress_free[endpoint] = start + ser
            if crosses and ser:
                self.tracer.span(NETWORK_STREAM, nic_name(endpoint[1]), "egress",
                                 f"{self.task_names[src]} → {self.task_names[dst]}", "network",
                                 start, ser, {"bytes": nbytes, "tag": str(_tag)})
            heappush(self._heads, (start + link.latency_ns, dst, src, seq, header, start))

    def next_time(self):
        """When the next message's first bit reaches its receiver, or INFINITY."""
        return self._heads[0][0] if self._heads else INFINITY

    def ingress(self, limit: int):
        """Deliver every message whose first bit arrives before ``limit``.

        Returns (arrival time, header) pairs in a fixed order; the receiver's endpoint
        serializes messages in the order their first bit arrived.
        """
        layout, heads = self.hardware.layout, self._heads
        out = []
        while heads and heads[0][0] < limit:
            head, dst, src, seq, header, tx_start = heappop(heads)
            nbytes, tag = header[5], header[4]
            crosses = not layout.same_machine(src, dst)
            link = self.hardware.network if crosses else self.hardware.intra_link
            endpoint = self._endpoint(dst, crosses)
            start = max(head, self._ingress_free.get(endpoint, 0))
            ser = link.serialization_ns(nbytes)
            arrival = start + ser
            self._ingress_free[endpoint] = arrival
            self._record(header, link, crosses, endpoint, tx_start, start, head, arrival)
            self.bytes_sent += nbytes
            self.messages += 1
            out.append((arrival, header))
        return out

    def _record(self, header, link, crosses, endpoint, tx_start, rx_start, head, arrival):
        tracer = self.tracer
        if not tracer.enabled:
            return
        sent_at, src, seq, dst, tag, nbytes, _ = header
        src_name, dst_name = self.task_names[src], self.task_names[dst]
        ser = arrival - rx_start
        queued = rx_start - head
        args = {"bytes": nbytes, "tag": str(tag), "link": link.name,
                "queued_ns": queued + (tx_start - sent_at)}
        label = f"{src_name} → {dst_name}"
        if crosses and ser:
            tracer.span(NETWORK_STREAM, nic_name(endpoint[1]), "ingress", label, "network",
                        rx_start, ser, {"bytes": nbytes, "tag": str(tag), "queued_ns": queued})
        tx_lane, rx_lane = f"{link.kind} tx", f"{link.kind} rx"
        tracer.span(NETWORK_STREAM, src_name, tx_lane, f"send {tag} → {dst_name}", "send",
                    tx_start, link.serialization_ns(nbytes), args)
        tracer.span(NETWORK_STREAM, dst_name, rx_lane, f"recv {tag} ← {src_name}", "recv",
                    rx_start, ser, args)
        fid = self._flow_ids = self._flow_ids + 1
        tracer.flow(NETWORK_STREAM, fid, str(tag), "message", src_name, tx_lane, tx_start,
                    dst_name, rx_lane, arrival, {"bytes": nbytes, "sent_at_ns": sent_at})
