"""Lesson 14's real-TF runs: ``Model.fit`` (tf_keras, ``TF_USE_LEGACY_KERAS=1``) timed epoch
by epoch under a real ``tf.distribute`` strategy, in processes forked from a launcher that
imported TensorFlow once (``realdist.runtime.localcluster``).

- ``measure_mirrored``: one process, its CPU cut into logical devices; MirroredStrategy on
  the first 1, 2... of them, ``Model.fit`` on numpy arrays (or a ``tf.data`` dataset),
  softmax regression on the first 1536 digits;
- ``measure_cluster``: a localhost cluster of worker processes, each running
  MultiWorkerMirroredStrategy's ``Model.fit`` on a dataset (TF_CONFIG made from the
  cluster's addresses).

Each fit runs at least four epochs, and enough to time ``TIMED_STEPS`` steps after the
first, which traces the step function (``first_epoch_s``); the median epoch after it is the
one reported (``epoch_s``), with the loss after the fourth epoch (``loss``).
The logical devices share this machine's cores, as the worker processes do: the times show
what TF's runtime costs here, not what separate devices would give.
"""

from __future__ import annotations

import json

from realdist.runtime.localcluster import Task, run_cluster

#: the first 1536 digits: 24 batches of 64, 3 of 512, no partial batch (a partial last
#: batch has a shape of its own, which fit would trace a second time)
EXAMPLES = 1536
#: at least this many steps are timed after the first epoch (which traces): 3 epochs of 24
#: steps at a global batch of 64, 12 epochs of 3 at 512 (a single 3-step epoch's time moves
#: by a factor of two on a loaded machine). Each fit is one call of ``Model.fit``: a call
#: per epoch would add about a second of Keras's set-up to each epoch here
TIMED_STEPS = 36

#: what every task defines before its own code: the digits, a model and a timed fit
_COMMON = r"""
import time
from simdist.training.exercises import Exercise
data = Exercise(model="softmax", dataset="digits").build()[1]
x, y = data.x[:EXAMPLES].astype("float32"), data.y[:EXAMPLES].astype("int64")

def timed_fit(strategy, batch, lr, dataset=False, **fit_options):
    steps = -(-len(x) // batch)
    epochs = max(4, 1 + -(-TIMED_STEPS // steps))  # at 512: 3 steps an epoch, 13 epochs
    with strategy.scope():  # the model, its optimizer and its metrics: mirrored variables
        tf.keras.utils.set_random_seed(0)
        model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
        model.compile(optimizer=tf.keras.optimizers.SGD(lr),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    times = []
    class Clock(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            times.append(time.perf_counter())
        def on_epoch_end(self, epoch, logs=None):
            times[-1] = time.perf_counter() - times[-1]
    if dataset:  # a tf.data.Dataset of global batches: fit cuts each across the replicas
        data_in = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA)
        history = model.fit(data_in.with_options(options), epochs=epochs, verbose=0,
                            callbacks=[Clock()], **fit_options)
    else:  # numpy arrays: fit makes the dataset, batch_size is the global batch
        history = model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=False, verbose=0,
                            callbacks=[Clock()], **fit_options)
    return {"batch": batch, "lr": lr, "epoch_s": float(np.median(times[1:])),
            "first_epoch_s": times[0],
            "steps": steps, "loss": history.history["loss"][3], "epochs": epochs,
            "replicas": strategy.num_replicas_in_sync}
"""

_MIRRORED = r"""
tf.compat.v1.enable_eager_execution()
from realdist.runtime.devices import configure_cpus
devices = configure_cpus(max(JOB["devices"]))

def mirrored(n):  # reduced on one device: CollectiveAllReduce's groups in one process
    # clash when the number of devices changes (a group of 4 joining one of 2)
    return tf.distribute.MirroredStrategy(
        devices[:n], cross_device_ops=tf.distribute.ReductionToOneDevice())

for batch in JOB["batches"]:
    for n in JOB["devices"]:
        emit("fit[]", {**timed_fit(mirrored(n), batch, JOB["lr"]), "input": "numpy"})
for n, batch, lr in JOB["scaled"]:  # the same fit with another learning rate
    emit("fit[]", {**timed_fit(mirrored(n), batch, lr), "input": "numpy"})
for n, batch in JOB["datasets"]:
    emit("fit[]", {**timed_fit(mirrored(n), batch, JOB["lr"], dataset=True),
                   "input": "dataset"})
"""

_WORKER = r"""
tf.compat.v1.enable_eager_execution()
index = int(TASK.split(":")[1])
os.environ["TF_CONFIG"] = json.dumps({"cluster": CLUSTER,
                                      "task": {"type": "worker", "index": index}})
strategy = tf.distribute.MultiWorkerMirroredStrategy()
for batch in JOB["batches"]:
    emit("fit[]", {**timed_fit(strategy, batch, JOB["lr"], dataset=True), "input": "dataset",
                   "workers": len(CLUSTER["worker"])})
"""


def _task(name: str, body: str, job: dict) -> Task:
    return Task(name, f"JOB = json.loads({json.dumps(json.dumps(job))})\n"
                f"EXAMPLES = {EXAMPLES}\nTIMED_STEPS = {TIMED_STEPS}\n" + _COMMON + body,
                keras=True)


def measure_mirrored(devices=(1, 2), batches=(64, 512), lr: float = 0.1, scaled=(),
                     datasets=(), timeout: float = 240) -> list[dict]:
    """MirroredStrategy's ``Model.fit`` on the first ``n`` logical CPUs of one process, for
    each ``n`` in ``devices`` and global batch in ``batches`` (numpy arrays); then each
    ``(n, batch, lr)`` of ``scaled`` and each ``(n, batch)`` of ``datasets`` (a tf.data
    dataset). One record per fit."""
    job = {"devices": list(devices), "batches": list(batches), "lr": lr,
           "scaled": [list(s) for s in scaled], "datasets": [list(d) for d in datasets]}
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
