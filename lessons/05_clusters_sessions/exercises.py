"""Lesson 05, Clusters, servers, sessions and containers: your exercises.

Replace each ``raise NotImplementedError(...)`` with your code, then run ``simdist check 05``.
``tf`` is the TF module the caller passes in: ``simdist.graph`` in the simulator,
``tf.compat.v1`` on real TensorFlow.
"""


def counter_client(tf, target, worker, initialize, increments, device="/job:ps/task:0"):
    """Exercise 1: a client of the shared counter.

    In a new ``tf.Graph()``: create an int32 variable named "counter" (initial value 0) on
    ``device``, and an op adding 1 to it (``tf.assign_add``) on ``/job:worker/task:<worker>``
    (with ``device=None``, give no device at all: a local session). Open
    ``tf.Session(target, graph=...)``, run the counter's initializer only if ``initialize``,
    run the increment ``increments`` times and return the list of values it returned (ints).
    """
    raise NotImplementedError("exercise counter_client: build the graph, open the session")


def predict_ps_tasks(sizes, num_ps, strategy="round_robin"):
    """Exercise 2: predict replica_device_setter's ps task for each variable.

    ``sizes`` are the variables' sizes in bytes, in the order they are created under
    ``tf.device(tf.train.replica_device_setter(ps_tasks=num_ps, ps_strategy=...))``.
    ``strategy`` is "round_robin" (the default strategy) or "greedy"
    (GreedyLoadBalancingStrategy with byte_size_load_fn). Return a list of task indices.
    """
    raise NotImplementedError("exercise predict_ps_tasks: return one ps task per variable")


def server_from_tf_config(tf, tf_config):
    """Exercise 3: ``tf_config`` is a TF_CONFIG JSON string such as
    '{"cluster": {"ps": [...], "worker": [...]}, "task": {"type": "worker", "index": 1}}'.
    Start and return the ``tf.train.Server`` of the task it names."""
    raise NotImplementedError("exercise server_from_tf_config: parse the JSON, start the server")


def reset_experiment(tf, target):
    """Exercise 4: free every variable of the container named "experiment" on all the tasks
    of the cluster that ``target`` serves, and nothing else."""
    raise NotImplementedError("exercise reset_experiment: use tf.Session.reset")
