"""The naive collectives: everything through one root member.

``reduce_to_one_all_reduce`` is what TF calls ``ReductionToOneDevice`` (MirroredStrategy's
fallback for mixed CPU and GPU devices and in TF 1 sessions): every member sends its whole value to the root,
the root reduces and sends the result back to every member. The root's link carries
2(p-1) whole values, so it gets slower as p grows; the ring avoids that hot spot.
"""

from __future__ import annotations

from simdist.collectives.group import Collective, CollectiveError, begin, member_address
from simdist.collectives.ops import ReduceOp, check_value, copy


def _reduce(c: Collective, value, op: ReduceOp, root: int):
    """Members send to ``root``; it combines in member order. Returns the sum at the root."""
    ctx = c.ctx
    t0 = ctx.now
    if c.rank != root:
        c.send(root, "reduce", value)
        return None
    acc = copy(value)
    for r in range(c.p):
        if r == root:
            continue
        got = yield from c.recv(r, "reduce", expect=value)
        acc = op.combine(acc, got)
        c.span("reduce", t0, step=0, chunk=0, peer=c.task_name(r), phase="reduce")
        t0 = ctx.now
    return acc


def _broadcast(c: Collective, value, root: int):
    """``root`` sends ``value`` to every other member, in member order."""
    t0 = c.ctx.now
    if c.rank == root:
        for r in range(c.p):
            if r != root:
                c.send(r, "broadcast", value)
        return value
    got = yield from c.recv(root, "broadcast")
    c.span("broadcast", t0, step=1, chunk=0, peer=c.task_name(root), phase="broadcast")
    return copy(got)  # unsent buffers may be shared in-process: hand out a private one


def _root_rank(c: Collective, root) -> int:
    address = member_address(c.ctx, root)
    if address not in c.members:
        raise CollectiveError(f"{c.name}: root {root!r} is not one of the members "
                              f"{[c.task_name(r) for r in range(c.p)]}")
    return c.members.index(address)


def reduce_to_one_all_reduce(ctx, members, value, op=ReduceOp.SUM, root=None, device=None):
    """All-reduce through one root (TF's ReductionToOneDevice). Use with ``yield from``."""
    c, op = begin(ctx, members, "reduce-to-one", value, op, device,
                  what="reduce-to-one all-reduce")
    root = 0 if root is None else _root_rank(c, root)
    total = yield from _reduce(c, value, op, root)
    if c.rank == root:
        total = op.finalize(total, c.p)
    return (yield from _broadcast(c, total, root))


def reduce(ctx, members, value, op=ReduceOp.SUM, root=None, device=None):
    """The reduced value at ``root`` (default the first member); None elsewhere."""
    c, op = begin(ctx, members, "reduce", value, op, device)
    root = 0 if root is None else _root_rank(c, root)
    total = yield from _reduce(c, value, op, root)
    return op.finalize(total, c.p) if c.rank == root else None


def broadcast(ctx, members, value, root=None, device=None):
    """``root``'s value on every member (others may pass None)."""
    c = Collective(ctx, members, "broadcast", value, device)
    root = 0 if root is None else _root_rank(c, root)
    if c.rank == root:
        check_value(value, "broadcast")
    return (yield from _broadcast(c, value, root))
