"""An exercise trained with TPUStrategy: the synchronous custom training loop of
``simdist.training.sync_loop`` on one TPU slice (one task per host of the slice, its devices
the host's cores: ``--replicas 32`` is a v3-32, 4 hosts), with ``steps_per_execution`` steps
per host dispatch. Its ``RunResult`` adds the slice's shape and
the cores' ``utilization`` (busy time / wall time of core 0, from the trace)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simdist.hardware.cluster import ClusterSpec
from simdist.hardware.devices import Layout
from simdist.training import sync_loop as synchronous
from simdist.distribute.tpu_strategy import HOST_LOOP_OVERHEAD_NS, slice_hosts, utilization
from simdist.training.loop import TrainingLoop

if TYPE_CHECKING:
    from simdist.training.exercises import Exercise, RunResult

def cluster_and_layout(exercise: Exercise) -> tuple[ClusterSpec, Layout]:
    """One worker task per host of the slice, the host's cores its devices."""
    hosts, cores = slice_hosts(exercise.devices_per_worker)
    return ClusterSpec({"worker": hosts}), Layout(tasks_per_machine=1, devices_per_task=cores)


def to_run_result(exercise: Exercise, result, hardware) -> RunResult:
    """The synchronous loop's ``RunResult`` with the TPU's utilization in its metadata."""
    run = synchronous.to_run_result(exercise, result, hardware)
    run.metadata["steps_per_execution"] = exercise.steps_per_execution
    run.metadata["host_loop_overhead_ns"] = HOST_LOOP_OVERHEAD_NS
    run.metadata["hosts"] = slice_hosts(exercise.devices_per_worker)[0]
    if result.trace is not None:
        run.metadata["utilization"] = round(utilization(result.trace), 4)
        sent = sum(s.args.get("ici_bytes_per_chip", 0) for s in result.trace.spans
                   if s.pid == "worker:0" and s.lane == "TPU:0")
        run.metadata["ici_bytes_per_chip_per_step"] = sent // max(1, exercise.steps)
    return run


def simulate(exercise: Exercise, transport=None, trace: bool = True,
                      catalog=None) -> RunResult:
    """Simulate a TPUStrategy exercise; the chief's ``RunResult`` (None on other ranks)."""
    return synchronous.simulate_synchronous(exercise, to_run_result, transport, trace, catalog,
                                            tasks=cluster_and_layout)


LOOP = TrainingLoop(cluster_and_layout, synchronous.make_main, to_run_result,
                    simulate)
