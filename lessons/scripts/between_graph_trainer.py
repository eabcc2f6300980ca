"""A between-graph trainer as TF1's distributed guide writes it: one script, run once per task.

    simdist tf1 lessons/scripts/between_graph_trainer.py --cluster ps=1,worker=3
    realdist tf1 lessons/scripts/between_graph_trainer.py --cluster ps=1,worker=3

Each task gets its role as the guide's flags (``--job_name``, ``--task_index``) and as
``TF_CONFIG``. The ps tasks serve; every worker builds the same graph with
``replica_device_setter`` (variables on the ps, compute on itself) and trains a linear model
with ``SyncReplicasOptimizer``: two gradients make a step, so with three workers one is a
backup whose late gradients are dropped. The chief (worker 0) also initializes the variables
and runs the optimizer's queue runners. ``MonitoredTrainingSession`` with ``StopAtStepHook``
stops every worker at global step ``--steps``.
"""

import argparse
import json
import os
import time

import numpy as np

from distlab import report, tf

parser = argparse.ArgumentParser()
parser.add_argument("--job_name", default=None)
parser.add_argument("--task_index", type=int, default=None)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--replicas_to_aggregate", type=int, default=2)
parser.add_argument("--work_ms", default="20,20,70", help="each worker's extra compute, ms")
args, _ = parser.parse_known_args()
config = json.loads(os.environ.get("TF_CONFIG", "{}"))
job = args.job_name or config["task"]["type"]
index = args.task_index if args.task_index is not None else config["task"]["index"]
cluster = tf.train.ClusterSpec(config["cluster"])
server = tf.train.Server(cluster, job_name=job, task_index=index)

if job == "ps":
    server.join()
else:
    workers = cluster.num_tasks("worker")
    rng = np.random.default_rng(index)
    x = rng.normal(size=(32, 4)).astype(np.float32)
    y = x @ np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{index}", cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        w = tf.get_variable("w", initializer=np.zeros(4, np.float32))
        loss = tf.reduce_mean(tf.square(tf.reduce_sum(tf.constant(x) * w, axis=1)
                                        - tf.constant(y)))
        optimizer = tf.train.SyncReplicasOptimizer(
            tf.train.GradientDescentOptimizer(0.1),
            replicas_to_aggregate=args.replicas_to_aggregate, total_num_replicas=workers)
        train = optimizer.minimize(loss, global_step=global_step)
    hooks = [optimizer.make_session_run_hook(index == 0),
             tf.train.StopAtStepHook(last_step=args.steps)]
    work = [float(ms) / 1000 for ms in args.work_ms.split(",")][index % 3]
    losses = []
    # the chief's queue runner may still wait for the gradients of a step after the last:
    # give it 1 s to end at close (TF's default waits 120 s before going on without it)
    # a worker's session needs the ps and itself only (TF's guides: device_filters), not
    # the other workers, which may not be up yet
    only = tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"])
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0,
                                           hooks=hooks, stop_grace_period_secs=1,
                                           config=only) as sess:
        while not sess.should_stop():
            time.sleep(work)  # the worker's own compute (simulated time in simdist)
            _, value = sess.run([train, loss])
            losses.append(float(value))
    # the step the job ended at, read after training: a global_step fetched beside train in
    # one run races with the update (TF may read it before or after the step is applied)
    with tf.Session(server.target, config=only) as sess:
        step = sess.run(global_step)
    report("runs", len(losses))
    report("global_step", int(step))
    report("losses", losses)
