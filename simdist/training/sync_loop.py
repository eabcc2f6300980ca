"""A synchronous data-parallel exercise simulated with simdist.distribute: the custom training
loop every worker task runs, and its ``LOOP`` record (``simdist.training.loop``).

The loop is TF's custom-training-loop recipe: distribute the dataset, ``strategy.run`` the
replica step (per-example loss scaled by ``compute_average_loss`` over the global batch,
gradients), all-reduce the gradients (SUM), apply SGD to every copy of the variables, and
``strategy.reduce`` the loss. Each of those shows in the trace: compute spans on every
replica's device, the all-reduce's messages, the update, and a "step k" span per step. With
the exercise's ``stragglers`` each worker's forward+backward time at step s is multiplied by
its seeded draw for step s (``Stragglers.factors(seed, worker)``), one factor for all its
replicas, as one slow machine: the all-reduce then waits for the slowest worker. On a
calibrated profile (``simdist calibrate``) each step starts with the host's own work, an
"input + dispatch" span (``TaskContext.host_step`` prices the strategy's ``HostStep``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simdist.hardware.cluster import ClusterSpec
from simdist.collectives import ReduceOp
from simdist.training.data import global_batches
from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.distribute.registry import strategy_named
from simdist.distribute.central_storage_strategy import CentralStorageStrategy
from simdist.distribute.strategy import Strategy, compute_average_loss
from simdist.distribute.tpu_strategy import TPUStrategy
from simdist.training.loop import TrainingLoop

if TYPE_CHECKING:  # simdist.training.exercises imports this package (for the strategy records)
    from simdist.training.exercises import Exercise, RunResult

STEP_LANE = "train"


def make_strategy(ctx, exercise: Exercise) -> Strategy:
    """The strategy an exercise names, on this task (its record's ``make``)."""
    return strategy_named(exercise.strategy).make(ctx, exercise)


def cluster_and_layout(exercise: Exercise) -> tuple[ClusterSpec, Layout]:
    """One worker task per machine, ``devices_per_worker`` devices each."""
    return (ClusterSpec({"worker": exercise.num_workers}),
            Layout(tasks_per_machine=1, devices_per_task=exercise.devices_per_worker))


def make_main(exercise: Exercise):
    """Every task's main for one run of the exercise."""
    return lambda ctx: train(ctx, exercise)


def train(ctx, exercise: Exercise):
    """The training program of one worker task (a generator for ``simulate``). Returns
    (losses, final weights, step times in ns, description of the strategy)."""
    model, data = exercise.build()
    strategy = make_strategy(ctx, exercise)
    with strategy.scope():
        variables = strategy.variables(model.init(exercise.seed))
    lr = np.float32(exercise.learning_rate)
    losses, times = [], []
    draws = exercise.straggler_draws()  # one factor per step for this worker (its replicas')
    factors = draws.factors(exercise.seed, ctx.task_id, exercise.steps) if draws.active \
        else [1.0] * exercise.steps
    batches = global_batches(data, exercise.global_batch, exercise.steps, exercise.seed)
    for step, batch in enumerate(strategy.experimental_distribute_dataset(batches)):
        start = ctx.now
        b = batch.global_batch_size
        x, y = batch
        yield ctx.host_step(strategy.host_step(sum(v.nbytes for v in (*x.values, *y.values))))

        def replica_step(x, y, w):
            loss = compute_average_loss(model.per_example_loss(w, x, y), b)
            return loss, model.gradients(w, x, y, np.float32(1.0) / np.float32(b))

        loss, grads = yield from strategy.run(
            replica_step, args=(x, y, variables), name="forward+backward",
            flops=lambda r: model.flops(len(x.values[r])), ops=model.num_ops,
            time_factor=factors[step])
        grads = yield from strategy.extended.batch_reduce_to(ReduceOp.SUM, grads)
        yield from strategy.extended.update(variables, grads, lambda v, g: v - lr * g,
                                            name="apply SGD")
        total = yield from strategy.reduce(ReduceOp.SUM, loss)
        losses.append(float(total))
        times.append(ctx.now - start)
        ctx.span(STEP_LANE, f"step {step}", "step", start, ctx.now - start, step=step,
                 loss=float(total), global_batch=b)
    return losses, {k: v.numpy() for k, v in variables.items()}, times, repr(strategy), \
        _reduction(strategy)


def _reduction(strategy: Strategy) -> str:
    """How the strategy combines the replicas' gradients, in words for the report."""
    if isinstance(strategy, CentralStorageStrategy) and strategy._central:
        return "sent to the host CPU and added there"
    if strategy.num_replicas_in_sync == 1:
        return "none (one replica)"
    if isinstance(strategy, TPUStrategy):
        return f"one fused all-reduce per step over the {strategy.topology[0]}x" \
               f"{strategy.topology[1]} ICI torus"
    return str(strategy._cross_device_ops())


def simulate_synchronous(exercise: Exercise, to_result, transport=None, trace: bool = True,
                         catalog: HardwareCatalog | None = None, tasks=None):
    """Simulate this module's training loop; ``to_result(exercise, result, hardware)`` of the
    chief (None on the other MPI ranks). ``tasks(exercise)`` gives the cluster and layout
    (default: ``cluster_and_layout``)."""
    from simdist.sim.scheduler import simulate

    exercise.validate()
    exercise.build()  # model and dataset errors before any simulation
    cluster, layout = (tasks or cluster_and_layout)(exercise)
    hardware = Hardware.from_catalog(catalog or HardwareCatalog.default(), exercise.hardware,
                                     layout)
    result = simulate(cluster, lambda ctx: train(ctx, exercise), hardware=hardware,
                      seed=exercise.seed, trace=trace, transport=transport,
                      metadata={"program": exercise.strategy})
    if result.rank != 0:
        return None
    return to_result(exercise, result, hardware)


def to_run_result(exercise: Exercise, result, hardware: Hardware) -> RunResult:
    """The chief's ``RunResult`` from a finished simulation."""
    from simdist.training.exercises import RunResult

    losses, weights, times, strategy, ops = result.returns["worker:0"]
    moved = 0
    if result.trace is not None:
        moved = sum(f.args.get("bytes", 0) for f in result.trace.flows)
    metadata = {"strategy": strategy, "cross_device_ops": ops,
                "num_replicas_in_sync": exercise.num_replicas, "workers": exercise.num_workers,
                "hardware": hardware.system.name, "device": hardware.device.name,
                "simulated_time_ns": result.end_time, "transport": result.transport,
                "ranks": result.ranks, "bytes_moved_per_step": moved // max(1, len(times))}
    draws = exercise.straggler_draws()
    if draws.active:  # how the steps' compute times were drawn
        metadata["stragglers"] = (f"{draws.describe()}, one draw per worker and step (its "
                                  f"replicas share it), seed {exercise.seed}")
    return RunResult("simdist", exercise, losses, weights, times, metadata, result.trace)


def _simulate(exercise: Exercise, transport=None, trace: bool = True,
              catalog: HardwareCatalog | None = None) -> RunResult:
    return simulate_synchronous(exercise, to_run_result, transport, trace, catalog)


LOOP = TrainingLoop(cluster_and_layout, make_main, to_run_result, _simulate)
