"""Lesson 11, TPUs and TPUStrategy: your exercises.

Copy this file to your workspace once (``simdist lesson start 11``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 11`` (or the
check cells of the notebook).
"""


def ici_bytes_per_chip(x, y, nbytes):
    """Exercise 1 (★): TPUStrategy all-reduces ``nbytes`` of gradients over a slice whose
    chips form an ``x`` by ``y`` torus (a ring all-reduce along every X ring, then along every
    Y ring). How many bytes does each chip send over its inter-chip links (ICI) in that one
    all-reduce? Return an int; a piece of ``nbytes / p`` that does not divide evenly is
    rounded up to a whole byte.
    """
    raise NotImplementedError("exercise ici_bytes_per_chip: return the bytes as an int")


def how_ici_bytes_grow():
    """Exercise 1b (★): the same gradients (n bytes) are all-reduced on ever larger slices,
    from 2 x 2 chips to 16 x 16. What happens to the bytes each chip sends over ICI? Return
    one letter:

    - ``"a"``: they grow in proportion to the number of chips;
    - ``"b"``: they grow, but level off below 4 n: more rounds, each of a smaller piece;
    - ``"c"``: they shrink, as each chip's piece n / p gets smaller;
    - ``"d"``: they stay exactly 2 n, as in a ring all-reduce of any size.
    """
    raise NotImplementedError("exercise how_ici_bytes_grow: return 'a', 'b', 'c' or 'd'")


def steps_per_execution_for_90_percent():
    """Exercise 2 (★★): the linear model of section 3 on a v3-8 (8 cores, 2 x 2 chips):
    ``Exercise(strategy="tpu", hardware="tpu-v3", devices_per_worker=8, global_batch=256,
    steps_per_execution=K)``. Each host dispatch costs 100 us. Return the smallest K with
    which the cores are busy at least 90% of the time.
    """
    raise NotImplementedError("exercise steps_per_execution_for_90_percent: return an int")


def batches_that_compile(candidates):
    """Exercise 3 (★★): the regression dataset has 1,024 examples and is batched without
    ``drop_remainder``; a v3-8 has 8 cores. TPUStrategy runs with static shapes only
    (``tf.distribute.RunOptions(experimental_enable_dynamic_batch_size=False)``, what the
    simulator models; TF 2.21's default would pad a partial batch instead). Of the global
    batch sizes in ``candidates``, return the set that trains a whole epoch without a shape
    error.
    """
    raise NotImplementedError("exercise batches_that_compile: return a set of ints")
