"""Closed-form times of the collectives: the alpha-beta (latency-bandwidth) model.

A message of m bytes over a free link costs a + m/B (a: latency, B: bandwidth in bytes/s), and
holds the port at each end for o + m/B of it (o: the link's cost per message,
``LinkProfile.message_ns``; a port starts at most one message per o, so a root receiving p-1
small values pays (p-1) o, which a's alone would hide).
These are the formulas of Thakur, Rabenseifner and Gropp, "Optimization of Collective
Communication Operations in MPICH" (IJHPCA 2005), and of Patarasuk and Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations" (JPDC 2009) for the ring, written
for simdist's network: every member on its own machine, each NIC a FIFO per direction (so a
root receiving from p-1 members serializes them), no reduction cost. They are checked against
the simulator in tests/collectives/test_collectives.py (within 1%) and printed by
``simdist bench allreduce-formulas``; each algorithm's record (``registry.py``) names its
formula. Times are in ns; ``n`` is the value's size in bytes. Every formula takes o (default 0,
the pure alpha-beta model); where each port carries one message at a time (a ring without
pieces, recursive doubling, halving-doubling) it changes nothing.
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


def ring(p: int, n: int, a: int, B: int, pieces: int = 1, o: int = 0) -> float:
    """Ring all-reduce: 2(p-1) steps of a + (n/p)/B; with k pieces, pipelined:
    (k-1)s + (2(p-1)-1) max(a+d, k s) + a + d where d = (n/p/k)/B and s = o + d (a
    piece's time on a port)."""
    if p == 1:
        return 0.0
    steps = 2 * (p - 1)
    d = _ser(_chunk(n, p) / pieces, B)
    s = o + d
    return (pieces - 1) * s + (steps - 1) * max(a + d, pieces * s) + a + d


def reduce_to_one(p: int, n: int, a: int, B: int, o: int = 0) -> float:
    """Reduce to one root then broadcast (TF's ReductionToOneDevice): the root's NIC receives
    p-1 values one after another, then sends p-1: 2(a-o) + 2(p-1)(o + n/B)."""
    if p == 1:
        return 0.0
    return 2 * (a - o) + 2 * (p - 1) * (o + _ser(n, B))


def _fold(p: int, n: int, a: int, B: int) -> float:
    """Extra members pair up before and after: 2(a + n/B) when p is not a power of two."""
    return 0.0 if p & (p - 1) == 0 else 2 * (a + _ser(n, B))


def recursive_doubling(p: int, n: int, a: int, B: int, o: int = 0) -> float:
    """log2(p') rounds of a + n/B (p' = largest power of two <= p), plus the fold.

    Exact for p a power of two; an upper bound otherwise: it assumes lock-step rounds, while
    in simdist (as in MPICH) members that did not fold start at once. One message per port
    and round: o is hidden in a."""
    p2 = 1 << (p.bit_length() - 1)
    return math.log2(p2) * (a + _ser(n, B)) + _fold(p, n, a, B)


def halving_doubling(p: int, n: int, a: int, B: int, o: int = 0) -> float:
    """Rabenseifner: 2 log2(p') a + 2 (p'-1)/p' n/B, plus the fold (one message per port and
    round: o is hidden in a)."""
    p2 = 1 << (p.bit_length() - 1)
    rounds = int(math.log2(p2))
    moved = sum(_chunk(n, 2 ** (k + 1)) for k in range(rounds))  # n/2 + n/4 + ... per phase
    return 2 * (rounds * a + _ser(moved, B)) + _fold(p, n, a, B)


def hierarchical(machines: int, per_machine: int, n: int, intra_a: int, intra_B: int,
                 net_a: int, net_B: int, pieces: int = 1, intra_o: int = 0,
                 net_o: int = 0) -> float:
    """Reduce inside each machine to its first member, ring all-reduce between the machines'
    first members, broadcast inside each machine: 2 reduce_to_one-halves plus a ring (with
    ``pieces``: exact when every machine holds ``per_machine`` members)."""
    local = 0.0 if per_machine == 1 else reduce_to_one(per_machine, n, intra_a, intra_B,
                                                       intra_o) / 2
    return 2 * local + ring(machines, n, net_a, net_B, pieces, net_o)


def parameter_server(p: int, n: int, a: int, B: int, num_ps: int = 1,
                     placement: str = "spread", o: int = 0) -> float:
    """Push to the parameter servers, pull back: 2(a-o) + 2(p-1) (o + (n/num_ps)/B). Each
    server's NIC receives p-1 shards of n/num_ps, then sends the sum back p-1 times. With one
    ps it is reduce_to_one; with a shard on every member (num_ps = p) each member sends and
    receives 2(p-1)/p n/B, as fast as the ring with only two latencies (and 2(p-1) messages'
    o, where the ring's pay none beyond a). One member per machine, as
    the closed forms assume: the servers' ``placement`` makes no difference."""
    if p == 1:
        return 0.0
    return 2 * (a - o) + 2 * (p - 1) * (o + _ser(_chunk(n, num_ps), B))


def bus_bandwidth(algbw: float, p: int) -> float:
    """nccl-tests' bus bandwidth of an all-reduce: algbw x 2(p-1)/p (PERFORMANCE.md of
    NVIDIA/nccl-tests), comparable to the link's peak whatever p is."""
    return algbw * 2 * (p - 1) / p if p > 1 else algbw


def binary_tree(p: int, n: int, a: int, B: int, pieces: int = 1, o: int = 0) -> float:
    """Binary tree all-reduce (``tree.binary_tree_all_reduce``): reduce up the heap-ordered
    tree (children of rank i: 2i+1, 2i+2), then broadcast down, every member reducing all
    ``pieces`` before it broadcasts them (NCCL's ``runTreeUpDown``). For a complete tree of
    height h (p = 2^(h+1) - 1) and k pieces of d = n/(kB) each:

        T = 2h (a + 2d) + 4(k-1) d          (k = 1: 2h (a + 2n/B))

    Up, each level adds a + 2d (the second child's piece queues behind the first one at the
    parent's NIC) and the root gets a piece every 2d; down, the right-most path is the
    slowest, again a + 2d per level and a piece every 2d. This is the pipelined binary tree
    that Sanders, Speck and Träff, "Two-tree algorithms for full bandwidth broadcast,
    reduction and scan" (Parallel Computing 2009), start from (its leaves idle, it uses half
    the bandwidth), costed for simdist's network: a latency once per hop, FIFO NICs, as in
    Thakur, Rabenseifner and Gropp (2005) for one message. A heap of any other p has subtrees
    of different heights, whose pieces interleave at their parent's NIC, so the function
    evaluates the same FIFO model as a recursion over the tree, piece by piece: a node's NIC
    sends piece j once the node has reduced it and the NIC has sent piece j-1; a parent's
    NIC receives its children's pieces in the order their first bits arrive (ties: lower
    rank first), each taking m/B; down, each node sends every piece to its children in
    turn. Pieces are sized as simdist cuts a Phantom(n) and wire times rounded up to whole
    ns as in the simulator, so it is exact for phantoms (within an element for arrays). With
    a cost per message o, a piece holds each port for o + d and its first bit arrives a - o
    after it starts.
    """
    if p == 1:
        return 0.0
    k = pieces
    d = [-(-(n // k + (j < n % k)) * 10**9 // B) for j in range(k)]  # ns on the wire
    port = [x + o for x in d]  # ns on a port

    def kids(i):
        return [c for c in (2 * i + 1, 2 * i + 2) if c < p]

    def reduced(i):  # when heap position i has reduced each piece (a leaf: at once)
        heads = []
        for c in kids(i):
            free = 0
            for j, ready in enumerate(reduced(c)):
                free = max(ready, free)  # the child's NIC sends its pieces in order
                heads.append((free + a - o, c, j))
                free += port[j]
        arrived, free = {}, 0
        for head, c, j in sorted(heads):  # the parent's NIC: first come, first served
            free = arrived[c, j] = max(head, free) + port[j]
        return [max([arrived[c, j] for c in kids(i)], default=0) for j in range(k)]

    def finished(i, got):  # the latest end in the subtree of i, which has piece j at got[j]
        sent, free = {c: [] for c in kids(i)}, 0
        for j in range(k):
            for c in kids(i):  # piece j to each child in turn
                free = max(got[j], free)
                sent[c].append(free + a + d[j])
                free += port[j]
        return max([got[-1]] + [finished(c, sent[c]) for c in kids(i)])

    return float(finished(0, [reduced(0)[-1]] * k))


def double_binary_tree(p: int, n: int, a: int, B: int, pieces: int = 1,
                       o: int = 0) -> float:
    """Double binary tree all-reduce (``tree.double_binary_tree_all_reduce``, NCCL 2.4):
    half 0 reduced up tree A (the heap) and half 1 up tree B (its mirror: rank r in the
    place of p-1-r) at once; each root broadcasts its half to its tree's internal nodes;
    then every rank swaps halves with rank p-1-r, internal in the other tree (Sanders,
    Speck and Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and
    scan", Parallel Computing 2009; NVIDIA's NCCL 2.4 blog post, 2019). Every level moves
    a half, not the whole value, through a NIC twice. For a complete tree of height h >= 2
    (p = 2^(h+1) - 1) without pipelining, with d = n/(2B):

        T = h (a + 2d)  +  (h-1)(a + 2d)  +  (a + d)  =  2h a + (2h - 1/2) n/B

    (reduce, broadcast to the h-1 levels of internal nodes, swap; the single binary tree
    takes 2h a + 4h n/B). With many pieces it tends to about 3 n/B plus 2h latencies (one
    more n/(2B) for odd p, whose middle rank, a leaf of both trees, receives both halves
    at the end); the single tree 4 n/B, the ring 2 n/B. Going up, an internal node of one
    tree is a leaf of the other, and its NIC first sends its own pieces up that tree, which
    delays its forwarding by up to n/(2B). The two broadcasts use disjoint NICs and a swap
    only reaches a rank once its own broadcast is through, so the phases add up. For any
    p and pieces the function evaluates this exactly as a recursion over each tree that
    mirrors the FIFO NICs (see ``binary_tree``): pieces sized as simdist cuts a
    Phantom(n), wire times in whole ns; the middle rank of an odd p alternates its two
    halves' pieces going up and gets the results from its two parents, which serve it
    before their swap. With a cost per message o, each piece holds a port o longer and its
    first bit arrives a - o after it starts (as in ``binary_tree``).
    """
    if p == 1:
        return 0.0
    k, inner = pieces, p // 2  # heap positions 0 .. inner-1 are a tree's internal nodes
    middle = (p - 1) // 2 if p % 2 else None  # a leaf of both trees
    d = [[-(-(h // k + (j < h % k)) * 10**9 // B) for j in range(k)]
         for h in (n - n // 2, n // 2)]  # ns on the wire
    q = [[x + o for x in half] for half in d]  # ns on a port

    def fifo(heads, size):  # messages (first bit's arrival, sender, piece) through one NIC
        arrived, free = {}, 0
        for head, src, j in sorted(heads):
            free = arrived[src, j] = max(head, free) + size[j]
        return arrived

    finish, to_middle = [], []
    for t in (0, 1):
        dt, qt, own = d[t], q[t], sum(q[1 - t])  # own: an internal node first sends its
        # leaf pieces
        rank = (lambda i: i) if t == 0 else (lambda i: p - 1 - i)

        def sends(c, qt=qt, own=own):  # when heap position c sends each piece up tree t
            if c == middle:
                return [sum(q[0][:j]) + sum(q[1][:j]) + (q[0][j] if t else 0)
                        for j in range(k)]
            out, free = [], (0 if c >= inner else own)
            for j, ready in enumerate([0] * k if c >= inner else reduced(c)):
                free = max(ready, free)
                out.append(free)
                free += qt[j]
            return out

        def reduced(i, qt=qt, rank=rank):  # when internal position i has reduced each piece
            kids = [c for c in (2 * i + 1, 2 * i + 2) if c < p]
            arrived = fifo([(x + a - o, rank(c), j) for c in kids
                            for j, x in enumerate(sends(c))], qt)
            return [max(arrived[rank(c), j] for c in kids) for j in range(k)]

        got = {0: [reduced(0)[-1]] * k}  # the broadcast among the internal nodes
        for i in range(inner):
            free = own if i == 0 else 0
            for j in range(k):
                for c in (2 * i + 1, 2 * i + 2):
                    if c < inner:
                        free = max(got[i][j], free)
                        got.setdefault(c, []).append(free + a + dt[j])
                        free += qt[j]
            start = max(got[i][-1], free)  # then the middle rank's half, then the swap
            if middle is not None and i == (middle - 1) // 2:
                for j in range(k):
                    to_middle.append((start + a - o, rank(i), t * k + j))
                    start += qt[j]
            finish += [got[i][-1], start + sum(qt) - o + a]  # rank(i) and its mirror
    if middle is not None:
        finish.append(max(fifo(to_middle, q[0] + q[1]).values()))
    return float(max(finish))
