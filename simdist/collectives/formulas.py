"""Closed-form times of the collectives: the alpha-beta (latency-bandwidth) model.

A message of m bytes over a free link costs a + m/B (a: latency, B: bandwidth in bytes/s).
These are the formulas of Thakur, Rabenseifner and Gropp, "Optimization of Collective
Communication Operations in MPICH" (IJHPCA 2005), and of Patarasuk and Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations" (JPDC 2009) for the ring, written
for simdist's network: every member on its own machine, each NIC a FIFO per direction (so a
root receiving from p-1 members serializes them), no reduction cost. They are checked against
the simulator in tests/test_collectives.py (within 1%) and printed by
``simdist bench allreduce-formulas``. Times are in ns; ``n`` is the value's size in bytes.
"""

from __future__ import annotations

import math


def _ser(nbytes: float, bandwidth: int) -> float:
    """m / B in ns."""
    return nbytes * 1e9 / bandwidth


def _chunk(n: int, p: int) -> float:
    """The largest of p near-equal chunks of n bytes (chunks are cut by elements of
    ``itemsize`` bytes, so this is an upper bound within one element)."""
    return math.ceil(n / p)


def ring(p: int, n: int, a: int, B: int, pieces: int = 1) -> float:
    """Ring all-reduce: 2(p-1) steps of a + (n/p)/B; with k pieces, pipelined:
    (k-1)d + (2(p-1)-1) max(a+d, k d) + a + d where d = (n/p/k)/B."""
    if p == 1:
        return 0.0
    steps = 2 * (p - 1)
    d = _ser(_chunk(n, p) / pieces, B)
    return (pieces - 1) * d + (steps - 1) * max(a + d, pieces * d) + a + d


def reduce_to_one(p: int, n: int, a: int, B: int) -> float:
    """Reduce to one root then broadcast (TF's ReductionToOneDevice): the root's NIC receives
    p-1 values one after another, then sends p-1: 2a + 2(p-1) n/B."""
    if p == 1:
        return 0.0
    return 2 * a + 2 * (p - 1) * _ser(n, B)


def _fold(p: int, n: int, a: int, B: int) -> float:
    """Extra members pair up before and after: 2(a + n/B) when p is not a power of two."""
    return 0.0 if p & (p - 1) == 0 else 2 * (a + _ser(n, B))


#: formulas that are exact for p a power of two but only an upper bound otherwise: they assume
#: lock-step rounds, while in simdist (as in MPICH) members that did not fold start at once
UPPER_BOUND = {"recursive-doubling"}


def recursive_doubling(p: int, n: int, a: int, B: int) -> float:
    """log2(p') rounds of a + n/B (p' = largest power of two <= p), plus the fold.

    Exact for p a power of two; an upper bound otherwise (see ``UPPER_BOUND``)."""
    p2 = 1 << (p.bit_length() - 1)
    return math.log2(p2) * (a + _ser(n, B)) + _fold(p, n, a, B)


def halving_doubling(p: int, n: int, a: int, B: int) -> float:
    """Rabenseifner: 2 log2(p') a + 2 (p'-1)/p' n/B, plus the fold."""
    p2 = 1 << (p.bit_length() - 1)
    rounds = int(math.log2(p2))
    moved = sum(_chunk(n, 2 ** (k + 1)) for k in range(rounds))  # n/2 + n/4 + ... per phase
    return 2 * (rounds * a + _ser(moved, B)) + _fold(p, n, a, B)


def hierarchical(machines: int, per_machine: int, n: int, intra_a: int, intra_B: int,
                 net_a: int, net_B: int) -> float:
    """Reduce inside each machine to its first member, ring all-reduce between the machines'
    first members, broadcast inside each machine: 2 reduce_to_one-halves plus a ring."""
    local = 0.0 if per_machine == 1 else intra_a + (per_machine - 1) * _ser(n, intra_B)
    return 2 * local + ring(machines, n, net_a, net_B)


def parameter_server(p: int, n: int, a: int, B: int, num_ps: int = 1) -> float:
    """Push to the parameter servers, pull back. With one ps: like reduce_to_one. With a shard
    on every member (num_ps = p), each member sends and receives (p-1) shards of n/p each way:
    2a + 2(p-1)/p n/B, as fast as the ring with only two latencies."""
    if p == 1:
        return 0.0
    if num_ps == 1:
        return reduce_to_one(p, n, a, B)
    if num_ps == p:
        return 2 * a + 2 * (p - 1) * _ser(_chunk(n, p), B)
    raise ValueError(f"closed form given for num_ps = 1 or p, not {num_ps}")


def all_reduce_time(algorithm: str, p: int, n: int, a: int, B: int, **options) -> float:
    """The closed form of an all-reduce algorithm by name (homogeneous links)."""
    if algorithm not in FORMULAS:
        raise KeyError(f"no closed form for {algorithm!r}; known: {', '.join(FORMULAS)}")
    return FORMULAS[algorithm](p, n, a, B, **options)


def bus_bandwidth(algbw: float, p: int) -> float:
    """nccl-tests' bus bandwidth of an all-reduce: algbw x 2(p-1)/p (PERFORMANCE.md of
    NVIDIA/nccl-tests), comparable to the link's peak whatever p is."""
    return algbw * 2 * (p - 1) / p if p > 1 else algbw


FORMULAS = {
    "ring": ring,
    "reduce-to-one": reduce_to_one,
    "recursive-doubling": recursive_doubling,
    "halving-doubling": halving_doubling,
    "ps": parameter_server,
}
