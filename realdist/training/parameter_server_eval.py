"""Evaluation while training with a real ParameterServerStrategy: the four styles of
simdist's ``simdist/training/evaluation.py`` on TF 2.21, each giving the same
``metadata["evaluation"]`` (style, metric: the mean per-example loss over the evaluation
set, visits: how many times each example was counted, counted).

- ``"inline"``: the coordinator reads the trained variables from the ps and evaluates them
  batch by batch itself;
- ``"distributed"``: one ``eval_step`` ``tf.function`` per batch scheduled with the
  ClusterCoordinator over a per-worker dataset (worker ``w`` takes batches ``w, w + W, ...``,
  repeated), each adding its loss sum and visits to metric variables on the ps
  (at-least-once: a function re-run after its worker died keeps what its first run added);
- ``"exactly_once"``: ``shards`` functions, shard ``i`` taking batches ``i, i + shards,
  ...`` with accumulators local to that run and returned; the coordinator sums the results
  it fetches (tf_keras's ``pss_evaluation_shards``, as simdist models it);
- ``"sidecar"``: the coordinator writes a checkpoint (``tf.train.CheckpointManager``) after
  every epoch into a temporary directory, and an evaluator process beside the cluster reads
  them with ``tf.train.checkpoints_iterator`` (what ``SidecarEvaluator`` does): a checkpoint
  written while it evaluates another is skipped.

``Evaluation`` is what ``realdist.training.parameter_server_loop.train`` calls (``saved`` after
every epoch, ``after_training`` once); ``sidecar`` is the evaluator process's program.
``kill`` = (worker, seconds down or None) SIGKILLs that worker as the evaluation begins and
restarts it that much later (the cluster is then one process per task): the functions it
was to run go to the other workers, and when it is back its per-worker dataset is rebuilt.
"""

from __future__ import annotations

import os
import time

import numpy as np

from simdist.base.errors import InvalidArgumentError, brief
from simdist.training.evaluation import STYLES, batches_of

from realdist.training.parameter_server_runner import run_parameter_server

DONE = "training-done"  # the file the coordinator writes once no checkpoint will follow


def check_options(exercise, style: str, eval_examples: int = 256, eval_batch: int = 32,
                  shards: int = 4, poll_s: float = 0.2, kill=None) -> dict:
    """The evaluation options of a real run, checked, as the job's dict."""
    if style not in STYLES:
        raise InvalidArgumentError(f"evaluation style {brief(style)}: expected one of "
                                   f"{', '.join(STYLES)}")
    for label, value in (("eval_examples", eval_examples), ("eval_batch", eval_batch),
                         ("shards", shards)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{label} must be an int >= 1, got {brief(value)}")
    if isinstance(poll_s, bool) or not isinstance(poll_s, (int, float)) or not (
            0 < poll_s <= 60):
        raise InvalidArgumentError(f"poll_s must be seconds in (0, 60], got {brief(poll_s)}")
    _, data = exercise.build()
    if eval_examples > len(data.x):
        raise InvalidArgumentError(f"eval_examples={eval_examples}: the dataset has only "
                                   f"{len(data.x)} examples")
    if kill is not None:
        if style not in ("distributed", "exactly_once"):
            raise InvalidArgumentError(f"kill={brief(kill)}: only the distributed and "
                                       f"exactly_once styles run functions on the workers, "
                                       f"not {style}")
        if not (isinstance(kill, (tuple, list)) and len(kill) == 2
                and isinstance(kill[0], int) and 0 <= kill[0] < exercise.workers
                and (kill[1] is None or isinstance(kill[1], (int, float)) and kill[1] >= 0)):
            raise InvalidArgumentError(
                f"kill={brief(kill)}: expected (worker, seconds down or None), a worker "
                f"below {exercise.workers}")
    return {"style": style, "eval_examples": eval_examples, "eval_batch": eval_batch,
            "shards": shards, "poll_s": float(poll_s),
            "kill": None if kill is None else list(kill)}


def run_evaluation(exercise, style: str, eval_examples: int = 256, eval_batch: int = 32,
                   shards: int = 4, poll_s: float = 0.2, kill=None, timeout: float = 300,
                   processes: bool | None = None):
    """Train ``exercise`` (a parameter_server one) on real TF and evaluate it in ``style``
    on its first ``eval_examples`` examples: simdist's ``simulate_evaluation`` on a real
    cluster; the outcome in ``metadata["evaluation"]``."""
    options = check_options(exercise, style, eval_examples, eval_batch, shards, poll_s, kill)
    return run_parameter_server(exercise, timeout=timeout, processes=processes,
                                evaluation=options)


def _loss_sum(tf, loss_of, weights, x, y):
    """The batch's per-example losses (float32, as simdist's) summed in float64."""
    return tf.reduce_sum(tf.cast(loss_of(weights, x, y), tf.float64))


def _result(style: str, total: float, visits, **more) -> dict:
    visits = np.asarray(visits, np.int64)
    count = int(visits.sum())
    return {"style": style, "metric": float(total / count) if count else float("nan"),
            "visits": visits.tolist(), "counted": count, **more}


class Evaluation:
    """One real run's evaluation (``options``: ``check_options``'s dict): ``saved`` after
    every epoch, ``after_training`` once the training functions have ended."""

    def __init__(self, tf, exercise, options: dict, checkpoint_dir: str | None = None,
                 control: str | None = None):
        self.tf, self.exercise, self.options = tf, exercise, options
        self.style = options["style"]
        _, data = exercise.build()
        n = options["eval_examples"]
        self.x, self.y = data.x[:n], data.y[:n]
        self.batches = batches_of(n, options["eval_batch"])
        # TensorFlow: in the coordinator only
        from realdist.training.models import per_example_loss_fn

        self.loss_of = per_example_loss_fn(exercise.model)
        self.checkpoint_dir, self.control = checkpoint_dir, control
        self.manager, self.checkpoints = None, []

    def saved(self, weights: dict, iterations) -> None:
        """After an epoch: the sidecar style writes a checkpoint (``ckpt-N``, N from 0)."""
        if self.style != "sidecar":
            return
        tf = self.tf
        if self.manager is None:
            checkpoint = tf.train.Checkpoint(
                weights={_key(n): v for n, v in weights.items()}, iterations=iterations)
            self.manager = tf.train.CheckpointManager(checkpoint, self.checkpoint_dir,
                                                      max_to_keep=None)
        path = self.manager.save(checkpoint_number=len(self.checkpoints))
        self.checkpoints.append({
            "name": os.path.basename(path), "step": int(iterations.numpy()),
            "at": time.monotonic_ns(),
            "weights": {n: tf.convert_to_tensor(v).numpy().tolist()
                        for n, v in weights.items()}})

    def after_training(self, strategy, coordinator, weights: dict, first: int) -> dict:
        """Evaluate in this run's style; ``first``: the number of the first evaluation
        function (they follow the training's: ``eval_step#N``)."""
        tf, x, y = self.tf, self.x, self.y
        began = time.monotonic_ns()
        if self.style == "sidecar":
            with open(os.path.join(self.checkpoint_dir, DONE), "w"):
                pass
            return {"style": "sidecar", "checkpoints": self.checkpoints}
        if self.style == "inline":
            values = {n: tf.convert_to_tensor(v) for n, v in weights.items()}
            total, visits = 0.0, np.zeros(len(x), np.int64)
            for idx in self.batches:
                total += float(_loss_sum(tf, self.loss_of, values, x[idx], y[idx]))
                visits[idx] += 1
            return _result("inline", total, visits, span=[began, time.monotonic_ns()])
        if self.options["kill"] is not None:
            from realdist.training.parameter_server_loop import order_kill

            worker, down = self.options["kill"]
            order_kill(self.control, f"worker:{worker}", down)
        run = (self._distributed if self.style == "distributed" else self._exactly_once)
        out = run(strategy, coordinator, weights, first)
        return {**out, "span": [began, time.monotonic_ns()]}

    def _started(self, function_id, starts):
        """Count this run of the function on ps:0; (its worker, its start time)."""
        tf = self.tf
        starts.scatter_add(tf.IndexedSlices(tf.ones([1], tf.int64), [function_id]))
        return (tf.distribute.coordinator.experimental_get_current_worker_index(),
                tf.timestamp())

    def _ended(self, after):
        with self.tf.control_dependencies(after):
            return self.tf.timestamp()

    def _distributed(self, strategy, coordinator, weights, first) -> dict:
        tf, n = self.tf, len(self.x)
        nb = len(self.batches)
        with strategy.scope():
            total = tf.Variable(tf.zeros([1], tf.float64), name="eval_total")
            visits = tf.Variable(tf.zeros([n], tf.int64), name="eval_visits")
        with tf.device("/job:ps/task:0"):
            starts = tf.Variable(tf.zeros([nb], tf.int64), name="eval_starts")
        x, y = tf.constant(self.x), tf.constant(self.y)
        b = self.options["eval_batch"]
        workers = self.exercise.workers

        def dataset_fn():  # this worker's shard of the batches, repeated
            w = tf.distribute.coordinator.experimental_get_current_worker_index()
            return (tf.data.Dataset.range(nb).shard(workers, tf.cast(w, tf.int64)).repeat()
                    .map(lambda i: tf.range(i * b, tf.minimum((i + 1) * b, n))))

        iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

        @tf.function
        def eval_step(iterator, function_id):
            worker, start = self._started(function_id, starts)
            idx = next(iterator)
            loss = _loss_sum(tf, self.loss_of, weights, tf.gather(x, idx), tf.gather(y, idx))
            added = [total.assign_add(tf.reshape(loss, [1])),
                     visits.scatter_add(tf.IndexedSlices(tf.ones_like(idx), idx))]
            return worker, start, self._ended(added)

        values = [coordinator.schedule(eval_step, args=(iterator, tf.constant(i, tf.int64)))
                  for i in range(nb)]
        coordinator.join()
        return _result("distributed", float(total.numpy()[0]), visits.numpy(),
                       **self._runs("eval_step", first, values, starts))

    def _exactly_once(self, strategy, coordinator, weights, first) -> dict:
        tf, n, shards = self.tf, len(self.x), self.options["shards"]
        with tf.device("/job:ps/task:0"):
            starts = tf.Variable(tf.zeros([shards], tf.int64), name="eval_starts")
        x, y = tf.constant(self.x), tf.constant(self.y)
        b, nb = self.options["eval_batch"], len(self.batches)

        @tf.function
        def eval_shard(shard):
            worker, start = self._started(shard, starts)
            total = tf.constant(0.0, tf.float64)  # this run's own accumulators
            seen = tf.zeros([n], tf.int64)
            for i in tf.range(shard, nb, shards):
                idx = tf.range(i * b, tf.minimum((i + 1) * b, n))
                total += _loss_sum(tf, self.loss_of, weights, tf.gather(x, idx),
                                   tf.gather(y, idx))
                seen = tf.tensor_scatter_nd_add(seen, idx[:, None], tf.ones_like(idx))
            return worker, start, self._ended([total, seen]), total, seen

        values = [coordinator.schedule(eval_shard, args=(tf.constant(i, tf.int64),))
                  for i in range(shards)]
        coordinator.join()
        total, visits = 0.0, np.zeros(n, np.int64)
        for value in values:
            *_, shard_total, seen = value.fetch()
            total += float(shard_total)
            visits += seen
        return _result("exactly_once", total, visits,
                       **self._runs("eval_shard", first, values, starts))

    @staticmethod
    def _runs(name, first, values, starts) -> dict:
        """The evaluation functions' runs: one record each (worker, start and end on the
        coordinator's monotonic clock) and how many times each started (2 for one re-run
        after its worker died)."""
        clock = time.time_ns() - time.monotonic_ns()  # tf.timestamp() is time.time()
        runs = []
        for i, value in enumerate(values):
            worker, t0, t1 = value.fetch()[:3]
            runs.append({"function": f"{name}#{first + i + 1}", "worker": int(worker),
                         "start": int(t0 * 1e9) - clock, "end": int(t1 * 1e9) - clock})
        return {"functions": runs,
                "function_runs": {f"{name}#{first + i + 1}": int(k)
                                  for i, k in enumerate(starts.numpy())}}


def _key(name: str) -> str:
    """A checkpoint's dict key for a weight ("hidden/kernel" -> "hidden.kernel")."""
    return name.replace("/", ".")


def sidecar(tf, exercise, options: dict, checkpoint_dir: str, emit) -> None:
    """The evaluator process (``SidecarEvaluator.start()``): evaluate the latest checkpoint
    each time ``tf.train.checkpoints_iterator`` finds a new one; those written since the
    last one evaluated are skipped; stop once the coordinator says training is done."""
    from realdist.training.models import per_example_loss_fn

    model, data = exercise.build()
    n = options["eval_examples"]
    x, y = data.x[:n], data.y[:n]
    loss_of = per_example_loss_fn(exercise.model)
    local = {name: tf.Variable(tf.zeros(np.shape(value), tf.float32), name=_key(name))
             for name, value in model.init(exercise.seed).items()}
    iterations = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(weights={_key(k): v for k, v in local.items()},
                                     iterations=iterations)
    done = os.path.join(checkpoint_dir, DONE)
    evaluated, skipped, metrics, last, seen = [], [], {}, -1, [None]

    def finished():  # the coordinator is done and its last checkpoint evaluated
        return (os.path.exists(done)
                and tf.train.latest_checkpoint(checkpoint_dir) == seen[0])

    for path in tf.train.checkpoints_iterator(
            checkpoint_dir, min_interval_secs=options["poll_s"], timeout=options["poll_s"],
            timeout_fn=finished):
        seen[0] = path
        number = int(path.rsplit("-", 1)[1])
        skipped += [f"ckpt-{k}" for k in range(last + 1, number)]
        last = number
        checkpoint.restore(path).expect_partial()
        total, visits = 0.0, np.zeros(n, np.int64)
        for idx in batches_of(n, options["eval_batch"]):
            total += float(_loss_sum(tf, loss_of, local, x[idx], y[idx]))
            visits[idx] += 1
        name = os.path.basename(path)
        evaluated.append(name)
        metrics[name] = _result("sidecar", total, visits)["metric"]
        emit("progress[]", {"evaluated": name, "step": int(iterations.numpy())})
    emit("sidecar", {"evaluated": evaluated, "skipped": skipped, "metrics": metrics})


__all__ = ["Evaluation", "check_options", "run_evaluation", "sidecar"]
