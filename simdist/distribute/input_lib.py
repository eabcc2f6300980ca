"""How ``strategy.experimental_distribute_dataset`` cuts one global batch into per-replica
batches (TF's ``tensorflow/python/distribute/input_lib.py``); checked against real TF in the
tests.
"""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError


def split_global_batch(batch: int, num_replicas: int) -> list[int]:
    """Per-replica batch sizes of one global batch of ``batch`` examples, as TF cuts it.

    ``experimental_distribute_dataset`` on a dataset batched without ``drop_remainder``
    gives every replica ceil(batch / replicas) examples, in replica order, until the batch
    runs out: 7 over 4 replicas is [2, 2, 2, 1], 6 is [2, 2, 2, 0], a last partial batch of
    1 is [1, 0, 0, 0] (a replica may get an empty batch).
    """
    if num_replicas < 1:
        raise InvalidArgumentError(f"num_replicas must be >= 1, got {num_replicas!r}")
    per = -(-batch // num_replicas)
    return [max(0, min(per, batch - i * per)) for i in range(num_replicas)]


def split_bounds(batch: int, num_replicas: int) -> list[tuple[int, int]]:
    """(start, stop) of each replica's slice of a global batch (``split_global_batch``)."""
    bounds, start = [], 0
    for size in split_global_batch(batch, num_replicas):
        bounds.append((start, start + size))
        start += size
    return bounds
