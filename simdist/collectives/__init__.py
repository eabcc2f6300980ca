"""Collectives on simulated tasks: all-reduce families and the other MPI/NCCL collectives.

Every function is a generator to use with ``yield from`` inside a task's program; it works on
real numpy values (results equal numpy's reductions) or size-only ``Phantom`` values, and
takes the members as task names or orders (every member passes the same list)::

    total = yield from all_reduce(ctx, ["worker:0", "worker:1"], grad, algorithm="ring")
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from .alltoall import all_to_all
from .group import Collective, CollectiveError
from .hierarchical import hierarchical_all_reduce
from .naive import broadcast, reduce, reduce_to_one_all_reduce
from .ops import ReduceOp
from .packing import pack, unpack
from .ps import ps_all_reduce
from .recursive import halving_doubling_all_reduce, recursive_doubling_all_reduce
from .ring import ring_all_gather, ring_all_reduce, ring_reduce_scatter
from .tree import binary_tree_all_reduce, double_binary_tree_all_reduce

#: all-reduce algorithms by name: naive first, then the optimized ones
ALL_REDUCE = {
    "reduce-to-one": reduce_to_one_all_reduce,
    "ring": ring_all_reduce,
    "recursive-doubling": recursive_doubling_all_reduce,
    "halving-doubling": halving_doubling_all_reduce,
    "binary-tree": binary_tree_all_reduce,
    "double-binary-tree": double_binary_tree_all_reduce,
    "hierarchical": hierarchical_all_reduce,
    "ps": ps_all_reduce,
}


def all_reduce(ctx, members, value, op=ReduceOp.SUM, algorithm: str = "ring",
               device: int | None = None, **options):
    """All-reduce ``value`` over ``members`` with the named algorithm (see ``ALL_REDUCE``).

    Members are tasks ("worker:0" or a task order) or devices of tasks (("worker:0", 1));
    ``device`` is the device of this task taking part (None when the members are tasks).
    """
    if algorithm not in ALL_REDUCE:
        raise InvalidArgumentError(f"unknown all-reduce algorithm {algorithm!r}: expected one "
                                   f"of {', '.join(ALL_REDUCE)}")
    return (yield from ALL_REDUCE[algorithm](ctx, members, value, op, device=device,
                                             **options))


reduce_scatter = ring_reduce_scatter
all_gather = ring_all_gather

__all__ = ["ALL_REDUCE", "Collective", "CollectiveError", "ReduceOp", "all_gather",
           "all_reduce", "all_to_all", "broadcast", "pack", "reduce", "reduce_scatter",
           "unpack"]
