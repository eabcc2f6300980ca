"""Ring all-reduce: reduce-scatter then all-gather around a ring (Baidu, Horovod, NCCL rings).

Each of the p members cuts its value into p chunks. In p-1 reduce-scatter steps every member
sends one chunk to its successor and adds the chunk it receives from its predecessor; then
member r holds the full sum of chunk r+1. In p-1 all-gather steps the finished chunks travel
once more around the ring. Each member sends 2(p-1)/p of the data, whatever p is: the ring is
bandwidth-optimal. With ``pieces`` > 1 each chunk is cut further and every piece is forwarded
as soon as it arrives (pipelining), which hides the link latency behind transfers.
"""

from __future__ import annotations

from simdist.collectives.group import Collective, begin
from simdist.collectives.ops import (ReduceOp, assign, copy, empty_like_flat, join_flat,
                                     reshape_like, split)


def _ring(c: Collective, value, op: ReduceOp, pieces: int, reduce_steps: int,
          gather_steps: int, start_chunk_offset: int = 0):
    """The shared ring loop. Returns the result buffer (flat) and its chunks' pieces.

    Results are written in place into one buffer allocated up front: the data path does no
    copy besides the reductions themselves. A piece that was sent is only overwritten after
    its receiver has used it (the ring's steps are ordered), so sending views is safe.
    """
    p, r = c.p, c.rank
    mine = [split(chunk, pieces) for chunk in split(value, p)]  # views of the input
    result = empty_like_flat(value)
    out = [split(chunk, pieces) for chunk in split(result, p)]  # views of the result
    steps = reduce_steps + gather_steps
    if steps == 0:
        return assign(result, value), out
    first = (r + start_chunk_offset) % p
    for j in range(pieces):
        c.send(r + 1, 0, mine[first][j], chunk=j)
    t0 = c.ctx.now
    for s in range(steps):
        idx = (r + start_chunk_offset - s - 1) % p
        for j in range(pieces):
            gather = s >= reduce_steps  # a finished piece: it may land in the result itself
            got = yield from c.recv(r - 1, s, expect=mine[idx][j], chunk=j,
                                    into=out[idx][j] if gather else None)
            if not gather:
                op.combine(mine[idx][j], got, out=out[idx][j])
            elif got is not out[idx][j]:
                assign(out[idx][j], got)
            if s + 1 < steps:
                c.send(r + 1, s + 1, out[idx][j], chunk=j)
            phase = "reduce-scatter" if s < reduce_steps else "all-gather"
            c.span(f"step {s} ({phase})", t0, step=s, chunk=idx, piece=j,
                   peer=c.task_name(r - 1), phase=phase)
            t0 = c.ctx.now
    return result, out


def ring_all_reduce(ctx, members, value, op=ReduceOp.SUM, pieces: int = 1, device=None):
    """All-reduce ``value`` over ``members`` with a ring (use with ``yield from``)."""
    c, op = begin(ctx, members, "ring", value, op, device, pieces, what="ring all-reduce")
    result, _ = yield from _ring(c, value, op, pieces, c.p - 1, c.p - 1)
    return op.finalize(reshape_like(result, value), c.p)


def ring_reduce_scatter(ctx, members, value, op=ReduceOp.SUM, pieces: int = 1, device=None):
    """Member r ends with the reduced chunk r of ``value`` (chunks as ``np.array_split``)."""
    c, op = begin(ctx, members, "reduce-scatter", value, op, device, pieces,
                  what="ring reduce-scatter")
    # start one chunk later so that member r finishes with chunk r (not r+1)
    _, out = yield from _ring(c, value, op, pieces, c.p - 1, 0, start_chunk_offset=-1)
    return op.finalize(join_flat(out[c.rank]), c.p)


def ring_all_gather(ctx, members, value, device=None):
    """Every member ends with all members' values concatenated in member order (1-D)."""
    c, _ = begin(ctx, members, "all-gather", value, device=device, what="ring all-gather")
    p, r = c.p, c.rank
    parts = [None] * p
    parts[r] = copy(value)
    t0 = ctx.now
    if p > 1:
        c.send(r + 1, 0, parts[r])
    for s in range(p - 1):
        idx = (r - s - 1) % p
        parts[idx] = yield from c.recv(r - 1, s, expect=value)
        if s + 1 < p - 1:
            c.send(r + 1, s + 1, parts[idx])
        c.span(f"step {s}", t0, step=s, chunk=idx, peer=c.task_name(r - 1))
        t0 = ctx.now
    return join_flat(parts)
