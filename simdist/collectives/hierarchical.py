"""Hierarchical all-reduce: inside each machine first, then between machines.

Members on one machine reduce to the machine's first member over the fast local link
(NVLink, PCIe, shared memory), those leaders all-reduce over the network with a ring, and
each leader broadcasts the result on its machine. This is what TF's HierarchicalCopyAllReduce
and Horovod's hierarchical mode do: the slow network carries one value per machine, not one
per device.
"""

from __future__ import annotations

from .group import member_address
from .naive import broadcast, reduce
from .ops import ReduceOp, check_value
from .ring import ring_all_reduce


def machines_of(ctx, members) -> dict[int, list]:
    """Members grouped by machine (per the hardware layout), in member order."""
    layout = ctx.hardware.layout
    groups: dict[int, list] = {}
    for m in members:
        order, _ = member_address(ctx, m)
        groups.setdefault(layout.machine_of(order), []).append(m)
    return groups


def hierarchical_all_reduce(ctx, members, value, op=ReduceOp.SUM, pieces: int = 1,
                            device=None):
    """All-reduce within machines, then across them (use with ``yield from``)."""
    op = ReduceOp.parse(op)
    value = check_value(value, "hierarchical all-reduce")
    members = list(members)
    inner = ReduceOp.SUM if op is ReduceOp.MEAN else op
    groups = machines_of(ctx, members)
    local = groups[ctx.hardware.layout.machine_of(ctx.order)]
    leaders = [g[0] for g in groups.values()]
    total = yield from reduce(ctx, local, value, inner, device=device)
    if member_address(ctx, local[0]) == (ctx.order, device):
        total = yield from ring_all_reduce(ctx, leaders, total, inner, pieces=pieces,
                                           device=device)
        total = op.finalize(total, len(members))
    return (yield from broadcast(ctx, local, total, device=device))
