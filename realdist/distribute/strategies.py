"""The in-process strategies: tf.distribute's default strategy, OneDeviceStrategy,
MirroredStrategy and CentralStorageStrategy, on logical CPUs (or GPUs when enough are
visible), running one exercise with realdist's training loop. Each is the runner that its
strategy record (``simdist.distribute.registry``) names.

Which all-reduce MirroredStrategy really uses is recorded in the run's metadata. In TF 2.21
its default on CPU devices is ``CollectiveAllReduce`` with the RING implementation (older TF
versions used ``ReductionToOneDevice``); ``--cross-device-ops`` picks TF's class instead.
``NcclAllReduce`` needs GPUs, so asking for it on CPUs is an error that says what to do
(rather than a silent fall-back that would make a CPU run look like an NCCL run).
"""

from __future__ import annotations

import functools
import time

from simdist.base.errors import FailedPreconditionError, UnimplementedError

from realdist.runtime import devices as realdevices
from realdist.training.loop import train
from realdist.runtime.tfenv import tf
from realdist.training.loop_result import result_from_workers

#: where CentralStorageStrategy keeps the variables
PARAMETER_DEVICE = "/device:CPU:0"


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


def in_process(build):
    """The realdist runner of a strategy that TF builds in this process (named by its record
    in ``simdist.distribute.registry``): ``build(exercise, devices, device_type)`` returns
    the strategy and the metadata only it knows. The runner sets the devices up first and
    returns the exercise's RunResult."""

    @functools.wraps(build)
    def run(exercise, timeout: float | None = None, on_step=None):
        devs, kind = realdevices.replica_devices(exercise.num_replicas)
        strategy, extra = build(exercise, devs, kind)
        deadline = None if timeout is None else time.monotonic() + timeout
        out = train(strategy, exercise, on_step=on_step, deadline=deadline)
        metadata = {"tensorflow": tf.__version__, "strategy_class": type(strategy).__name__,
                    "device_type": kind}
        metadata["devices"] = extra.pop("devices", None) or list(
            strategy.extended.worker_devices)
        metadata["cross_device_ops"] = describe_reduction(strategy)
        return result_from_workers(exercise, [out], {**metadata, **extra})

    return run


@in_process
def default(exercise, devices, device_type):
    """``tf.distribute.get_strategy()``: it names no devices of its own."""
    return tf.distribute.get_strategy(), {"devices": devices}


@in_process
def one_device(exercise, devices, device_type):
    return tf.distribute.OneDeviceStrategy(devices[0]), {}


@in_process
def mirrored(exercise, devices, device_type):
    ops = cross_device_ops(exercise.cross_device_ops, device_type)
    # Each MirroredStrategy numbers its collectives from the same keys, and the runtime
    # remembers a key's shapes: a second strategy in one process (a notebook, a test)
    # would collide with the first ("Shape mismatch in the collective instance"). TF's
    # own tests move every new strategy to fresh keys the same way.
    tf.distribute.MirroredStrategy._collective_key_base += 100000
    return tf.distribute.MirroredStrategy(devices, cross_device_ops=ops), {}


@in_process
def central_storage(exercise, devices, device_type):
    strategy = tf.distribute.experimental.CentralStorageStrategy(
        compute_devices=devices, parameter_device=PARAMETER_DEVICE)
    return strategy, {"parameter_device": PARAMETER_DEVICE}


def tpu(exercise, timeout: float | None = None, on_step=None):
    """TPUStrategy's runner: a real TPU is needed, and none is reachable on this course's
    machines, so the error says so (the simulator is the TPU lesson's path). With one
    attached, realdist has no TPUStrategy loop yet: an UnimplementedError says that."""
    resolver, line = realdevices.tpu_status()
    if resolver is None:
        raise FailedPreconditionError(f"realdist run tpu: {line}")
    raise UnimplementedError(f"realdist run tpu: {line}, but realdist has no TPUStrategy "
                             "training loop yet: simulate it with 'simdist run tpu'")
