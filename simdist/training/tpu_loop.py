"""An exercise trained with TPUStrategy: the synchronous custom training loop of
``simdist.training.sync_loop`` on one TPU slice (this task's devices are its cores), with
``steps_per_execution`` steps per host dispatch. Its ``RunResult`` adds the slice's shape and
the cores' ``utilization`` (busy time / wall time of core 0, from the trace)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simdist.training import sync_loop as synchronous
from simdist.distribute.tpu_strategy import HOST_LOOP_OVERHEAD_NS, utilization
from simdist.training.loop import TrainingLoop

if TYPE_CHECKING:
    from simdist.training.exercises import Exercise, RunResult

def to_run_result(exercise: Exercise, result, hardware) -> RunResult:
    """The synchronous loop's ``RunResult`` with the TPU's utilization in its metadata."""
    run = synchronous.to_run_result(exercise, result, hardware)
    run.metadata["steps_per_execution"] = exercise.steps_per_execution
    run.metadata["host_loop_overhead_ns"] = HOST_LOOP_OVERHEAD_NS
    if result.trace is not None:
        run.metadata["utilization"] = round(utilization(result.trace), 4)
        sent = sum(s.args.get("ici_bytes_per_chip", 0) for s in result.trace.spans
                   if s.pid == "worker:0" and s.lane == "TPU:0")
        run.metadata["ici_bytes_per_chip_per_step"] = sent // max(1, exercise.steps)
    return run


def simulate(exercise: Exercise, transport=None, trace: bool = True,
                      catalog=None) -> RunResult:
    """Simulate a TPUStrategy exercise; the chief's ``RunResult`` (None on other ranks)."""
    return synchronous.simulate_synchronous(exercise, to_run_result, transport, trace, catalog)


LOOP = TrainingLoop(synchronous.cluster_and_layout, synchronous.make_main, to_run_result,
                    simulate)
