"""Lesson 14's real-TF runs: ``Model.fit`` (tf_keras, ``TF_USE_LEGACY_KERAS=1``) timed epoch
by epoch under a real ``tf.distribute`` strategy, in processes forked from a launcher that
imported TensorFlow once (``realdist.runtime.localcluster``).

- ``measure_mirrored``: one process, its CPU cut into logical devices; MirroredStrategy on
  the first 1, 2... of them, ``Model.fit`` on numpy arrays (or a ``tf.data`` dataset),
  softmax regression on the first 1536 digits;
- ``measure_cluster``: a localhost cluster of worker processes, each running
  MultiWorkerMirroredStrategy's ``Model.fit`` on a dataset (TF_CONFIG made from the
  cluster's addresses).

Each fit's model is made and compiled once, then fit in two passes of at least four
epochs, enough to time ``TIMED_STEPS`` steps after a pass's first epoch (the first pass's
traces the step function: ``first_epoch_s``); the fits take turns, in order then in reverse
(A B C D D C B A), so that a machine whose load changes slows them alike. ``epoch_s`` is
the fastest timed epoch (other processes only ever slow one down; ``median_epoch_s`` beside
it), ``loss`` the loss after the first pass's fourth epoch.
The logical devices share this machine's cores, as the worker processes do: the times show
what TF's runtime costs here, not what separate devices would give.
"""

from __future__ import annotations

import json

from realdist.runtime.localcluster import Task, run_cluster

#: the first 1536 digits: 24 batches of 64, 3 of 512, no partial batch (a partial last
#: batch has a shape of its own, which fit would trace a second time)
EXAMPLES = 1536
#: at least this many steps are timed in each pass after its first epoch: 3 epochs of 24
#: steps at a global batch of 64, 8 epochs of 3 at 512 (a single 3-step epoch's time moves
#: by a factor of two on a loaded machine). A pass is one call of ``Model.fit``: a call per
#: epoch would add about a second of Keras's set-up to each epoch here
TIMED_STEPS = 24

#: what every task defines before its own code: the digits, models, fits timed in turn
_COMMON = r"""
import time
from simdist.training.exercises import Exercise
data = Exercise(model="softmax", dataset="digits").build()[1]
x, y = data.x[:EXAMPLES].astype("float32"), data.y[:EXAMPLES].astype("int64")

class Fit:
    # a model made and compiled under strategy.scope(), fit in passes of several epochs
    def __init__(self, strategy, batch, lr, dataset=False, **record):
        with strategy.scope():  # the model, its optimizer, its metrics: mirrored variables
            tf.keras.utils.set_random_seed(0)
            self.model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
            self.model.build((None, x.shape[1]))  # its weights now, from the seed just set
            self.model.compile(
                optimizer=tf.keras.optimizers.SGD(lr),
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        self.steps = -(-len(x) // batch)
        self.epochs = max(4, 1 + -(-TIMED_STEPS // self.steps))  # at 512: 3 steps, 9 epochs
        self.record = {"batch": batch, "lr": lr, "steps": self.steps,
                       "replicas": strategy.num_replicas_in_sync, **record}
        self.passes, self.loss = [], None
        if dataset:  # a tf.data.Dataset of global batches: fit cuts each across the replicas
            options = tf.data.Options()
            options.experimental_distribute.auto_shard_policy = (
                tf.data.experimental.AutoShardPolicy.DATA)
            data_in = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)
            self.args, self.kwargs = (data_in.with_options(options),), {}
        else:  # numpy arrays: fit makes the dataset, batch_size is the global batch
            self.args, self.kwargs = (x, y), {"batch_size": batch, "shuffle": False}

    def run(self):
        times = []
        class Clock(tf.keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                times.append(time.perf_counter())
            def on_epoch_end(self, epoch, logs=None):
                times[-1] = time.perf_counter() - times[-1]
        history = self.model.fit(*self.args, epochs=self.epochs, verbose=0,
                                 callbacks=[Clock()], **self.kwargs)
        if self.loss is None:  # the first pass starts from the initial weights
            self.loss = history.history["loss"][3]
        self.passes.append(times)

    def result(self):
        timed = [t for times in self.passes for t in times[1:]]
        return {**self.record, "epoch_s": min(timed), "median_epoch_s": float(np.median(timed)),
                "first_epoch_s": self.passes[0][0], "loss": self.loss,
                "epochs": sum(len(times) for times in self.passes)}

def fit_in_turn(fits):
    # a pass of each fit in order, then in the reverse order (A B C D D C B A): a machine
    # whose load changes meanwhile slows them alike
    for f in fits + fits[::-1]:
        f.run()
    return [f.result() for f in fits]
"""

_MIRRORED = r"""
tf.compat.v1.enable_eager_execution()
from realdist.runtime.devices import configure_cpus
devices = configure_cpus(max(JOB["devices"]))

def mirrored(n):  # reduced on one device: CollectiveAllReduce's groups in one process
    # clash when the number of devices changes (a group of 4 joining one of 2)
    return tf.distribute.MirroredStrategy(
        devices[:n], cross_device_ops=tf.distribute.ReductionToOneDevice())

fits = [Fit(mirrored(n), batch, JOB["lr"], input="numpy")
        for batch in JOB["batches"] for n in JOB["devices"]]
fits += [Fit(mirrored(n), batch, lr, input="numpy") for n, batch, lr in JOB["scaled"]]
emit("fit", fit_in_turn(fits))
"""

_WORKER = r"""
tf.compat.v1.enable_eager_execution()
index = int(TASK.split(":")[1])
os.environ["TF_CONFIG"] = json.dumps({"cluster": CLUSTER,
                                      "task": {"type": "worker", "index": index}})
strategy = tf.distribute.MultiWorkerMirroredStrategy()
workers = len(CLUSTER["worker"])
emit("fit", fit_in_turn([Fit(strategy, batch, JOB["lr"], dataset=True, input="dataset",
                             workers=workers) for batch in JOB["batches"]]))
"""


def _task(name: str, body: str, job: dict) -> Task:
    return Task(name, f"JOB = json.loads({json.dumps(json.dumps(job))})\n"
                f"EXAMPLES = {EXAMPLES}\nTIMED_STEPS = {TIMED_STEPS}\n" + _COMMON + body,
                keras=True)


def measure_mirrored(devices=(1, 2), batches=(64, 512), lr: float = 0.1, scaled=(),
                     timeout: float = 240) -> list[dict]:
    """MirroredStrategy's ``Model.fit`` on the first ``n`` logical CPUs of one process, for
    each global batch in ``batches`` and ``n`` in ``devices`` (numpy arrays), and each
    ``(n, batch, lr)`` of ``scaled``, taking turns. One record per fit."""
    job = {"devices": list(devices), "batches": list(batches), "lr": lr,
           "scaled": [list(s) for s in scaled]}
    report = run_cluster({}, [_task("main", _MIRRORED, job)], timeout)
    return report["outputs"]["main"]["fit"]


def measure_cluster(workers: int = 2, batches=(64, 512), lr: float = 0.1,
                    timeout: float = 240) -> list[dict]:
    """MultiWorkerMirroredStrategy's ``Model.fit`` on a localhost cluster of ``workers``
    processes, for each global batch of ``batches``: worker 0's records (every worker runs
    the same steps in lockstep)."""
    job = {"batches": list(batches), "lr": lr}
    tasks = [_task(f"worker:{i}", _WORKER, job) for i in range(workers)]
    report = run_cluster({"worker": workers}, tasks, timeout)
    return report["outputs"]["worker:0"]["fit"]
