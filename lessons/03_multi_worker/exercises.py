"""Lesson 03, Many machines: your exercises.

Replace each ``raise NotImplementedError(...)`` with your code, then check it:

    simdist lesson start 03       # once: copies this file to my_exercises/
    simdist check 03              # all checks of this lesson, with hints
    mpiexec -n 3 --mca btl ^tcp python -m mpi4py lessons/03_multi_worker/mwms_mpi.py  # your TF_CONFIGs, 3 ranks

(as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root`` and
``--oversubscribe`` after ``mpiexec``). The notebook notebooks/03_multi_worker.ipynb explains
everything these exercises need.
"""

import json  # noqa: F401  (you will need it)
import math  # noqa: F401

from simdist.collectives import formulas  # noqa: F401


def tf_configs(addresses):
    """Exercise 1 (★): the TF_CONFIG of every task of a MultiWorkerMirroredStrategy cluster.

    ``addresses`` lists the "host:port" of every worker, worker 0 first (for example
    ["10.0.0.1:2222", "10.0.0.2:2222", "10.0.0.3:2222"]). Return a list with one JSON
    string per worker, in the same order: the value that worker's process must find in its
    ``TF_CONFIG`` environment variable before it creates the strategy. Each one says what the
    whole cluster is (the "cluster" key: the job "worker" and its addresses, in order) and
    which task this process is (the "task" key: its type and its index, an int).
    """
    raise NotImplementedError("exercise tf_configs: return one TF_CONFIG JSON string per "
                              "worker")


def is_chief(tf_config):
    """Exercise 2 (★★): is the task described by this TF_CONFIG (a JSON string) the chief?

    The chief is the task that saves checkpoints and writes summaries for the whole cluster.
    Return True or False as TensorFlow 2.21's tf.distribute decides (section 1 of the lesson):
    mind the evaluator, a task index written as a string, and a cluster with a "master" job
    (Estimator's and Kubeflow TFJob's name for the chief), which tf.distribute refuses with a
    ValueError: raise one too.
    """
    raise NotImplementedError("exercise is_chief: apply the chief rule to this TF_CONFIG")


def predict_step_ns(workers, hw, model, global_batch):
    """Exercise 3 (★★★): the simulated time of one training step on ``workers`` workers, in ns.

    Each worker is a machine with one device (one replica), so MultiWorkerMirroredStrategy
    has ``workers`` replicas; the workers are joined by the network ``hw.network`` (latency
    ``hw.network.latency_ns`` in ns, bandwidth ``hw.network.bandwidth`` in bytes/s), and
    each device computes at the speed of ``hw.device``: ``hw.device.compute_time_ns(flops,
    nbytes)`` is the time of one operation. ``model`` is a simdist model: ``model.flops(b)``
    is the forward and backward FLOPs of a batch of b examples, ``model.nbytes`` the bytes
    of its gradient (float32), ``model.num_params`` its number of parameters.

    One step of the custom training loop, in order, every worker taking part in each part:

    1. forward and backward on the worker's slice of the global batch of ``global_batch``
       examples (cut as in lesson 02; the step waits for the worker with the most examples);
    2. the all-reduce of the gradients, one packed buffer of ``model.nbytes`` bytes, with
       MultiWorkerMirroredStrategy's ring (lesson 01: ``formulas.ring(p, n, a, B)``);
    3. the SGD update of the variables on every device: it reads the variable and the
       gradient and writes the variable, ``hw.device.compute_time_ns(2 * model.num_params,
       3 * model.nbytes)``;
    4. ``strategy.reduce(SUM, loss)``: another ring all-reduce, of one float32 (4 bytes).

    With one worker there is nothing to all-reduce. The check compares your prediction with
    the simulator for 1 to 4 workers on 10 GbE and on 100 GbE, and for a global batch of 6
    over 4 workers, and accepts it within 2%.
    """
    raise NotImplementedError("exercise predict_step_ns: add up the parts of one step")
