"""Lesson 10, ParameterServerStrategy and the ClusterCoordinator: your exercises.

Copy this file to your workspace once (``simdist lesson start 10``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 10`` (or the
check cells of the notebook).
"""

import numpy as np  # noqa: F401 (yours to use)

from simdist.distribute.sharded_variable import (  # noqa: F401 (yours to use)
    FixedShardsPartitioner, MaxSizePartitioner, MinSizePartitioner)


def choose_partitioner():
    """Exercise 1 (★★): a model has three float32 variables, created in this order: an
    embedding table of shape (1000, 16), a kernel (16, 10) and a bias (10,). The cluster has
    3 ps tasks. Return the ``variable_partitioner`` (a FixedShardsPartitioner,
    MinSizePartitioner or MaxSizePartitioner, or None for none) with which no ps stores more
    than 1.2 times the average bytes per ps.
    """
    raise NotImplementedError("exercise choose_partitioner: return a partitioner")


def predict_function_runs():
    """Exercise 2 (★): the coordinator trains 20 steps on 2 workers and 2 ps with
    ``steps_per_execution=4`` (``Exercise(strategy="parameter_server", workers=2, ps=2,
    steps=20, steps_per_execution=4, failures=("worker:1@250us+200us",))``): worker:1 fails
    250 us in, while it runs a function, and is back 200 us later. How many function runs
    start on the workers in all (a function that runs twice counts twice)?
    """
    raise NotImplementedError("exercise predict_function_runs: return an int")


def choose_steps_per_execution():
    """Exercise 3 (★★): predict, then run: 64 steps on 4 workers and 2 ps, in global batches
    of 32 (``Exercise(strategy="parameter_server", workers=4, ps=2, steps=64,
    global_batch=32, steps_per_execution=k)``), a configuration section 4 has not drawn.
    Return the k among 1, 2, 4, 8, 16, 32 and 64 with which the training ends soonest (the
    least simulated time). Work it out from section 4 (the coordinator's cost per function,
    and the epoch) before you run anything.
    """
    raise NotImplementedError("exercise choose_steps_per_execution: return an int")


def why_longer_is_slower():
    """Exercise 3b (★): in exercise 3's configuration, k = 16 trains slower than k = 8,
    although the coordinator pays for half as many functions. Why? Return one letter:

    - ``"a"``: the coordinator's cost of a function grows with its number of steps;
    - ``"b"``: an epoch (1,024 examples in batches of 32) is then two functions, so two of
      the four workers idle until the coordinator joins at the epoch's end;
    - ``"c"``: the steps inside one function skip the ps and train on stale variables;
    - ``"d"``: longer functions send more bytes to the ps per step.
    """
    raise NotImplementedError("exercise why_longer_is_slower: return 'a', 'b', 'c' or 'd'")


def register_functions(cluster, dataset_fn):
    """Exercise 4 (★★): the coordinator of ``coordinator_mpi.py`` (a chief, 2 workers and
    1 ps) makes a per-worker dataset of ``dataset_fn`` (batches of 8 ``(x, y)``, labels 0 to
    3) and schedules one function 12 times, each on whichever worker is free. Under
    ``mpiexec`` a function reaches a worker's rank by its registered name only: every rank
    calls ``register_functions`` with its own ``InProcessCluster`` before the job starts.
    Write the scheduled function, ``fn(iterator)``: it takes the next batch of the worker's
    iterator and returns how many examples of each class the batch holds (4 ints, class 0
    first). Register with ``cluster.register(f)`` every function a worker must find by name
    on its own rank, and return the function to schedule.
    """
    raise NotImplementedError("exercise register_functions: write the scheduled function and "
                              "register what a worker must find by name")


def lookup_ps_tasks():
    """Exercise 6 (★★): a float32 table of 10 rows is cut by ``FixedShardsPartitioner(4)``
    and placed on 3 ps tasks by a ParameterServerStrategy (the shards in turn, as section 1
    says). A scheduled function calls ``tf.nn.embedding_lookup(table, [9, 4, 5, 9])``.
    Which ps tasks send rows to it? Return a list of task names, e.g. ``["ps:2"]``.
    """
    raise NotImplementedError("exercise lookup_ps_tasks: return a list of ps task names")


def fetch_time_saved():
    """Exercise 7 (★★): section 8's step function (``hot.scheduled``), now on 2 workers,
    12 functions, 500 us of compute each (``scheduled(workers=2, functions=12, returns=...,
    compute_us=500)``). How many microseconds of simulated training time does returning
    ``None`` instead of the loss save? Return a number (us); within 15% passes. Predict it
    from section 8 before you run anything.
    """
    raise NotImplementedError("exercise fetch_time_saved: return microseconds")
