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
from simdist.base.errors import FailedPreconditionError, InvalidArgumentError, UnavailableError
from simdist.distribute.cluster_coordinator import ClusterCoordinator
from simdist.distribute.failures import check_failures
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
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


def make_main(exercise: Exercise):
    """Every task's main for one run: servers on workers and ps, the loop on the chief."""
    cluster = InProcessCluster()
    failures = check_failures(exercise)

    def main(ctx):
        if ctx.task_type != "chief":
            return cluster.server(ctx).join()
        return coordinator_loop(ctx, exercise, cluster, failures)
    return main


def coordinator_loop(ctx, exercise: Exercise, cluster: InProcessCluster, failures,
                     evaluation=None):
    """The chief's program. Returns (losses, final weights, step times, strategy, metadata).
    ``evaluation`` (see evaluation.py) sees every checkpoint (``saved``) and evaluates after
    training (``after_training``, its result in the metadata's "evaluation")."""
    model, data = exercise.build()
    for f in failures:
        cluster.schedule_failure(f.task, f.at_ns, f.down_ns)
    strategy = ParameterServerStrategy(
        ctx, cluster.resolver(ctx),
        variable_partitioner=MinSizePartitioner(MIN_SHARD_BYTES, max_shards=exercise.ps))
    with strategy.scope():
        variables = strategy.variables(model.init(exercise.seed))
        iterations = strategy.variable("iterations", np.int64(0))
    coordinator = ClusterCoordinator(strategy)
    b, k = exercise.global_batch, exercise.steps_per_execution
    lr = np.float32(exercise.learning_rate)
    steps_per_epoch = steps_per_epoch_of(exercise, len(data.x))

    def dataset_fn(input_context):
        seed = exercise.seed * 1009 + input_context.input_pipeline_id
        return global_batches(data, b, exercise.steps, seed)

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    table = "embedding" if model.name == "embedding" else None  # looked up, not read

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
            yield from strategy.extended.update(variables, grads, lambda v, g: v - lr * g,
                                                name="apply SGD")
            yield from strategy.extended.update({"iterations": iterations},
                                                {"iterations": np.int64(1)},
                                                lambda v, one: v + one)
            losses.append(loss)
        return losses

    checkpoint = _save(cluster, variables, iterations)
    losses = []
    epochs = math.ceil(exercise.steps / steps_per_epoch)
    epoch, restores = 0, 0
    while epoch < epochs:
        start = ctx.now
        todo = min(steps_per_epoch, exercise.steps - epoch * steps_per_epoch)
        values, epoch_losses = [], []
        try:
            while todo > 0:
                values.append(coordinator.schedule(step_fn, args=(iterator, min(k, todo))))
                todo -= k
            yield from coordinator.join()
            for value in values:
                epoch_losses.extend(float(x) for x in (yield from value.fetch()))
            checkpoint = _save(cluster, variables, iterations)
            if evaluation is not None:
                evaluation.saved(ctx, checkpoint)
        except (UnavailableError, FailedPreconditionError) as error:
            if not any(v.lost for v in cluster.variables):
                raise  # not a ps failure
            # a ps failed (or came back without its variables): restore the last checkpoint
            ctx.instant(STEP_LANE, "ps failure: restore the checkpoint", "fault",
                        error=str(error))
            for ps in range(exercise.ps):
                state = cluster.state(f"ps:{ps}")
                while not state.up:
                    yield state.restarted
            _restore(checkpoint, variables, iterations)
            restores += 1
            epoch = int(iterations.numpy()) // steps_per_epoch  # TF's starting_epoch
            ctx.instant(STEP_LANE, f"restored: start again at epoch {epoch}", "checkpoint",
                        iterations=int(iterations.numpy()))
            continue
        losses.extend(epoch_losses)
        ctx.span(STEP_LANE, f"epoch {epoch}", "step", start, ctx.now - start, epoch=epoch,
                 iterations=int(iterations.numpy()))
        ctx.instant(STEP_LANE, f"checkpoint after epoch {epoch}", "checkpoint")
        epoch += 1
    evaluated = {} if evaluation is None else {"evaluation": (
        yield from evaluation.after_training(ctx, coordinator, model, variables))}
    runs = {"functions": coordinator._scheduled, "restores": restores,
            "ps_bytes_stored": strategy.ps_load(),
            "shards": {name: [v.device for v in getattr(var, "variables", [var])]
                       for name, var in variables.items()},
            "shard_shapes": {name: [list(v.shape) for v in getattr(var, "variables", [var])]
                             for name, var in variables.items()},
            **evaluated}
    weights = {name: var.numpy() for name, var in variables.items()}
    times = [ctx.now // max(1, len(losses))] * len(losses)  # throughput: async steps overlap
    return losses, weights, times, repr(strategy), runs


def steps_per_epoch_of(exercise: Exercise, examples: int) -> int:
    """Steps of one pass over the data (at least ``steps_per_execution``, a multiple of
    it)."""
    k = exercise.steps_per_execution
    steps = max(1, examples // exercise.global_batch)
    return max(k, steps - steps % k)


def _save(cluster: InProcessCluster, variables: dict, iterations):
    """A checkpoint: the values of every variable and the optimizer's step count (an
    ``UnavailableError`` while a ps is down, or back without its variables)."""
    down = sorted({v.task for v in cluster.variables if v.lost})
    if down:
        raise UnavailableError(f"cannot save a checkpoint: {', '.join(down)} failed and lost "
                               "its variables")
    return {name: var.numpy() for name, var in variables.items()} | {
        "iterations": iterations.numpy()}


def _restore(checkpoint, variables, iterations) -> None:
    for name, var in variables.items():
        var.assign(checkpoint[name])
        for part in getattr(var, "variables", [var]):
            part.lost = False
    iterations.assign(checkpoint["iterations"])
    iterations.lost = False


def simulate(exercise: Exercise, transport=None, trace: bool = True,
                      catalog: HardwareCatalog | None = None) -> RunResult:
    """Simulate a parameter_server exercise; its ``RunResult`` (from the chief)."""
    from simdist.sim.scheduler import simulate

    exercise.validate()
    exercise.build()
    cluster, layout = cluster_and_layout(exercise)
    hardware = Hardware.from_catalog(catalog or HardwareCatalog.default(), exercise.hardware,
                                     layout)
    _check_transport(transport)
    result = simulate(cluster, make_main(exercise), hardware=hardware, seed=exercise.seed,
                      trace=trace, transport=transport, metadata={"program": exercise.strategy})
    return to_run_result(exercise, result, hardware)


def _check_transport(transport) -> None:
    if transport is not None and getattr(transport, "size", 1) > 1:
        raise InvalidArgumentError(
            "parameter_server runs in one process (the in-process transport): its scheduled "
            "functions are Python code, which does not travel between MPI ranks")


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
