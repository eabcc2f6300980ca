"""In-graph replication as TF1's guides write it: one client builds every tower.

    simdist tf1 lessons/scripts/in_graph_trainer.py --cluster ps=1,worker=3
    realdist tf1 lessons/scripts/in_graph_trainer.py --cluster ps=1,worker=3 --clients worker:0

Every task starts a server; only worker 0 runs a client. Its graph holds the variable on the
ps, one tower per worker (each on its own shard of the data) and the average of their
gradients on the ps, so each ``Session.run`` is one step of every tower: the master on
worker 0 cuts the graph into one partition per task. The other tasks only serve. The run is
deterministic, so both halves report the same global step, losses and weights.
"""

import argparse
import json
import os

import numpy as np

from distlab import report, tf

parser = argparse.ArgumentParser()
parser.add_argument("--job_name", default=None)
parser.add_argument("--task_index", type=int, default=None)
parser.add_argument("--steps", type=int, default=5)
args, _ = parser.parse_known_args()
config = json.loads(os.environ.get("TF_CONFIG", "{}"))
job = args.job_name or config["task"]["type"]
index = args.task_index if args.task_index is not None else config["task"]["index"]
cluster = tf.train.ClusterSpec(config["cluster"])
server = tf.train.Server(cluster, job_name=job, task_index=index)

if (job, index) != ("worker", 0):
    server.join()  # the ps holds the variable; the other workers run their towers
else:
    workers = cluster.num_tasks("worker")
    true_w = np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    with tf.device("/job:ps/task:0"):
        global_step = tf.train.get_or_create_global_step()
        w = tf.get_variable("w", initializer=np.zeros(4, np.float32))
    optimizer = tf.train.GradientDescentOptimizer(0.1)
    grads, losses = [], []
    for k in range(workers):
        x = np.random.default_rng(k).normal(size=(32, 4)).astype(np.float32)
        with tf.device(f"/job:worker/task:{k}"), tf.name_scope(f"tower_{k}"):
            loss = tf.reduce_mean(tf.square(tf.reduce_sum(tf.constant(x) * w, axis=1)
                                            - tf.constant(x @ true_w)))
            losses.append(loss)
            grads.append(optimizer.compute_gradients(loss, [w])[0][0])
    with tf.device("/job:ps/task:0"), tf.name_scope("average"):
        mean = tf.add_n(grads) / float(workers)
    train = optimizer.apply_gradients([(mean, w)], global_step)
    with tf.Session(server.target) as sess:
        sess.run(tf.global_variables_initializer())
        values = [float(sess.run([train, losses[0]])[1]) for _ in range(args.steps)]
        report("global_step", int(sess.run(global_step)))
        report("losses", values)
        report("weights", sess.run(w))
