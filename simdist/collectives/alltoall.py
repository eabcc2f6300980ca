"""All-to-all: member r sends its i-th block to member i (as ``MPI_Alltoall`` and the
expert routing of mixture-of-experts layers do). Sends go in a rotated order, r+1 first."""

from __future__ import annotations

from simdist.collectives.group import Collective, CollectiveError
from simdist.collectives.ops import check_value, copy


def all_to_all(ctx, members, blocks, device=None):
    """``blocks``: one value per member (in member order). Returns the blocks received,
    in member order (block r is this member's own)."""
    c = Collective(ctx, members, "all-to-all", device=device)
    blocks = list(blocks)
    if len(blocks) != c.p:
        raise CollectiveError(f"all-to-all: {ctx.name} passed {len(blocks)} blocks for "
                              f"{c.p} members: expected one block per member")
    for b in blocks:
        check_value(b, "all-to-all")
    p, r = c.p, c.rank
    out = [None] * p
    out[r] = copy(blocks[r])
    for k in range(1, p):
        c.send(r + k, 0, blocks[(r + k) % p])
    t0 = ctx.now
    for k in range(1, p):
        src = (r - k) % p
        out[src] = copy((yield from c.recv(src, 0)))  # private, as under MPI
        c.span(f"from {c.task_name(src)}", t0, step=k - 1, chunk=src, peer=c.task_name(src))
        t0 = ctx.now
    return out
