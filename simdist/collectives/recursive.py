"""Recursive doubling and recursive halving-doubling (Rabenseifner), as MPI libraries use them.

Recursive doubling: in log2(p) rounds, member r swaps its whole partial result with member
r XOR 1, 2, 4, ...: few rounds (good for small messages) but every round moves the whole value.
Halving-doubling: a reduce-scatter by recursive halving (each round swaps half of what is left)
then an all-gather by recursive doubling: log2(p) rounds each way and only 2(p-1)/p of the data,
like the ring but with far fewer latencies. When p is not a power of two, the first 2r members
(r = p - 2^k) pair up first: the even one hands its value to the odd one and waits for the
result at the end (Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
Operations in MPICH", IJHPCA 2005).
"""

from __future__ import annotations

from simdist.collectives.group import Collective, begin
from simdist.collectives.ops import ReduceOp, copy, join, join_flat, resplit, split


def _fold_in(c: Collective, value, op: ReduceOp):
    """Pair up the extra members. Returns (rank among the 2^k, or None if folded, value)."""
    p2 = 1 << (c.p.bit_length() - 1)
    extra = c.p - p2
    r = c.rank
    if r < 2 * extra:
        if r % 2 == 0:
            c.send(r + 1, "fold", value)
            return None, value, p2
        t0 = c.ctx.now
        got = yield from c.recv(r - 1, "fold", expect=value)
        c.span("fold in", t0, step="fold", chunk=0, peer=c.task_name(r - 1))
        return r // 2, op.combine(got, value), p2
    return r - extra, value, p2


def _real_rank(c: Collective, new_rank: int) -> int:
    extra = c.p - (1 << (c.p.bit_length() - 1))
    return new_rank * 2 + 1 if new_rank < extra else new_rank + extra


def _fold_out(c: Collective, new_rank, result):
    """Give the folded members their result."""
    r = c.rank
    extra = c.p - (1 << (c.p.bit_length() - 1))
    if r >= 2 * extra:
        return result
    if new_rank is not None:
        c.send(r - 1, "unfold", result)
        return result
    t0 = c.ctx.now
    got = yield from c.recv(r + 1, "unfold")
    c.span("fold out", t0, step="unfold", chunk=0, peer=c.task_name(r + 1))
    return copy(got)  # the sender keeps the same buffer in-process: hand out a private one


def recursive_doubling_all_reduce(ctx, members, value, op=ReduceOp.SUM, device=None):
    """All-reduce by recursive doubling (use with ``yield from``)."""
    c, op = begin(ctx, members, "recursive-doubling", value, op, device,
                  what="recursive doubling")
    new_rank, acc, p2 = yield from _fold_in(c, copy(value), op)
    if new_rank is not None:
        mask, step = 1, 0
        while mask < p2:
            peer = _real_rank(c, new_rank ^ mask)
            t0 = ctx.now
            c.send(peer, step, acc)
            got = yield from c.recv(peer, step, expect=value)
            # combine lower rank first, so every member computes bit-identical floats
            acc = op.combine(got, acc) if new_rank & mask else op.combine(acc, got)
            c.span(f"step {step}", t0, step=step, chunk=0, peer=c.task_name(peer))
            mask, step = mask << 1, step + 1
    result = yield from _fold_out(c, new_rank, acc)
    return op.finalize(result, c.p)


def halving_doubling_all_reduce(ctx, members, value, op=ReduceOp.SUM, device=None):
    """All-reduce by recursive halving then doubling (Rabenseifner's algorithm)."""
    c, op = begin(ctx, members, "halving-doubling", value, op, device)
    new_rank, acc, p2 = yield from _fold_in(c, copy(value), op)
    if new_rank is not None:
        chunks = split(acc, p2)
        lo, hi = 0, p2  # the chunks this member is still responsible for
        step, mask = 0, p2 >> 1
        while mask:  # reduce-scatter by recursive halving
            peer = _real_rank(c, new_rank ^ mask)
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if not new_rank & mask else ((mid, hi), (lo, mid))
            t0 = ctx.now
            c.send(peer, step, join_flat(chunks[give[0]:give[1]]))
            mine = join_flat(chunks[keep[0]:keep[1]])
            got = yield from c.recv(peer, step, expect=mine)
            mine = op.combine(got, mine) if new_rank & mask else op.combine(mine, got)
            chunks[keep[0]:keep[1]] = resplit(mine, chunks[keep[0]:keep[1]])
            lo, hi = keep
            c.span(f"step {step} (halving)", t0, step=step, chunk=f"{lo}-{hi - 1}",
                   peer=c.task_name(peer), phase="reduce-scatter")
            step, mask = step + 1, mask >> 1
        mask = 1
        while mask < p2:  # all-gather by recursive doubling
            peer = _real_rank(c, new_rank ^ mask)
            t0 = ctx.now
            c.send(peer, step, join_flat(chunks[lo:hi]))
            width = hi - lo
            plo = lo - width if new_rank & mask else hi
            theirs = chunks[plo:plo + width]
            got = yield from c.recv(peer, step, expect=join_flat(theirs))
            chunks[plo:plo + width] = resplit(got, theirs)
            lo, hi = min(lo, plo), max(hi, plo + width)
            c.span(f"step {step} (doubling)", t0, step=step, chunk=f"{lo}-{hi - 1}",
                   peer=c.task_name(peer), phase="all-gather")
            step, mask = step + 1, mask << 1
        acc = join(chunks, acc)
    result = yield from _fold_out(c, new_rank, acc)
    return op.finalize(result, c.p)
