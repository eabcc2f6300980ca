"""Tree all-reduce: reduce up a binary tree, broadcast back down (MPI libraries, NCCL).

In TensorFlow, ``MirroredStrategy`` with ``NcclAllReduce`` and ``MultiWorkerMirroredStrategy``
with ``CommunicationImplementation.NCCL`` hand their all-reduces to NCCL, which runs either
its ring or these trees (``NCCL_ALGO=Tree``), picking by size and scale: trees for small and
medium values over many GPUs and machines.

Binary tree. The members form a heap-ordered binary tree over their group ranks: rank 0 is
the root and the children of rank i are 2i+1 and 2i+2. A member adds the partial sums of its
children to its own value and sends the result to its parent; the root then holds the total,
finalizes it (MEAN divides once, there) and sends it back down the same tree. Every level
costs one latency, so the whole call costs about 2 log2(p) latencies where the ring pays
2(p-1): trees win for small values and many members. Their weakness is bandwidth: a member
receives from two children and sends to two children, so each level costs a + 2 n/B on the
way up and again on the way down, 2 log2(p) (a + 2 n/B) in all, where the ring moves only
2 n/B in total. With ``pieces`` > 1 the value is cut into pieces and each piece goes up (then
down) as soon as it is ready, so all levels work at once (pipelining, as NCCL's tree does):
the time drops to about 4 n/B plus the latencies. Each member runs the reduction of all
pieces, then their broadcast (NCCL's ``runTreeUpDown``).

Double binary tree. NCCL 2.4's answer to the bandwidth problem (Sanders, Speck and Träff,
"Two-tree algorithms for full bandwidth broadcast, reduction and scan", Parallel Computing
2009; NVIDIA's blog "Massively Scale Your Deep Learning Training with NCCL 2.4", 2019): cut
the value in two halves and run two trees at once, half 0 on tree A and half 1 on tree B,
built so that the internal nodes of one tree are the leaves of the other. A leaf only sends
its half up and receives it back, so every member does the heavy (internal) work for one
half only. Construction used here: tree A is the heap of ``binary_tree_all_reduce``, whose
internal nodes are ranks 0 .. p//2 - 1; tree B is its mirror image, rank r taking the place
of rank p-1-r, so its internal nodes are the top p//2 ranks. For even p every rank is
internal in exactly one tree; for odd p the middle rank (p-1)/2 is a leaf of both (NCCL
builds in-order trees and shifts the second one for odd p; the mirror of a heap gives the
same split with the heap's simple arithmetic).

The steps of the double tree, on every member at once:

1. Reduce: both halves go up their trees concurrently. A leaf sends its pieces right away;
   an internal node forwards each piece once both children's pieces are in. The middle rank
   of an odd p, a leaf of both trees, alternates the pieces of its two halves.
2. Broadcast among the internal nodes: tree A's root sends the finished half 0 down to the
   internal nodes of tree A, tree B's root half 1 to the internal nodes of tree B. These
   two broadcasts use disjoint sets of NICs.
3. Swap with the mirror rank: rank r (internal in one tree) sends its finished half to rank
   p-1-r (internal in the other tree), which is a leaf of that tree, and gets the other half
   back. For odd p the middle rank gets its halves from its parents in the two trees.

Steps 2 and 3 are NCCL's broadcast down both trees, with the leaves of tree A served by
their mirror rank once it has its half instead of by their parents while the pieces stream
through. On simdist's FIFO NICs that matters: a leaf of tree A is an internal node of tree
B, and pieces of the two trees arriving at its NIC at the same time would queue behind one
another and slow down tree B's broadcast. Swapping after the broadcast keeps every NIC busy
with one stream at a time, so the time is a simple sum (``formulas.double_binary_tree``).
Each member then moves about half the data through each NIC per phase: the double tree
takes about 2 log2(p) (a + n/B) without pipelining (the single tree 2 log2(p) (a + 2 n/B)),
and about 3 n/B plus the latencies with pipelining (the single tree 4 n/B, the ring 2 n/B).

Results are bit-identical on every member: each half is finalized once, by its tree's root,
and every other member receives those very bytes.
"""

from __future__ import annotations

from simdist.collectives.group import Collective, begin
from simdist.collectives.ops import ReduceOp, copy, join, split


def _children(i: int, size: int) -> list[int]:
    """Heap positions of the children of position i in a heap of ``size`` positions."""
    return [c for c in (2 * i + 1, 2 * i + 2) if c < size]


def _parent(i: int):
    return None if i == 0 else (i - 1) // 2


def _depth(i: int) -> int:
    return (i + 1).bit_length() - 1


class _Span:
    """Consecutive spans on this member's collective lane: each starts where the last ended."""

    def __init__(self, c: Collective):
        self.c, self.t0 = c, c.ctx.now

    def __call__(self, label, **args):
        self.c.span(label, self.t0, **args)
        self.t0 = self.c.ctx.now


def _reduce_up(c: Collective, span: _Span, mine, op: ReduceOp, pos: int, node, chunk0: int,
               height: int):
    """Reduce the pieces ``mine`` up the heap tree (this member at heap position ``pos``;
    ``node(position)`` gives a position's group rank). Returns the reduced pieces: the
    finalized total at the root, partial sums elsewhere (already sent to the parent)."""
    kids = _children(pos, c.p)
    up = _parent(pos)
    out = []
    for j, own in enumerate(mine):
        acc = own
        for kid in kids:  # left child first: a fixed order, so every run adds alike
            got = yield from c.recv(node(kid), "reduce", expect=own, chunk=chunk0 + j)
            acc = op.combine(acc, got, out=None if acc is own else acc)
            span(f"reduce step {height - _depth(kid)}", step=height - _depth(kid),
                 chunk=chunk0 // len(mine), piece=j, peer=c.task_name(node(kid)),
                 phase="reduce")
        if up is None:
            acc = op.finalize(acc, c.p)
        else:
            c.send(node(up), "reduce", acc, chunk=chunk0 + j)
        out.append(acc)
    return out


def _broadcast_down(c: Collective, span: _Span, pieces, pos: int, size: int, node, chunk0: int,
                    height: int):
    """Broadcast the pieces from the root down the heap of ``size`` positions; ``pieces`` is
    the root's (the others' entries are replaced by what they receive)."""
    kids = _children(pos, size)
    up = _parent(pos)
    pieces = list(pieces)
    for j in range(len(pieces)):
        if up is not None:
            pieces[j] = yield from c.recv(node(up), "broadcast", chunk=chunk0 + j)
            span(f"broadcast step {height + _depth(up)}", step=height + _depth(up),
                 chunk=chunk0 // len(pieces), piece=j, peer=c.task_name(node(up)),
                 phase="broadcast")
        for kid in kids:
            c.send(node(kid), "broadcast", pieces[j], chunk=chunk0 + j)
    return pieces


def binary_tree_all_reduce(ctx, members, value, op=ReduceOp.SUM, pieces: int = 1,
                           device=None):
    """All-reduce ``value`` over ``members`` up and down a binary tree (``yield from``).

    ``pieces`` > 1 pipelines: the value is cut into that many pieces (sizes need not divide)
    and each one moves on as soon as it is ready.
    """
    c, op = begin(ctx, members, "binary-tree", value, op, device, pieces,
                  what="binary tree all-reduce")
    if c.p == 1:
        return op.finalize(copy(value), 1)
    span, height = _Span(c), _depth(c.p - 1)
    mine = split(value, pieces)

    def rank(position):  # the heap's positions are the group ranks
        return position

    total = yield from _reduce_up(c, span, mine, op, c.rank, rank, 0, height)
    result = yield from _broadcast_down(c, span, total, c.rank, c.p, rank, 0, height)
    return join(result, value)  # a fresh array: the pieces are buffers other members share


def double_binary_tree_all_reduce(ctx, members, value, op=ReduceOp.SUM, pieces: int = 1,
                                  device=None):
    """All-reduce ``value`` over ``members`` with NCCL's double binary tree (``yield from``).

    Half 0 of the value goes over tree A (the heap), half 1 over tree B (its mirror),
    concurrently; ``pieces`` > 1 cuts each half into that many pieces (pipelining).
    """
    c, op = begin(ctx, members, "double-binary-tree", value, op, device, pieces,
                  what="double binary tree all-reduce")
    p, r = c.p, c.rank
    if p == 1:
        return op.finalize(copy(value), 1)
    span, height = _Span(c), _depth(p - 1)
    halves = [split(half, pieces) for half in split(value, 2)]
    inner = p // 2  # internal nodes per tree: heap positions 0 .. inner-1
    last_step = height + _depth(inner - 1)  # after the reduce and the internal broadcast
    nodes = (lambda i: i, lambda i: p - 1 - i)  # heap position -> rank, in tree A and tree B
    pos = (r, p - 1 - r)  # this member's heap position in tree A and tree B
    leaf_of = [t for t in (0, 1) if pos[t] >= inner]
    result = [None, None]

    # 1. reduce: first the leaf sends (the middle rank of an odd p alternates its halves)
    for j in range(pieces):
        for t in leaf_of:
            c.send(nodes[t](_parent(pos[t])), "reduce", halves[t][j], chunk=t * pieces + j)
    if len(leaf_of) == 2:  # the middle rank: its halves come from its parents in both trees
        for t in (0, 1):
            src = nodes[t](_parent(pos[t]))
            result[t] = []
            for j in range(pieces):
                result[t].append((yield from c.recv(src, "leaf", chunk=t * pieces + j)))
                span("from parent", step=last_step, chunk=t, piece=j,
                     peer=c.task_name(src), phase="from parent")
        return join(result[0] + result[1], value)

    t = 0 if r < inner else 1  # the tree this member is an internal node of
    mine = yield from _reduce_up(c, span, halves[t], op, pos[t], nodes[t], t * pieces, height)
    # 2. broadcast the finished half to the internal nodes of this tree
    result[t] = yield from _broadcast_down(c, span, mine, pos[t], inner, nodes[t],
                                           t * pieces, height)
    # 3. the middle rank of an odd p is served by its parents; then swap with the mirror rank
    middle = (p - 1) // 2  # at heap position ``middle`` in both trees
    if p % 2 and pos[t] == _parent(middle):
        for j in range(pieces):
            c.send(middle, "leaf", result[t][j], chunk=t * pieces + j)
    mirror = p - 1 - r
    for j in range(pieces):
        c.send(mirror, "swap", result[t][j], chunk=t * pieces + j)
    other = []
    for j in range(pieces):
        other.append((yield from c.recv(mirror, "swap", chunk=(1 - t) * pieces + j)))
        span("swap", step=last_step, chunk=1 - t, piece=j, peer=c.task_name(mirror),
             phase="swap")
    result[1 - t] = other
    return join(result[0] + result[1], value)  # a fresh array, as in the single tree
