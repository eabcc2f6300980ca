"""Which examples each replica really receives: TF's own split of a global batch.

A dataset of example ids 0..n-1, batched into global batches, goes through
``strategy.experimental_distribute_dataset`` exactly as the training loop's batches do; every
replica's ids are read back with ``strategy.experimental_local_results``. ``realdist split``
prints them, and the tests compare them with ``simdist.distribute.input_lib.split_global_batch``
and with the multi-worker rule.
"""

from __future__ import annotations

from realdist.training.loop import batch_dataset
from realdist.runtime.tfenv import tf


def id_batches(examples: int, global_batch: int) -> list:
    """Global batches of example ids (x = id, y = id), the last one partial."""
    import numpy as np

    ids = np.arange(examples, dtype=np.int32)
    return [(ids[i:i + global_batch], ids[i:i + global_batch])
            for i in range(0, examples, global_batch)]


def received_ids(strategy, examples: int, global_batch: int) -> list[list[list[int]]]:
    """Per step, the ids each local replica of this worker received."""
    dataset = strategy.experimental_distribute_dataset(
        batch_dataset(id_batches(examples, global_batch)))

    @tf.function
    def count(inputs):  # keeps the workers of a multi-worker run in step
        sizes = strategy.run(lambda x, y: tf.size(x), args=inputs)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, sizes, axis=None)

    steps = []
    for inputs in dataset:
        steps.append([x.numpy().tolist() for x in strategy.experimental_local_results(inputs[0])])
        count(inputs)
    return steps


def format_split(workers: list[list[list[list[int]]]]) -> list[str]:
    """Lines of ``realdist split``: per step, every worker's replicas and their ids."""
    lines = []
    for k in range(len(workers[0])):
        parts = [f"worker:{w} replica {r}: {ids}" for w, steps in enumerate(workers)
                 for r, ids in enumerate(steps[k])]
        lines.append(f"step {k}: " + "; ".join(parts))
    return lines
