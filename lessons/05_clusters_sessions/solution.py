"""Lesson 05, Clusters, servers, sessions and containers: reference solutions."""

import json


def counter_client(tf, target, worker, initialize, increments, device="/job:ps/task:0"):
    """A client: a ``counter`` variable on ``device`` (None: wherever the session runs),
    incremented on ``/job:worker/task:<worker>``; returns the value after each increment."""
    graph = tf.Graph()
    with graph.as_default():
        with tf.device(device):
            counter = tf.Variable(0, name="counter")
        with tf.device(None if device is None else f"/job:worker/task:{worker}"):
            increment = tf.assign_add(counter, 1)
    seen = []
    with tf.Session(target, graph=graph) as sess:
        if initialize:
            sess.run(counter.initializer)
        for _ in range(increments):
            seen.append(int(sess.run(increment)))
    return seen


def predict_ps_tasks(sizes, num_ps, strategy="round_robin"):
    """The ps task of each variable (``sizes``: bytes of each, in creation order)."""
    if strategy == "round_robin":
        return [i % num_ps for i in range(len(sizes))]
    loads, tasks = [0] * num_ps, []
    for size in sizes:
        task = loads.index(min(loads))  # the least loaded ps, the lowest index on ties
        loads[task] += size
        tasks.append(task)
    return tasks


def server_from_tf_config(tf, tf_config):
    """Start the server of the task that the TF_CONFIG JSON string names."""
    config = json.loads(tf_config)
    cluster = tf.train.ClusterSpec(config["cluster"])
    task = config["task"]
    return tf.train.Server(cluster, job_name=task["type"], task_index=task["index"])


def reset_experiment(tf, target):
    """Free the variables of the "experiment" container on every task of the cluster."""
    tf.Session.reset(target, ["experiment"])
