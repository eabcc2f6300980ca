"""``Model.fit`` under a real ParameterServerStrategy: Keras's own parameter-server training
(it makes the ClusterCoordinator and schedules ``steps_per_execution`` steps per function),
with ``tf_keras`` (``TF_USE_LEGACY_KERAS=1``: Keras 3 does not support the strategy, see
DESIGN.md), ``steps_per_epoch`` (the dataset repeats forever, so Keras needs it) and
``tf.keras.callbacks.BackupAndRestore`` in a temporary directory: a coordinator that
restarts resumes from the last epoch it backed up. The cluster is in process, or one process
per task where a worker is to be killed (SIGKILL as an epoch begins, restarted at once: the
coordinator runs its functions on the other workers and fit goes on), in
``realdist.runtime.localcluster``'s private network namespace.
"""

from __future__ import annotations

import json

from simdist.base import errors

from realdist.runtime.localcluster import Task, run_cluster
from realdist.training.parameter_server_runner import server_tasks

_FIT = r"""
tf1.enable_eager_execution()  # the prelude is TF1's; ParameterServerStrategy is TF2
import tempfile
from realdist.training.parameter_server_loop import order_kill, serve_in_process
from simdist.training.exercises import Exercise
job = json.loads(JOB)
exercise = Exercise.from_dict(job["exercise"])
model_spec, data = exercise.build()
servers = [] if job["processes"] else serve_in_process(tf, CLUSTER)
resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
    tf.train.ClusterSpec(CLUSTER), task_type="chief", task_id=0, rpc_layer="grpc")
strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
outputs = int(data.y.max()) + 1 if exercise.model != "linear" else data.y.reshape(
    len(data.y), -1).shape[1]
with strategy.scope():
    layers = [tf.keras.layers.Dense(32, activation="relu")] if exercise.model == "mlp" else []
    model = tf.keras.Sequential(layers + [tf.keras.layers.Dense(outputs)])
    loss = ("mse" if exercise.model == "linear" else
            tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.compile(optimizer=tf.keras.optimizers.SGD(exercise.learning_rate), loss=loss,
                  steps_per_execution=exercise.steps_per_execution)
x, y = data.x.astype("float32"), data.y

def dataset_fn(input_context):
    return (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=exercise.seed)
            .repeat().batch(exercise.global_batch))

backup = tempfile.mkdtemp(prefix=f"realdist-backup-{os.getpid()}-")  # swept if killed
backed_up = []

class Look(tf.keras.callbacks.Callback):  # after BackupAndRestore's own on_epoch_end
    def on_epoch_begin(self, epoch, logs=None):
        if job["kill"] and epoch == job["kill"][1]:
            order_kill(CONTROL, f"worker:{job['kill'][0]}", 0.001)

    def on_epoch_end(self, epoch, logs=None):
        backed_up.append(sorted(os.listdir(backup)))

history = model.fit(tf.keras.utils.experimental.DatasetCreator(dataset_fn),
                    epochs=job["epochs"], steps_per_epoch=job["steps_per_epoch"],
                    callbacks=[tf.keras.callbacks.BackupAndRestore(backup), Look()],
                    verbose=0)
import tf_keras
emit("fit", {"loss": [float(v) for v in history.history["loss"]],
             "iterations": int(model.optimizer.iterations.numpy()),
             "keras": f"{type(model).__module__.split('.')[0]} {tf_keras.__version__}",
             "coordinator": type(model._cluster_coordinator).__name__,
             "backed_up": backed_up, "backup_left": os.listdir(backup)})
sys.stdout.flush()
import shutil
shutil.rmtree(backup, ignore_errors=True)
os._exit(0)  # the servers' threads would keep the process alive
"""

MODELS = ("linear", "softmax", "mlp")


def fit_parameter_server(exercise, epochs: int = 3, steps_per_epoch: int = 5,
                         timeout: float = 300, kill: tuple[int, int] | None = None) -> dict:
    """``model.fit`` of the exercise's model (as Keras layers) on a real
    ParameterServerStrategy cluster: {"loss": per epoch, "iterations": the optimizer's step
    count, ...}. ``kill`` = (worker, epoch): that worker's process is SIGKILLed as that epoch
    begins and started again (the cluster is then one process per task)."""
    if exercise.strategy != "parameter_server":
        raise errors.InvalidArgumentError(f"strategy {exercise.strategy!r} is not "
                                          "parameter_server")
    if exercise.model not in MODELS:
        raise errors.InvalidArgumentError(f"model {exercise.model!r}: Model.fit runs the "
                                          f"Keras models {', '.join(MODELS)}")
    for name, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
        if not isinstance(value, int) or value < 1:
            raise errors.InvalidArgumentError(f"{name} must be an int >= 1, got {value!r}")
    if kill is not None and not (
            isinstance(kill, (tuple, list)) and len(kill) == 2
            and all(isinstance(v, int) for v in kill) and 0 <= kill[0] < exercise.workers
            and 0 <= kill[1] < epochs):
        raise errors.InvalidArgumentError(
            f"kill={kill!r}: expected (worker, epoch), a worker below {exercise.workers} "
            f"and an epoch below {epochs}")
    exercise.validate()
    job = {"exercise": exercise.to_dict(), "epochs": epochs, "steps_per_epoch": steps_per_epoch,
           "processes": kill is not None, "kill": kill}
    tasks = [Task("chief", f"JOB = {json.dumps(json.dumps(job))}\n" + _FIT, keras=True)]
    if kill is not None:
        tasks += server_tasks(exercise)
    report = run_cluster({"chief": 1, "worker": exercise.workers, "ps": exercise.ps}, tasks,
                         timeout)
    return {**report["outputs"]["chief"]["fit"], "kills": report["failures"]}
