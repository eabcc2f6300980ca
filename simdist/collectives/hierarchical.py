"""Hierarchical all-reduce: inside each group first, then between the groups.

Members of a group reduce to the group's first member (its leader) over the fast local link
(NVLink, PCIe, shared memory), the leaders all-reduce over the network with a ring, and each
leader broadcasts the result in its group. The groups are the machines (per the hardware
layout) unless given: Horovod's hierarchical mode groups by machine, TF's
``HierarchicalCopyAllReduce`` splits the devices into two halves. Either way the slow link
carries one value per group, not one per device.
"""

from __future__ import annotations

from collections import Counter

from simdist.collectives.group import CollectiveError, member_address
from simdist.collectives.naive import broadcast, reduce
from simdist.collectives.ops import ReduceOp, check_pieces, check_value
from simdist.collectives.ring import ring_all_reduce


def machines_of(ctx, members) -> list[list]:
    """Members grouped by machine (per the hardware layout), in member order."""
    layout = ctx.hardware.layout
    groups: dict[int, list] = {}
    for m in members:
        order, _ = member_address(ctx, m)
        groups.setdefault(layout.machine_of(order), []).append(m)
    return list(groups.values())


def hierarchical_all_reduce(ctx, members, value, op=ReduceOp.SUM, pieces: int = 1,
                            device=None, groups=None):
    """All-reduce within groups, then across their leaders (use with ``yield from``).

    ``groups``: lists of members that together hold every member once, leader first
    (default: one group per machine); ``pieces`` pipelines the leaders' ring.
    """
    op = ReduceOp.parse(op)
    check_value(value, "hierarchical all-reduce")
    check_pieces(pieces)
    members = list(members)
    groups = machines_of(ctx, members) if groups is None else [list(g) for g in groups]
    _check_groups(ctx, members, groups)
    me = (ctx.order, device)
    local = next((g for g in groups if me in [member_address(ctx, m) for m in g]), None)
    if local is None:
        raise CollectiveError(f"hierarchical: {ctx.name} calls it but is not one of its "
                              f"members {members}")
    inner = ReduceOp.SUM if op is ReduceOp.MEAN else op
    total = yield from reduce(ctx, local, value, inner, device=device)
    if member_address(ctx, local[0]) == me:
        total = yield from ring_all_reduce(ctx, [g[0] for g in groups], total, inner,
                                           pieces=pieces, device=device)
        total = op.finalize(total, len(members))
    return (yield from broadcast(ctx, local, total, device=device))


def _check_groups(ctx, members, groups):
    grouped = Counter(member_address(ctx, m) for g in groups for m in g)
    if not all(groups) or grouped != Counter(member_address(ctx, m) for m in members):
        raise CollectiveError(f"hierarchical: groups {groups} must be non-empty and hold "
                              f"every member of {members} once")
