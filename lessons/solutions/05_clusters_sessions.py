"""Lesson 05, Clusters, servers, sessions and containers: reference solutions."""

import json


def predict_counters():
    """The values each client of checks.STORY sees, one client after the other."""
    return {
        "A": [1, 2],        # initializes the counter on ps:0, increments twice
        "B": [3, 4, 5],     # the same variable (same task, container, name): goes on
        "C": [1, 2],        # a local session: a variable of its own
        "D": [1],           # container "trial": another variable on ps:0
        "E": [1, 2],        # on worker:1: another variable again
        "F": [6],           # back to A and B's counter, untouched since B
        "G": [1],           # initializes it again: back to 0 for everybody
        "H": [2, 3],        # D's counter in "trial", untouched since D
    }


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
    return tf.train.Server(cluster, job_name=task["type"], task_index=int(task["index"]))


def fresh_experiment(tf, target, build, steps):
    """Build the experiment in a container of its own, train from fresh variables, read the
    result, then free that container (which also closes this session, as in TF)."""
    graph = tf.Graph()
    with graph.as_default(), tf.container("fresh_experiment"):
        init, train, value = build(tf)
    sess = tf.Session(target, graph=graph)
    sess.run(init)
    for _ in range(steps):
        sess.run(train)
    result = int(sess.run(value))
    sess.close()
    tf.Session.reset(target, ["fresh_experiment"])
    return result


def predict_partitions():
    """The master's partitions of each run of checks.PARTITION_RUNS: one per device that runs
    something after pruning, the client device (the master's CPU:0) included; one pair per
    tensor and other device that needs it; feeds and fetches on the client device."""
    return {
        # ps:0, ps:1, worker:0's GPU:0 and CPU:0 (the client device); pairs: x to the GPU,
        # w and b to the GPU (messages), y back to CPU:0 for the loss
        "loss": {"partitions": 4, "pairs": 4, "across_tasks": 2, "feeds": 1, "fetches": 1},
        # pruned to w and scaled: ps:0 and worker:0's CPU:0; w crosses once
        "scaled": {"partitions": 2, "pairs": 1, "across_tasks": 1, "feeds": 0, "fetches": 1},
        # feeding h cuts off x, the MatMul and w: no ps:0; h to the GPU, b, y back
        "from_h": {"partitions": 3, "pairs": 3, "across_tasks": 1, "feeds": 1, "fetches": 1},
        # the master is ps:0, so scaled leaves from ps:0's CPU:0: w out, scaled back
        "scaled_via_ps": {"partitions": 2, "pairs": 2, "across_tasks": 2, "feeds": 0,
                          "fetches": 1},
    }
