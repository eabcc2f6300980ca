"""Evaluation while training with ParameterServerStrategy: the four styles of TF's
parameter-server training guide, each giving the metric (the mean per-example loss of the
model over the evaluation set) and how many times each evaluation example was counted.

- ``"inline"``: inline direct, the coordinator (chief) evaluates the weights itself after
  training, a span on its "evaluation" lane;
- ``"distributed"``: inline distributed, ``eval_step`` functions scheduled on the workers
  with per-worker datasets (each worker its shard of the batches, repeated), updating metric
  variables on the ps batch by batch. At-least-once: a function re-run after a worker
  failure keeps what its first run added, the failed worker's rebuilt dataset starts again
  from its first batch, so examples can be counted twice or never;
- ``"exactly_once"``: what ``Model.compile(pss_evaluation_shards=N)`` does in tf_keras 2.21
  (tf.data itself offers at most at-most-once: the tf.data service's ``DYNAMIC`` sharding
  may miss examples after a restart): the batches split into N shards, one function per
  shard with metric accumulators local to that run, returned as its result; the coordinator
  sums the results it fetches, so a shard re-run after a failure is counted once (the trace
  still shows it run twice);
- ``"sidecar"``: an "evaluator" task beside the cluster (``tf.keras.utils.SidecarEvaluator``
  over ``tf.train.checkpoints_iterator``) looks for the latest checkpoint every ``poll_ns``;
  checkpoints written while it evaluates another are skipped (instants on its lane), and it
  stops after ``timeout_ns`` without a new one.

    run = simulate_evaluation(Exercise(strategy="parameter_server", workers=2,
                                       failures=("worker:1@250us+200us",)), "distributed")
    run.metadata["evaluation"]   # {"style", "metric", "visits", "evaluated", "skipped"...}
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from simdist.base.errors import InvalidArgumentError, brief
from simdist.distribute.rpc import ASSIGN_ADD
from simdist.training.ps_loop import cluster_and_layout, make_main, to_run_result

if TYPE_CHECKING:
    from simdist.training.exercises import Exercise, RunResult

STYLES = ("inline", "distributed", "exactly_once", "sidecar")
LANE = "evaluation"


def batches_of(examples: int, batch_size: int) -> list[np.ndarray]:
    """The example indices of each evaluation batch, in order (the last one may be short)."""
    return [np.arange(i, min(i + batch_size, examples)) for i in range(0, examples, batch_size)]


def result(style: str, total: float, visits: np.ndarray, **more) -> dict:
    """An evaluation's outcome: the mean loss over the visits counted and the visits."""
    visits = np.asarray(visits, np.int64)
    count = int(visits.sum())
    return {"style": style, "metric": float(total / count) if count else float("nan"),
            "visits": visits, "counted": count, **more}


def _loss_sum(model, weights, x, y) -> float:
    return float(np.sum(model.per_example_loss(weights, x, y), dtype=np.float64))


def evaluate_inline(ctx, model, weights: dict, x, y, batch_size: int, name="evaluate"):
    """Evaluate ``weights`` on this task's own device, batch by batch (``yield from``): one
    span on its "evaluation" lane. Inline direct evaluation on the coordinator, and what the
    side-car evaluator does with each checkpoint."""
    start, total = ctx.now, 0.0
    visits = np.zeros(len(x), np.int64)
    for idx in batches_of(len(x), batch_size):
        yield ctx.compute(name, flops=model.forward_flops(len(idx)))
        total += _loss_sum(model, weights, x[idx], y[idx])
        visits[idx] += 1
    ctx.span(LANE, name, "evaluation", start, ctx.now - start, examples=len(x))
    return total, visits


def distributed_functions(strategy, model, variables: dict, x, y, batch_size: int) -> dict:
    """What inline distributed evaluation needs on every rank (``PsProgram.build``): the
    metric variables on the ps (created with the model, as TF's guide creates its metrics in
    ``strategy.scope()``), ``eval_step`` and ``eval_dataset_fn`` registered by name."""
    batches = batches_of(len(x), batch_size)
    with strategy.scope():
        metric = strategy.variables({"eval_total": np.zeros(1, np.float64),
                                     "eval_visits": np.zeros(len(x), np.int64)})

    def eval_dataset_fn(input_context):  # this worker's shard of the batches, repeated
        mine = batches[input_context.input_pipeline_id::input_context.num_input_pipelines]
        return itertools.cycle(mine)

    def eval_step(iterator):
        idx = next(iterator)
        total = yield from strategy.run(
            lambda w: _loss_sum(model, w, x[idx], y[idx]), args=(variables,),
            flops=model.forward_flops(len(idx)), name="evaluate")
        seen = np.zeros(len(x), np.int64)
        seen[idx] = 1
        yield from strategy.extended.update(
            metric, {"eval_total": np.array([total]), "eval_visits": seen}, ASSIGN_ADD,
            name="update metric")

    strategy._cluster.register(eval_dataset_fn)
    strategy._cluster.register(eval_step)
    return {"metric": metric, "batches": batches, "eval_step": eval_step,
            "eval_dataset_fn": eval_dataset_fn}


def evaluate_distributed(ctx, coordinator, functions: dict):
    """Inline distributed evaluation, at-least-once (``yield from``): one ``eval_step`` per
    batch, scheduled; each adds its loss sum and visits to metric variables on the ps, which
    the coordinator reads at the end."""
    iterator = iter(coordinator.create_per_worker_dataset(functions["eval_dataset_fn"]))
    for _ in functions["batches"]:
        coordinator.schedule(functions["eval_step"], args=(iterator,))
    yield from coordinator.join()
    metric = yield from coordinator.strategy.read(functions["metric"], ctx=ctx)
    return float(metric["eval_total"][0]), metric["eval_visits"]


def exactly_once_functions(strategy, model, variables: dict, x, y, batch_size: int,
                           shards: int) -> dict:
    """What exactly-once evaluation needs on every rank: ``eval_shard`` registered."""
    batches = batches_of(len(x), batch_size)

    def eval_shard(shard):
        total, seen = 0.0, []
        for idx in batches[shard::shards]:
            total += yield from strategy.run(
                lambda w, idx=idx: _loss_sum(model, w, x[idx], y[idx]), args=(variables,),
                flops=model.forward_flops(len(idx)), name="evaluate")
            seen.append(idx)
        return np.float64(total), np.concatenate(seen) if seen else np.zeros(0, np.int64)

    strategy._cluster.register(eval_shard)
    return {"eval_shard": eval_shard, "shards": shards}


def evaluate_exactly_once(coordinator, functions: dict, examples: int):
    """Exactly-once evaluation (``yield from``): ``shards`` functions, shard ``i`` taking
    batches ``i, i + shards, ...`` with its own accumulators, returned; the coordinator
    adds up the results of the runs that ended (tf_keras's ``pss_evaluation_shards``)."""
    values = [coordinator.schedule(functions["eval_shard"], args=(i,))
              for i in range(functions["shards"])]
    yield from coordinator.join()
    total, visits = 0.0, np.zeros(examples, np.int64)
    for value in values:
        shard_total, seen = yield from value.fetch()
        total += float(shard_total)
        visits[seen] += 1
    return total, visits


CHECKPOINT_TAG = "checkpoint"


class CheckpointDirectory:
    """The ``model_dir`` that training writes checkpoints into and a side-car evaluator
    reads. The chief lists each checkpoint it writes (name, step, time its save began); a
    checkpoint is complete when its save has read every value from the parameter servers,
    and only then can the evaluator see it, as TF updates the directory's ``checkpoint`` file
    last. The files reach the evaluator as a message from the chief with their values: it
    reads them from shared storage in the same simulated time on any number of MPI ranks."""

    def __init__(self):
        self.checkpoints: list[dict] = []  # the chief's (on its rank)

    def save(self, ctx, step: int, weights, pending=None) -> None:
        """A checkpoint of ``step``: its ``weights``, or a ``pending`` save process whose
        value they are (a dict of values, "iterations" left out, or its error: then the
        checkpoint is never complete)."""
        entry = {"name": f"ckpt-{len(self.checkpoints)}", "step": step, "at": ctx.now,
                 "weights": weights}
        self.checkpoints.append(entry)
        ctx.instant(LANE, f"wrote {entry['name']}", "checkpoint", step=step)
        if pending is None:
            self._complete(ctx, entry, weights)
        else:
            pending.callbacks.append(lambda event: self._complete(ctx, entry, event.value))

    def _complete(self, ctx, entry: dict, values) -> None:
        if not isinstance(values, dict):
            return  # the save failed: no complete checkpoint
        entry["weights"] = {k: v for k, v in values.items() if k != "iterations"}
        ctx.send("evaluator:0", CHECKPOINT_TAG, {
            "index": np.array(self.checkpoints.index(entry)), "step": np.array(entry["step"]),
            **{f"weights/{k}": np.asarray(v) for k, v in entry["weights"].items()}})


def _watch(ctx, seen: list):
    """The evaluator's view of the directory (a daemon): every complete checkpoint, in the
    order they were completed, with the time it could first see it."""
    while True:
        msg = yield ctx.recv("chief:0", CHECKPOINT_TAG)
        files = msg.payload
        seen.append({"name": f"ckpt-{int(files['index'])}", "step": int(files["step"]),
                     "visible_at": ctx.now,
                     "weights": {k[len("weights/"):]: v for k, v in files.items()
                                 if k.startswith("weights/")}})


def sidecar_evaluator(ctx, model, x, y, batch_size: int, poll_ns: int, timeout_ns: int):
    """The evaluator task's program (``SidecarEvaluator.start()``): every ``poll_ns`` look
    at the latest complete checkpoint; a new one is evaluated, those completed since the
    last one evaluated are skipped; stop ``timeout_ns`` after the last new checkpoint."""
    evaluated, skipped, metrics, seen = [], [], {}, []
    ctx.process(_watch(ctx, seen), name="checkpoints_iterator", daemon=True)
    last, idle_since = -1, ctx.now
    while True:
        look = ctx.now
        if len(seen) - 1 > last:
            latest = seen[-1]
            for missed in seen[last + 1:-1]:
                skipped.append(missed["name"])
                ctx.instant(LANE, f"skipped {missed['name']}", "evaluation",
                            step=missed["step"])
            last = len(seen) - 1
            total, visits = yield from evaluate_inline(
                ctx, model, latest["weights"], x, y, batch_size,
                name=f"evaluate {latest['name']}")
            evaluated.append(latest["name"])
            metrics[latest["name"]] = result("sidecar", total, visits)["metric"]
            idle_since = ctx.now
        elif ctx.now - idle_since >= timeout_ns:
            break
        yield ctx.timeout(max(0, look + poll_ns - ctx.now))
    return {"evaluated": evaluated, "skipped": skipped, "metrics": metrics,
            "visible_at": {c["name"]: c["visible_at"] for c in seen}}


class Evaluation:
    """What ``PsProgram`` builds on every rank (``build``) and what ``coordinator_loop``
    calls: ``saved`` with every checkpoint, ``after_training`` once the training functions
    have ended, with the final weights (the last checkpoint)."""

    def __init__(self, style: str, x, y, batch_size: int, shards: int,
                 directory: CheckpointDirectory | None):
        self.style, self.x, self.y = style, x, y
        self.batch_size, self.shards, self.directory = batch_size, shards, directory
        self.functions: dict = {}

    def build(self, program) -> None:
        args = (program.strategy, program.model, program.variables, self.x, self.y,
                self.batch_size)
        if self.style == "distributed":
            self.functions = distributed_functions(*args)
        elif self.style == "exactly_once":
            self.functions = exactly_once_functions(*args, self.shards)

    def saved(self, ctx, step: int, pending) -> None:
        """A checkpoint after ``step`` steps, whose values the ``pending`` save reads."""
        if self.directory is not None:
            self.directory.save(ctx, step, None, pending)

    def after_training(self, ctx, coordinator, program, final_weights):
        """``final_weights()``: the last checkpoint's values (``yield from``)."""
        x, y, b = self.x, self.y, self.batch_size
        if self.style == "inline":
            weights = yield from final_weights()
            total, visits = yield from evaluate_inline(ctx, program.model, weights, x, y, b)
        elif self.style == "distributed":
            total, visits = yield from evaluate_distributed(ctx, coordinator, self.functions)
        elif self.style == "exactly_once":
            total, visits = yield from evaluate_exactly_once(coordinator, self.functions,
                                                             len(x))
        else:
            return {"style": self.style}
        return result(self.style, total, visits)


def evaluation_program(exercise: Exercise, style: str, eval_examples: int = 256,
                       eval_batch: int = 32, shards: int = 4, poll_ns: int = 500_000,
                       timeout_ns: int = 2_000_000):
    """(jobs, main, finish) of a run that trains ``exercise`` (a parameter_server one) and
    evaluates it in ``style``: the cluster ({job: tasks}, an "evaluator" for the sidecar),
    every task's main, and ``finish(run, result)`` that completes the RunResult's
    ``metadata["evaluation"]`` (``simulate_evaluation`` and ``simdist run parameter_server
    --evaluation STYLE`` run it)."""
    if style not in STYLES:
        raise InvalidArgumentError(f"evaluation style {brief(style)}: expected one of "
                                   f"{', '.join(STYLES)}")
    for label, value in (("eval_examples", eval_examples), ("eval_batch", eval_batch),
                         ("shards", shards), ("poll_ns", poll_ns), ("timeout_ns", timeout_ns)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{label} must be an int >= 1, got {brief(value)}")
    exercise.validate()
    model, data = exercise.build()
    if eval_examples > len(data.x):
        raise InvalidArgumentError(f"eval_examples={eval_examples}: the dataset has only "
                                   f"{len(data.x)} examples")
    x, y = data.x[:eval_examples], data.y[:eval_examples]
    spec, _ = cluster_and_layout(exercise)
    jobs = {job: spec.num_tasks(job) for job in ("chief", "worker", "ps")}
    directory = None
    if style == "sidecar":
        jobs["evaluator"] = 1
        directory = CheckpointDirectory()
    evaluation = Evaluation(style, x, y, eval_batch, shards, directory)
    training = make_main(exercise, evaluation)

    def main(ctx):
        if ctx.task_type == "evaluator":
            return sidecar_evaluator(ctx, model, x, y, eval_batch, poll_ns, timeout_ns)
        return training(ctx)

    def finish(run: RunResult, out) -> RunResult:
        if style == "sidecar":
            run.metadata["evaluation"] = {**run.metadata["evaluation"],
                                          **out.returns["evaluator:0"],
                                          "checkpoints": directory.checkpoints}
        return run

    return jobs, main, finish


def simulate_evaluation(exercise: Exercise, style: str, eval_examples: int = 256,
                        eval_batch: int = 32, shards: int = 4, poll_ns: int = 500_000,
                        timeout_ns: int = 2_000_000, trace: bool = True,
                        transport=None) -> RunResult | None:
    """Train ``exercise`` (a parameter_server one) and evaluate it in ``style`` on its first
    ``eval_examples`` examples; the outcome in ``metadata["evaluation"]``. ``transport`` (an
    ``MPITransport``, under mpiexec): the tasks spread over its ranks; rank 0 gets the run
    (the same as in one process), the others None."""
    from simdist.hardware.devices import Hardware, HardwareCatalog
    from simdist.sim.scheduler import simulate

    jobs, main, finish = evaluation_program(exercise, style, eval_examples, eval_batch,
                                            shards, poll_ns, timeout_ns)
    _, layout = cluster_and_layout(exercise)
    hardware = Hardware.from_catalog(HardwareCatalog.default(), exercise.hardware, layout)
    out = simulate(jobs, main, hardware=hardware, seed=exercise.seed, trace=trace,
                   transport=transport,
                   metadata={"program": f"{exercise.strategy} evaluation {style}"})
    if out.rank != 0:
        return None
    return finish(to_run_result(exercise, out, hardware), out)

def describe(evaluation: dict) -> str:
    """One line saying what an evaluation found (``simdist run parameter_server
    --evaluation STYLE`` and ``realdist run ...`` print it)."""
    if evaluation["style"] == "sidecar":
        metrics = ", ".join(f"{name} {evaluation['metrics'][name]:.6f}"
                            for name in evaluation["evaluated"])
        return (f"evaluation sidecar: {len(evaluation['checkpoints'])} checkpoints, evaluated "
                f"{metrics or 'none'}; skipped {', '.join(evaluation['skipped']) or 'none'}")
    visits = np.asarray(evaluation["visits"])
    return (f"evaluation {evaluation['style']}: loss {evaluation['metric']:.6f} over "
            f"{evaluation['counted']} counted visits of {len(visits)} examples "
            f"({int((visits > 1).sum())} counted more than once, "
            f"{int((visits == 0).sum())} never)")


__all__ = ["CheckpointDirectory", "STYLES", "describe", "distributed_functions",
           "evaluate_distributed", "evaluate_exactly_once", "evaluate_inline",
           "evaluation_program", "exactly_once_functions", "sidecar_evaluator",
           "simulate_evaluation"]
