"""Lesson 10, ParameterServerStrategy and the ClusterCoordinator: reference solutions."""

import numpy as np

from simdist.distribute.sharded_variable import FixedShardsPartitioner


def choose_partitioner():
    """Three shards of every variable, one per ps: each ps gets a third of the 64 KB
    table (334, 333 and 333 rows), and the small kernel and bias hardly matter."""
    return FixedShardsPartitioner(3)


def predict_function_runs():
    """20 steps / 4 per function = 5 functions; the one worker:1 runs at 250 us goes back
    in the queue and runs again: 6 runs."""
    return 6


def choose_steps_per_execution():
    """An epoch is 1,024 / 32 = 32 steps; the coordinator joins at its end, so it should
    hold at least one function per worker: 32 / 4 = 8 steps a function. Smaller k pays the
    coordinator's 100 us more often (k = 4: 2.26 ms), larger k leaves workers idle in every
    epoch (k = 16: 2.78 ms); k = 8 takes 2.02 ms."""
    return 8


def why_longer_is_slower():
    """Two functions an epoch for four workers: two idle until the epoch's join."""
    return "b"


def register_functions(cluster, dataset_fn):
    """The scheduled function counts its batch's labels (``minlength``: a batch may hold no
    example of class 3). Both functions are registered: the coordinator's "run" message
    names ``count_labels``, and the worker builds its per-worker dataset itself from the
    name ``dataset_fn``."""

    def count_labels(iterator):
        x, y = next(iterator)
        return np.bincount(y, minlength=4)

    cluster.register(count_labels)
    cluster.register(dataset_fn)
    return count_labels


def lookup_ps_tasks():
    # 10 rows in 4 shards: rows 0-2, 3-5, 6-7, 8-9 on ps:0, ps:1, ps:2, ps:0 (in turn); ids
    # 4 and 5 are in shard 1 (ps:1), 9 in shard 3 (ps:0); no id in shards 0 or 2
    return ["ps:0", "ps:1"]


def fetch_time_saved():
    # one fetch round trip (about 20 us, section 8) per function that returns a value;
    # each worker has its own coordinator thread: 6 fetches each, side by side
    return 6 * 20.1
