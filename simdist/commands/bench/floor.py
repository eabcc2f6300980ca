"""The message ring of ``simdist bench engine`` with simdist's message path written out inline.

How fast could simdist's ring go in Python while it models what it models? This is the same
workload on simdist's own kernel (``core.Environment``) with every call, check and record
that the model can spare left out, and what it cannot spare kept: a header and the window's
outbox, the window's sort, both ends' FIFO arithmetic with the link's cost per message, the
heap of messages in flight ordered by when each is due, a ``Message``, a delivery event in
the kernel's heap, and a receive event matched by source and tag. Left out: tracing, payload
descriptions, argument checks, routes (one task per machine here), MPI. Its end time is
simdist's to the nanosecond (``tests/cli/test_bench_engine.py``), so it models the same run.
"""

from __future__ import annotations

import time
from heapq import heappop, heappush

from simdist.sim.core import INFINITY, Environment, Event
from simdist.sim.payloads import Message
from simdist.sim.scheduler import default_hardware

NBYTES = 1024


class _Recv(Event):
    """A receive: the event a task waits on until a message of ``src`` with ``tag`` lands."""

    __slots__ = ("src", "tag")


def floor_ring(tasks: int, rounds: int, delay) -> tuple[int, float, int]:
    """The ring, ``delay(task, step)`` ns of compute a round: (events, seconds, end ns)."""
    link = default_hardware().network
    latency, cost = link.latency_ns, link.message_ns
    ser = cost - (-NBYTES * 1_000_000_000 // link.bandwidth)  # the port's time on a message
    env = Environment()
    outbox, heads, tx, rx, seqs = [], [], [0] * tasks, [0] * tasks, [0] * tasks
    waiting = [[] for _ in range(tasks)]
    inbox = [[] for _ in range(tasks)]

    def delivered(event):
        msg, dst = event._value, event._order
        for i, recv in enumerate(waiting[dst]):
            if recv.src == msg.src and recv.tag == msg.tag:
                del waiting[dst][i]
                recv._value, callbacks, recv.callbacks = msg, recv.callbacks, None
                for callback in callbacks:
                    callback(recv)
                return
        inbox[dst].append(msg)

    def receive(order, src, tag):
        recv = _Recv(env, None, order)
        recv.src, recv.tag = src, tag
        for i, msg in enumerate(inbox[order]):
            if msg.src == src and msg.tag == tag:
                del inbox[order][i]
                return recv.succeed(msg)
        waiting[order].append(recv)
        return recv

    def task(order):
        nxt, prev = (order + 1) % tasks, (order - 1) % tasks
        for step in range(rounds):
            yield env.timeout(delay(order, step))
            seqs[order] += 1
            outbox.append(((env.now, order, seqs[order], nxt, 0, NBYTES), None))
            yield receive(order, prev, 0)

    for order in range(tasks):
        env.process(task(order), order=order)
    start = time.perf_counter()
    while True:
        sent = outbox[:]
        outbox.clear()
        sent.sort()
        for header, payload in sent:  # egress: the sender's port, in (time, src, seq)
            sent_at, src, seq, dst = header[:4]
            begin = tx[src] if tx[src] > sent_at else sent_at
            tx[src] = begin + ser
            heappush(heads, (begin + latency, dst, src, seq, header, payload))
        first = env.peek()
        if heads and heads[0][0] < first:
            first = heads[0][0]
        if first == INFINITY:
            break
        limit = first + latency
        while heads and heads[0][0] < limit:  # ingress: the receiver's port, as first bits land
            due, dst, src, seq, header, payload = heappop(heads)
            head = due - cost
            begin = rx[dst] if rx[dst] > head else head
            arrival = rx[dst] = begin + ser
            delivery = Event(env, None, dst)
            delivery._value = Message(src, dst, header[4], payload, NBYTES, header[0], arrival,
                                      seq)
            delivery.callbacks.append(delivered)
            env.schedule_at(delivery, arrival, src, seq)
        env.run_until(limit)
    return env.events_scheduled, time.perf_counter() - start, env.now
