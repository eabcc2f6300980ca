"""The in-process strategies: tf.distribute's default strategy, OneDeviceStrategy,
MirroredStrategy and CentralStorageStrategy, on logical CPUs (or GPUs when enough are
visible), running one exercise with realdist's training loop.

Which all-reduce MirroredStrategy really uses is recorded in the run's metadata. In TF 2.21
its default on CPU devices is ``CollectiveAllReduce`` with the RING implementation (older TF
versions used ``ReductionToOneDevice``); ``--cross-device-ops`` picks TF's class instead.
``NcclAllReduce`` needs GPUs, so asking for it on CPUs is an error that says what to do
(rather than a silent fall-back that would make a CPU run look like an NCCL run).
"""

from __future__ import annotations

import time

from simdist.errors import InvalidArgumentError, UnimplementedError

from . import devices as realdevices
from .loop import train
from .tfenv import tf
from .trace import result_from_workers

IN_PROCESS = ("default", "one_device", "mirrored", "central_storage")


def cross_device_ops(name: str, device_type: str):
    """TF's CrossDeviceOps object for an exercise's ``cross_device_ops`` (None: TF's choice)."""
    if name == "auto":
        return None
    if name == "nccl" and device_type != "GPU":
        raise UnimplementedError(
            "cross_device_ops 'nccl' (tf.distribute.NcclAllReduce) needs GPUs, and this run "
            f"has {device_type} devices only: use --cross-device-ops auto, reduction_to_one "
            "or hierarchical_copy here, or see NCCL in the simulator (simdist run mirrored "
            "--cross-device-ops nccl)")
    return {"nccl": tf.distribute.NcclAllReduce,
            "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
            "reduction_to_one": tf.distribute.ReductionToOneDevice}[name]()


def make_strategy(exercise):
    """(strategy, devices, device type) for an in-process exercise; sets devices up first."""
    if exercise.strategy not in IN_PROCESS:
        raise InvalidArgumentError(f"strategy {exercise.strategy!r} does not run in one "
                                   f"process: expected one of {', '.join(IN_PROCESS)}")
    devs, kind = realdevices.replica_devices(exercise.num_replicas)
    if exercise.strategy == "default":
        return tf.distribute.get_strategy(), devs, kind
    if exercise.strategy == "one_device":
        return tf.distribute.OneDeviceStrategy(devs[0]), devs, kind
    if exercise.strategy == "mirrored":
        ops = cross_device_ops(exercise.cross_device_ops, kind)
        # Each MirroredStrategy numbers its collectives from the same keys, and the runtime
        # remembers a key's shapes: a second strategy in one process (a notebook, a test)
        # would collide with the first ("Shape mismatch in the collective instance"). TF's
        # own tests move every new strategy to fresh keys the same way.
        tf.distribute.MirroredStrategy._collective_key_base += 100000
        return tf.distribute.MirroredStrategy(devs, cross_device_ops=ops), devs, kind
    return (tf.distribute.experimental.CentralStorageStrategy(
        compute_devices=devs, parameter_device="/device:CPU:0"), devs, kind)


def describe_reduction(strategy) -> str:
    """The cross-device reduction a strategy really uses (read from TF's objects)."""
    ops = getattr(strategy.extended, "_cross_device_ops", None)
    if ops is None:
        return "none (one replica)"
    options = getattr(ops, "_options", None)
    implementation = getattr(options, "implementation", None)
    target = getattr(ops, "reduce_to_device", None)
    return type(ops).__name__ + (f" ({implementation.name})" if implementation else "") + (
        f" onto {target}" if target else "")


def run_in_process(exercise, timeout: float | None = None, on_step=None):
    """Run an in-process exercise on real TF; returns a RunResult."""
    strategy, devs, kind = make_strategy(exercise)
    deadline = None if timeout is None else time.monotonic() + timeout
    out = train(strategy, exercise, on_step=on_step, deadline=deadline)
    metadata = {"tensorflow": tf.__version__, "strategy_class": type(strategy).__name__,
                "device_type": kind,
                "devices": devs if exercise.strategy == "default" else
                list(strategy.extended.worker_devices),
                "cross_device_ops": describe_reduction(strategy)}
    if exercise.strategy == "central_storage":
        metadata["parameter_device"] = "/device:CPU:0"
    return result_from_workers(exercise, [out], metadata)
