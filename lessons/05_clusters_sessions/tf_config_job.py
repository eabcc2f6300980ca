"""The job of lesson 05's mpiexec exercise (``tf_config_mpi.py``): one script, run once per
task, that starts its task's server with the learner's ``server_from_tf_config`` from the
``TF_CONFIG`` the launcher gives it, as a real job's processes get theirs.

    simdist tf1 lessons/05_clusters_sessions/tf_config_job.py --cluster ps=1,worker=3 \\
        -- --exercises lessons/solutions/05_clusters_sessions.py

The ps serves a counter; every worker adds 1 to it ``--adds`` times through a session on its
own server's target and reports the last value it saw, so the largest of them is every add
of every worker, when each task started the right server.
"""

import argparse
import os

from distlab import report, tf
from course.lessons import load_module

parser = argparse.ArgumentParser()
parser.add_argument("--exercises", required=True, help="the file with server_from_tf_config")
parser.add_argument("--adds", type=int, default=5)
args, _ = parser.parse_known_args()

server = load_module(args.exercises).server_from_tf_config(tf, os.environ["TF_CONFIG"])
report("server", {"job": server.job_name, "index": server.task_index,
                  "target": server.target})
if server.job_name == "ps":
    server.join()
else:
    with tf.device("/job:ps/task:0"):
        counter = tf.get_variable("counter", initializer=0, dtype=tf.int32)
        add = counter.assign_add(1)
    with tf.train.MonitoredTrainingSession(master=server.target,
                                           is_chief=server.task_index == 0) as sess:
        seen = [int(sess.run(add)) for _ in range(args.adds)]
    report("last", seen[-1])
