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
from .devices import LINK_KINDS, Hardware
from .trace import Tracer

NETWORK_STREAM = "network"


def nic_name(machine: int) -> str:
    """The trace process that shows one machine's NIC queues."""
    return f"machine:{machine} NIC"


def _send_order(header):
    return header[0], header[1], header[2]


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
        self._out = tracer.stream(NETWORK_STREAM) if tracer.enabled else []
        self._lanes = {kind: (f"{kind} tx", f"{kind} rx") for kind in LINK_KINDS}
        self._machine = [hardware.layout.machine_of(i) for i in range(len(task_names))]
        self._nic = [("nic", m) for m in self._machine]  # a task's own port is its order
        self.bytes_sent = 0
        self.messages = 0

    def min_latency(self) -> int:
        """The window width for conservative synchronization: no message is faster."""
        return self.hardware.min_latency_ns(len(self.task_names))

    def _route(self, src: int, dst: int):
        """(link, crosses the network?, sender endpoint, receiver endpoint) of a message."""
        machine = self._machine
        if machine[src] != machine[dst]:
            return self.hardware.network, True, self._nic[src], self._nic[dst]
        return self.hardware.intra_link, False, src, dst

    def egress(self, headers) -> None:
        """Serialize newly sent messages on their senders' endpoints, in (time, source, seq).

        A header is (sent_at, src_order, seq, dst_order, tag, nbytes, payload description,
        src_device, dst_device).
        """
        free, heads = self._egress_free, self._heads
        for header in sorted(headers, key=_send_order):
            sent_at, src, seq, dst, tag, nbytes = header[:6]
            link, crosses, endpoint, _ = self._route(src, dst)
            start = max(sent_at, free.get(endpoint, 0))
            ser = -(-nbytes * 1_000_000_000 // link.bandwidth)  # ceil, exact integers
            free[endpoint] = start + ser
            if crosses and ser and self.tracer.enabled:
                self._out.append(("X", start, nic_name(endpoint[1]), "egress",
                                  f"{self.task_names[src]} → {self.task_names[dst]}", "network",
                                  ser, {"bytes": nbytes, "tag": str(tag)}))
            heappush(heads, (start + link.latency_ns, dst, src, seq, header, start, ser))

    def next_time(self):
        """When the next message's first bit reaches its receiver, or INFINITY."""
        return self._heads[0][0] if self._heads else INFINITY

    def ingress(self, limit: int):
        """Deliver every message whose first bit arrives before ``limit``.

        Returns (arrival time, header) pairs in a fixed order; the receiver's endpoint
        serializes messages in the order their first bit arrived.
        """
        free, heads = self._ingress_free, self._heads
        out = []
        while heads and heads[0][0] < limit:
            head, dst, src, seq, header, tx_start, ser = heappop(heads)
            link, crosses, _, endpoint = self._route(src, dst)
            start = max(head, free.get(endpoint, 0))
            arrival = free[endpoint] = start + ser
            if self.tracer.enabled:
                self._record(header, link, crosses, endpoint, tx_start, start, head, arrival)
            self.bytes_sent += header[5]
            out.append((arrival, header))
        self.messages += len(out)
        return out

    def _record(self, header, link, crosses, endpoint, tx_start, rx_start, head, arrival):
        """Trace one message: NIC spans, the sender's and receiver's transfer spans, a flow."""
        out = self._out
        sent_at, src, seq, dst, tag, nbytes = header[:6]
        src_name, dst_name = self.task_names[src], self.task_names[dst]
        ser = arrival - rx_start
        tag = str(tag)
        if crosses and ser:
            out.append(("X", rx_start, nic_name(endpoint[1]), "ingress",
                        f"{src_name} → {dst_name}", "network", ser,
                        {"bytes": nbytes, "tag": tag, "queued_ns": rx_start - head}))
        args = {"bytes": nbytes, "tag": tag, "link": link.name,
                "queued_ns": rx_start - head + tx_start - sent_at}
        tx_lane, rx_lane = self._lanes[link.kind]
        out.append(("X", tx_start, src_name, tx_lane, f"send {tag} → {dst_name}", "send", ser,
                    args))
        out.append(("X", rx_start, dst_name, rx_lane, f"recv {tag} ← {src_name}", "recv", ser,
                    args))
        self._flow_ids += 1
        out.append(("F", tx_start, self._flow_ids, tag, "message", src_name, tx_lane, dst_name,
                    rx_lane, arrival, {"bytes": nbytes, "sent_at_ns": sent_at,
                                       "link": link.name}))
