"""Lesson 09, When the network saturates: your exercises.

Copy this file to your workspace once (``simdist lesson start 09``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 09`` (or the
check cells of the notebook).
"""


def ps_nic_bytes(parameters, workers, ps, gradient_dtype):
    """Exercise 1 (★): a dense model of ``parameters`` float32 weights, cut evenly over
    ``ps`` parameter servers, trained by ``workers`` workers that send their gradients as
    ``gradient_dtype`` ("float32" or "float16"). In one round of updates every worker reads
    the weights and pushes one gradient (one synchronous step does exactly this). How many
    bytes does one ps NIC receive, and how many does it send, in that round? Return the pair
    ``(received, sent)``; the few bytes of the global step, the bias and the RunGraph
    requests and responses do not count.
    """
    raise NotImplementedError("exercise ps_nic_bytes: return (received, sent) in bytes")


def choose_ps_shards():
    """Exercise 2 (★★): four workers train the 1,000,000-weight model asynchronously
    (``train_on_ps(workers=4, mode="async", steps=8, features=1_000_000, examples=2,
    ps=P)``, 10 GbE, 1 ms of compute per step). Return the fewest ps tasks P with which
    every ps NIC is busy at most 50% of the training time (in its busier direction).
    """
    raise NotImplementedError("exercise choose_ps_shards: return an int 1..8")


def backup_workers_for_throughput():
    """Exercise 3 (★★): six workers train synchronously; their steps take 1, 1, 1, 1, 3 and
    6 ms (``train_on_ps(workers=6, mode="sync", steps=12, step_us=(1000, 1000, 1000, 1000,
    3000, 6000), replicas_to_aggregate=6 - b)``). Return the number of backup workers b
    with which the steps average the most gradients per second.
    """
    raise NotImplementedError("exercise backup_workers_for_throughput: return an int 0..5")


def choose_ps_for_float16():
    """Exercise 4 (★★): four workers train a dense model of 500,000 float32 weights (2 MB)
    asynchronously and send float16 gradients (``train_on_ps(workers=4, mode="async",
    steps=8, features=500_000, examples=2, step_us=(500,) * 4, gradient_dtype="float16",
    ps=P)``, 10 GbE, 0.5 ms of compute per step). Return the fewest ps tasks P with which
    every ps NIC is busy at most 45% of the training time (in its busier direction).
    """
    raise NotImplementedError("exercise choose_ps_for_float16: return an int 1..8")


def sparse_update():
    """Exercise 6 (★★): a batch looks up the int32 ids 3, 8, 3, 1, 8, 3, 6 and 0 in an
    embedding table of 10 rows of 4 float32 values (``tf.nn.embedding_lookup``), and one
    SGD step applies the gradient to the table. Which rows does the update change, and how
    many bytes does the gradient's ``IndexedSlices`` hold (its values and its indices: what
    the worker pushes to the ps)? Return ``(rows, nbytes)``: the changed rows as a sorted
    list of ints, and an int.
    """
    raise NotImplementedError("exercise sparse_update: return (rows, nbytes)")
