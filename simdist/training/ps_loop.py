"""An exercise trained with ParameterServerStrategy and a ClusterCoordinator: TF's custom
training loop for parameter-server training, on a simulated cluster of one chief (the
coordinator), ``workers`` workers and ``ps`` parameter servers.

The coordinator schedules ``steps / steps_per_execution`` functions, each running
``steps_per_execution`` steps on whichever worker is free: read the variables from their ps,
compute the gradient of the worker's own batch, send it to the ps, which apply SGD, and add
one to the optimizer's ``iterations`` (a variable every step reads and writes: the hot one).
The embedding model looks up only its batch's rows of the table, shard by shard, and sends
back only their gradients (TF's ``IndexedSlices``).
At the end of every epoch (``steps_per_epoch`` steps) the coordinator joins and saves a
checkpoint. Failures come from the exercise (``failures``: "worker:1@2ms+1ms" fails worker 1
at 2 ms of simulated time and brings it back 1 ms later): a worker's function runs again; a
ps failure cancels the epoch, and the coordinator restores the last checkpoint once the ps is
back, starting again at epoch ``iterations // steps_per_epoch``, as TF's tutorial does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from simdist.hardware.cluster import ClusterSpec
from simdist.training.data import global_batches
from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.base.errors import FailedPreconditionError, UnavailableError
from simdist.distribute.cluster_coordinator import ClusterCoordinator
from simdist.distribute.failures import check_failures
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
from simdist.distribute.rpc import ASSIGN_ADD, SGD
from simdist.distribute.server import InProcessCluster
from simdist.distribute.sharded_variable import IndexedSlices, MinSizePartitioner
from simdist.training.loop import TrainingLoop

if TYPE_CHECKING:
    from simdist.training.exercises import Exercise, RunResult

STEP_LANE = "train"
#: shards of at least 256 B, at most one per ps: a model of a few KiB spreads over the ps
MIN_SHARD_BYTES = 256


def cluster_and_layout(exercise: Exercise) -> tuple[ClusterSpec, Layout]:
    """A chief, the workers and the ps, one task per machine, one device each."""
    return (ClusterSpec({"chief": 1, "worker": exercise.workers, "ps": exercise.ps}),
            Layout(tasks_per_machine=1, devices_per_task=1))


def make_main(exercise: Exercise, evaluation=None):
    """Every task's main for one run: servers on workers and ps, the loop on the chief.
    Each rank builds the same ``PsProgram`` (the model, the strategy's variables, the
    registered functions) before its tasks run; the chief coordinates."""
    cluster = InProcessCluster(check_failures(exercise))
    program = PsProgram(exercise, cluster, evaluation)

    def main(ctx):
        if ctx.task_type != "chief":
            return _serve(ctx, cluster.server(ctx), program)
        return coordinator_loop(ctx, program)
    return main


def _serve(ctx, server, program):
    """A server task's main: the program built on this rank (its ps holds its variables'
    values from then), then ``server.join()``."""
    program.build(ctx)
    return (yield from server.join())


class PsProgram:
    """What every rank builds of one run, the same way and in the same order, at time 0, as
    TF's coordinator program would on each task: the model, the strategy and its variables
    (each ps keeps the values of its own), ``step_fn`` and ``dataset_fn`` registered by name
    (what the coordinator's "run" messages name) and what the evaluation needs."""

    def __init__(self, exercise: Exercise, cluster: InProcessCluster, evaluation=None):
        self.exercise, self.cluster, self.evaluation = exercise, cluster, evaluation
        self.strategy = None

    def build(self, ctx) -> PsProgram:
        if self.strategy is not None:
            return self
        exercise, cluster = self.exercise, self.cluster
        self.model, self.data = model, data = exercise.build()
        self.strategy = strategy = ParameterServerStrategy(
            ctx, cluster.resolver(ctx),
            variable_partitioner=MinSizePartitioner(MIN_SHARD_BYTES, max_shards=exercise.ps))
        self.initial = model.init(exercise.seed)
        with strategy.scope():
            self.variables = variables = strategy.variables(self.initial)
            self.iterations = iterations = strategy.variable("iterations", np.int64(0))
        b = exercise.global_batch
        sgd = SGD(np.float32(exercise.learning_rate))
        table = "embedding" if model.name == "embedding" else None  # looked up, not read

        def dataset_fn(input_context):
            seed = exercise.seed * 1009 + input_context.input_pipeline_id
            return global_batches(data, b, exercise.steps, seed)

        def step_fn(iterator, steps):
            losses = []
            for _ in range(steps):
                x, y = next(iterator)
                dense, rows, ids = variables, None, None
                if table is not None:  # only the rows of this batch's ids, from their shards
                    ids, x = np.unique(x, return_inverse=True)
                    x = x.reshape(-1, data.x.shape[1])
                    rows = yield from strategy.embedding_lookup(variables[table], ids)
                    dense = {k: v for k, v in variables.items() if k != table}

                def replica_fn(x, y, w, it, rows):
                    if rows is not None:
                        w = {**w, table: rows}
                    loss = float(np.mean(model.per_example_loss(w, x, y)))
                    return loss, model.gradients(w, x, y, np.float32(1.0) / np.float32(len(x)))

                loss, grads = yield from strategy.run(
                    replica_fn, args=(x, y, dense, iterations, rows), flops=model.flops(len(x)),
                    name="forward+backward")
                if table is not None:
                    grads[table] = IndexedSlices(grads[table], ids)
                yield from strategy.extended.update(variables, grads, sgd, name="apply SGD")
                yield from strategy.extended.update({"iterations": iterations},
                                                    {"iterations": np.int64(1)}, ASSIGN_ADD)
                losses.append(loss)
            return losses

        self.dataset_fn, self.step_fn = cluster.register(dataset_fn), cluster.register(step_fn)
        self.functions = {"dataset_fn": dataset_fn, "step_fn": step_fn}
        if self.evaluation is not None:
            self.evaluation.build(self)
        return self


def coordinator_loop(ctx, program: PsProgram):
    """The chief's program. Returns (losses, final weights, step times, strategy, metadata).
    ``program.evaluation`` (see evaluation.py) sees every checkpoint (``saved``) and
    evaluates after training (``after_training``, its result in the metadata's
    "evaluation"). Checkpoints are reads of the variables from their ps; a restore assigns
    them there."""
    program.build(ctx)
    exercise, strategy, evaluation = program.exercise, program.strategy, program.evaluation
    variables, iterations = program.variables, program.iterations
    cluster = program.cluster
    strategy.ctx = ctx  # the coordinator (this rank's program may have been built by another)
    coordinator = ClusterCoordinator(strategy)
    k = exercise.steps_per_execution
    steps_per_epoch = steps_per_epoch_of(exercise, len(program.data.x))
    iterator = iter(coordinator.create_per_worker_dataset(program.functions["dataset_fn"]))
    step_fn = program.functions["step_fn"]
    # the coordinator made the initial values: its first checkpoint needs no read
    checkpoints = _Checkpoints(ctx, strategy, {**variables, "iterations": iterations},
                               {name: np.asarray(var) for name, var in program.initial.items()}
                               | {"iterations": np.asarray(np.int64(0))}, evaluation)
    by_epoch: dict[int, list] = {}
    epochs = math.ceil(exercise.steps / steps_per_epoch)
    epoch, restores = 0, 0
    incarnations = _ps_incarnations(cluster, exercise.ps)
    while True:
        start, epoch_losses = ctx.now, []
        if epoch == epochs:
            break
        try:
            todo = min(steps_per_epoch, exercise.steps - epoch * steps_per_epoch)
            values = []
            while todo > 0:
                values.append(coordinator.schedule(step_fn, args=(iterator, min(k, todo))))
                todo -= k
            yield from coordinator.join()
            for value in values:
                epoch_losses.extend(float(x) for x in (yield from value.fetch()))
            failed = yield from checkpoints.wait()  # the last epoch's checkpoint
            if failed is not None:
                raise failed
        except (UnavailableError, FailedPreconditionError) as error:
            if _ps_incarnations(cluster, exercise.ps) == incarnations:
                raise  # not a ps failure
            # a ps failed (or came back without its variables): restore the last checkpoint
            ctx.instant(STEP_LANE, "ps failure: restore the checkpoint", "fault",
                        error=str(error))
            yield from checkpoints.wait()
            checkpoint = checkpoints.last
            incarnations = yield from _restore(ctx, cluster, exercise.ps, strategy,
                                               checkpoints.variables, checkpoint)
            restores += 1
            epoch = int(checkpoint["iterations"]) // steps_per_epoch  # TF's starting_epoch
            by_epoch = {e: got for e, got in by_epoch.items() if e < epoch}
            ctx.instant(STEP_LANE, f"restored: start again at epoch {epoch}", "checkpoint",
                        iterations=int(checkpoint["iterations"]))
            continue
        by_epoch[epoch] = epoch_losses
        checkpoints.save(epoch, start, min((epoch + 1) * steps_per_epoch, exercise.steps))
        epoch += 1
    losses = [loss for e in sorted(by_epoch) for loss in by_epoch[e]]

    def final_weights():  # the last checkpoint's read (``yield from``)
        failed = yield from checkpoints.wait()
        if failed is not None:  # a ps failed while the last checkpoint was saved
            raise failed
        return {name: checkpoints.last[name] for name in variables}
    evaluated = {} if evaluation is None else {"evaluation": (
        yield from evaluation.after_training(ctx, coordinator, program, final_weights))}
    times = [ctx.now // max(1, len(losses))] * len(losses)  # throughput: async steps overlap
    weights = yield from final_weights()
    pending = cluster.end_training(ctx)  # failures after the end: none happens
    runs = {"functions": coordinator._scheduled, "restores": restores, "trained_ns": ctx.now,
            "failures_never_happened": [str(p.failure) for p in pending if not p.restart],
            "down_at_the_end": [p.failure.task for p in pending if p.restart],
            "ps_bytes_stored": strategy.ps_load(),
            "shards": {name: [v.device for v in getattr(var, "variables", [var])]
                       for name, var in variables.items()},
            "shard_shapes": {name: [list(v.shape) for v in getattr(var, "variables", [var])]
                             for name, var in variables.items()},
            **evaluated}
    return losses, weights, times, repr(strategy), runs


class _Checkpoints:
    """The coordinator's checkpoints, one after each epoch: every variable saved from its
    ps ("save" requests, a read of each) by a process of the coordinator's own, so that it
    goes on scheduling the next epoch meanwhile (TF's asynchronous checkpoints: the saves
    reach each ps before the next epoch's first update can, one scheduling overhead and a
    round trip later). ``last`` is the newest checkpoint completed."""

    def __init__(self, ctx, strategy, variables: dict, initial: dict, evaluation):
        self.ctx, self.strategy, self.variables = ctx, strategy, variables
        self.last, self.evaluation, self.pending = initial, evaluation, None

    def save(self, epoch: int, start: int, step: int) -> None:
        self.pending = self.ctx.process(self._save(epoch, start, self.ctx.now),
                                        name=f"checkpoint after epoch {epoch}")
        if self.evaluation is not None:  # written when the reads are back
            self.evaluation.saved(self.ctx, step, self.pending)

    def _save(self, epoch: int, start: int, end: int):
        ctx = self.ctx
        try:
            values = yield from self.strategy.save(self.variables, ctx)
        except (UnavailableError, FailedPreconditionError) as error:
            return error
        self.last = values
        ctx.span(STEP_LANE, f"epoch {epoch}", "step", start, end - start, epoch=epoch,
                 iterations=int(values["iterations"]))
        ctx.instant(STEP_LANE, f"checkpoint after epoch {epoch}", "checkpoint")
        return values

    def wait(self):
        """Wait for the checkpoint in progress (``yield from``); its error, or None."""
        pending, self.pending = self.pending, None
        if pending is None:
            return None
        if not pending.triggered:
            yield pending
        return pending.value if isinstance(pending.value, Exception) else None


def _ps_incarnations(cluster: InProcessCluster, ps: int) -> list[int]:
    """How often each ps has failed, as this rank's mirror of their states says."""
    return [cluster.state(f"ps:{i}").incarnation for i in range(ps)]


def _restore(ctx, cluster, ps: int, strategy, saved: dict, checkpoint: dict):
    """Wait for every ps to be up, then assign the checkpoint's values on them (``yield
    from``; again if a ps fails meanwhile); the ps incarnations it restored."""
    while True:
        for i in range(ps):
            state = cluster.state(f"ps:{i}")
            while not state.up:
                yield state.restarted
        incarnations = _ps_incarnations(cluster, ps)
        try:
            yield from strategy.restore(saved, checkpoint, ctx=ctx)
        except (UnavailableError, FailedPreconditionError):
            continue
        return incarnations


def steps_per_epoch_of(exercise: Exercise, examples: int) -> int:
    """Steps of one pass over the data (at least ``steps_per_execution``, a multiple of
    it)."""
    k = exercise.steps_per_execution
    steps = max(1, examples // exercise.global_batch)
    return max(k, steps - steps % k)


def simulate(exercise: Exercise, transport=None, trace: bool = True,
                      catalog: HardwareCatalog | None = None) -> RunResult:
    """Simulate a parameter_server exercise; its ``RunResult`` (from the chief; None on
    the other MPI ranks)."""
    from simdist.sim.scheduler import simulate

    exercise.validate()
    exercise.build()
    cluster, layout = cluster_and_layout(exercise)
    hardware = Hardware.from_catalog(catalog or HardwareCatalog.default(), exercise.hardware,
                                     layout)
    result = simulate(cluster, make_main(exercise), hardware=hardware, seed=exercise.seed,
                      trace=trace, transport=transport, metadata={"program": exercise.strategy})
    if result.rank != 0:
        return None
    return to_run_result(exercise, result, hardware)


def to_run_result(exercise: Exercise, result, hardware: Hardware) -> RunResult:
    from simdist.training.exercises import RunResult

    losses, weights, times, strategy, runs = result.returns["chief:0"]
    metadata = {"strategy": strategy, "workers": exercise.workers, "ps": exercise.ps,
                "hardware": hardware.system.name, "device": hardware.device.name,
                "simulated_time_ns": result.end_time, "transport": result.transport,
                "ranks": result.ranks, **runs}
    if result.trace is not None:
        metadata["function_runs"] = _function_runs(result.trace)
        moved = {c.pid: c.values["bytes_moved"] for c in result.trace.counters
                 if c.name == "ps load" and "bytes_moved" in c.values}
        metadata["ps_bytes_moved_per_step"] = {ps: moved.get(ps, 0) // max(1, len(losses))
                                               for ps in metadata["ps_bytes_stored"]}
    return RunResult("simdist", exercise, losses, weights, times, metadata, result.trace)


def _function_runs(trace) -> dict:
    """How many times each function ran (more than once after a worker failure)."""
    runs: dict[str, int] = {}
    for span in trace.spans:
        if span.cat == "function":
            name = span.args.get("function", span.name)
            runs[name] = runs.get(name, 0) + 1
    return runs


LOOP = TrainingLoop(cluster_and_layout, make_main, to_run_result, simulate)
