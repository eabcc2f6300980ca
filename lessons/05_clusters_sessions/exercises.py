"""Lesson 05, Clusters, servers, sessions and containers: your exercises.

Copy this file to your workspace once (``simdist lesson start 05``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 05``.
``tf`` is the TF module the caller passes in: ``simdist.graph`` in the simulator,
``tf.compat.v1`` on real TensorFlow.
"""


def predict_counters():
    """Exercise 1 (★★): predict what every client of ``checks.STORY`` sees.

    Read ``STORY`` and ``counter_story`` in lessons/05_clusters_sessions/checks.py (do not
    run them!). On a {ps: 1, worker: 2} cluster, eight clients run one after the other; each
    builds a graph with an int32 variable "counter" (initial value 0) on the device and in the
    container its line names, opens a session on its target ("local" is ``tf.Session()``
    with no target), runs the initializer if its line says so, and increments the counter the
    number of times given. Return ``{client: [the values its increments returned]}``, e.g.
    ``{"A": [1, 2], ...}``.
    """
    raise NotImplementedError("exercise predict_counters: return {client: [values]}")


def predict_ps_tasks(sizes, num_ps, strategy="round_robin"):
    """Exercise 2 (★): predict replica_device_setter's ps task for each variable.

    ``sizes`` are the variables' sizes in bytes, in the order they are created under
    ``tf.device(tf.train.replica_device_setter(ps_tasks=num_ps, ps_strategy=...))``.
    ``strategy`` is "round_robin" (the default strategy) or "greedy"
    (GreedyLoadBalancingStrategy with byte_size_load_fn). Return a list of task indices.
    """
    raise NotImplementedError("exercise predict_ps_tasks: return one ps task per variable")


def server_from_tf_config(tf, tf_config):
    """Exercise 3 (★): ``tf_config`` is a TF_CONFIG JSON string such as
    '{"cluster": {"ps": [...], "worker": [...]}, "task": {"type": "worker", "index": 1}}'.
    Start and return the ``tf.train.Server`` of the task it names (as TensorFlow reads a
    TF_CONFIG: the index may also be written as a string, "1")."""
    raise NotImplementedError("exercise server_from_tf_config: parse the JSON, start the server")


def fresh_experiment(tf, target, build, steps):
    """Exercise 4 (★★): run an experiment from fresh variables and clean up after it.

    ``build(tf)`` creates an experiment's variables and ops in the current graph and returns
    ``(init, train, value)``. In a graph of your own, on the cluster that ``target`` serves:
    initialize, run ``train`` ``steps`` times, and return ``int`` of ``value`` after the last
    step. Other experiments keep variables on the same cluster, in the default container,
    and must keep them; yours must be freed when you return, and a second call must start
    from fresh variables again.
    """
    raise NotImplementedError("exercise fresh_experiment: run it, free what it created")


def predict_partitions():
    """Exercise 5 (★★): predict the master's partitions and _Send/_Recv pairs of four runs.

    Read ``partition_story`` and ``PARTITION_RUNS`` in lessons/05_clusters_sessions/checks.py
    (do not run them!). On a {ps: 2, worker: 1} cluster whose worker:0 has one GPU: ``w`` on
    ps:0, ``b`` on ps:1, ``h = matmul(x, w)`` and ``y = h + b`` on worker:0's GPU:0 (``x`` a
    placeholder there), ``loss = reduce_sum(square(y))`` and ``scaled = w * 2.0`` on
    worker:0's CPU:0. Each run opens a session on its task's target, fetches one tensor and
    feeds one tensor or none. For every run return the counts of its
    ``RunMetadata.partition_graphs``: ``{"loss": {"partitions": ..., "pairs": ...,
    "across_tasks": ..., "feeds": ..., "fetches": ...}, ...}``: partition graphs; _Send/_Recv
    pairs between two devices; those of them whose two devices are on different tasks;
    client-terminated _Recv nodes (feeds) and _Send nodes (fetches), not counted in pairs.
    """
    raise NotImplementedError("exercise predict_partitions: return {run: {field: count}}")
