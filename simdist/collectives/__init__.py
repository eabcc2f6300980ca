"""Collectives on simulated tasks: all-reduce families and the other MPI/NCCL collectives.

Every function is a generator to use with ``yield from`` inside a task's program; it works on
real numpy values (results equal numpy's reductions) or size-only ``Phantom`` values, and
takes the members as task names or orders (every member passes the same list)::

    total = yield from all_reduce(ctx, ["worker:0", "worker:1"], grad, algorithm="ring")

The all-reduce algorithms are records in ``registry.ALGORITHMS`` (one file each, plus their
closed forms in ``formulas``). A concept package: may import ``simdist.sim``,
``simdist.hardware``, ``simdist.trace`` and ``simdist.base``, never another concept.
"""

from __future__ import annotations

from simdist.collectives.alltoall import all_to_all
from simdist.collectives.group import Collective, CollectiveError
from simdist.collectives.naive import broadcast, reduce
from simdist.collectives.ops import ReduceOp
from simdist.collectives.packing import pack, unpack
from simdist.collectives.registry import (ALGORITHMS, ALL_REDUCE, AllReduceAlgorithm,
                                          algorithm_named, all_reduce, all_reduce_time)
from simdist.collectives.ring import ring_all_gather, ring_reduce_scatter

reduce_scatter = ring_reduce_scatter
all_gather = ring_all_gather

__all__ = ["ALGORITHMS", "ALL_REDUCE", "AllReduceAlgorithm", "Collective", "CollectiveError",
           "ReduceOp", "algorithm_named", "all_gather", "all_reduce", "all_reduce_time",
           "all_to_all", "broadcast", "pack", "reduce", "reduce_scatter", "unpack"]
