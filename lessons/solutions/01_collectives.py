"""Lesson 01, Collectives from scratch: reference solutions (same names as exercises.py)."""

import math

import numpy as np

from simdist import Hardware, HardwareCatalog, Layout
from simdist.collectives import all_reduce_time

CANDIDATES = ("reduce-to-one", "ring", "recursive-doubling", "halving-doubling")


def ring_all_reduce(ctx, members, value):
    """Ring all-reduce: p - 1 reduce-scatter steps, then p - 1 all-gather steps."""
    p = len(members)
    r = members.index(ctx.name)
    right, left = members[(r + 1) % p], members[(r - 1) % p]
    chunks = [c.copy() for c in np.array_split(value.reshape(-1), p)]

    for s in range(p - 1):  # reduce-scatter: add the left neighbour's partial sums
        t0 = ctx.now
        ctx.send(right, f"rs{s}", chunks[(r - s) % p])
        msg = yield ctx.recv(left, f"rs{s}")
        i = (r - s - 1) % p
        chunks[i] = chunks[i] + msg.payload
        ctx.span("collective", f"ring step {s} (reduce-scatter)", "ring", t0, ctx.now - t0)
    # now chunk (r + 1) % p holds the sum over every member

    for s in range(p - 1):  # all-gather: pass the finished chunks around once more
        t0 = ctx.now
        ctx.send(right, f"ag{s}", chunks[(r - s + 1) % p])
        msg = yield ctx.recv(left, f"ag{s}")
        chunks[(r - s) % p] = msg.payload
        ctx.span("collective", f"ring step {p - 1 + s} (all-gather)", "ring", t0,
                 ctx.now - t0)

    return np.concatenate(chunks).reshape(value.shape)


def estimate(name, p, nbytes, hw):
    """The alpha-beta time of one algorithm on this hardware, in ns (with the link's cost per
    message o, which a root receiving p-1 messages pays p-1 times).

    Everyone on one machine: the closed form with the machine's own link. One task per
    machine: the closed form with the network. Several tasks per machine on several machines:
    the network is the bottleneck, and the tasks of a machine share its network card. A ring
    whose neighbours are numbered machine by machine sends one message per card per step, so
    its closed form still holds; the other algorithms send from every task of a machine across
    the network in the same round, so their bandwidth term is about tasks_per_machine times
    larger (a rough estimate, but enough to rank them).
    """
    k = hw.layout.tasks_per_machine
    machines = math.ceil(p / k)
    link = hw.intra_link if machines == 1 else hw.network
    a, B, o = link.latency_ns, link.bandwidth, link.message_ns
    if machines == 1 or k == 1 or name == "ring":
        return all_reduce_time(name, p, nbytes, a, B, o)
    latency_only = all_reduce_time(name, p, 0, a, B, o)
    bandwidth_part = all_reduce_time(name, p, nbytes, a, B, o) - latency_only
    return latency_only + k * bandwidth_part


def predict_fastest(p, nbytes, system="cpu", tasks_per_machine=1):
    """The candidate with the smallest alpha-beta estimate."""
    hw = Hardware.from_catalog(HardwareCatalog.default(), system, Layout(tasks_per_machine))
    return min(CANDIDATES, key=lambda name: estimate(name, p, nbytes, hw))
