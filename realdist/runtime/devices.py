"""The devices a real run uses, set up before TensorFlow's runtime starts.

- CPUs: one physical CPU is cut into N *logical* devices with
  ``tf.config.set_logical_device_configuration``, so that MirroredStrategy can have N
  replicas on a laptop. TF allows this only before its runtime initializes (the first op, or
  creating a MultiWorkerMirroredStrategy, starts it), once per process.
- GPUs: used when enough are visible (``tf.config.list_physical_devices("GPU")``); then
  MirroredStrategy can all-reduce with NCCL.
- TPUs: reached through ``tf.distribute.cluster_resolver.TPUClusterResolver`` when a TPU is
  attached (``TPU_NAME`` set, or a TPU VM's ``/dev/accel*``); otherwise TPU runs are
  simulator-only here, and ``tpu_status`` says so in one line.
"""

from __future__ import annotations

import glob
import os

from simdist.base.errors import FailedPreconditionError, InvalidArgumentError

from realdist.runtime.tfenv import tf

TPU_SIMULATOR_ONLY = ("TPU: none reachable here (no TPU_NAME, no /dev/accel*): TPU runs are "
                      "simulator-only on this machine (simdist run tpu ...)")


def configure_cpus(n: int) -> list[str]:
    """Make at least ``n`` logical CPU devices; returns the names of the first ``n``.

    Before the runtime starts this sets exactly ``n``. Afterwards TF cannot change the count,
    so a runtime that already has ``n`` or more is used as it is, and one with fewer is a
    FailedPreconditionError that says how to fix it.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidArgumentError(f"number of logical CPU devices must be an int >= 1, "
                                   f"got {n!r}")
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
    except RuntimeError:  # "Virtual devices cannot be modified after being initialized"
        pass
    have = tf.config.list_logical_devices("CPU")
    if len(have) < n:
        raise FailedPreconditionError(
            f"this exercise needs {n} logical CPU devices but TensorFlow's runtime already "
            f"started in this process with {len(have)} ({', '.join(d.name for d in have)}): "
            f"logical devices can be set only before the first TF op. Call "
            f"realdist.runtime.devices.configure_cpus({n}) first, or run in a fresh process "
            f"(realdist run ...)")
    return [d.name for d in have[:n]]


def gpus() -> list[str]:
    """The names of the visible GPUs (physical devices; does not start the runtime)."""
    return [f"/device:GPU:{i}" for i, _ in enumerate(tf.config.list_physical_devices("GPU"))]


def replica_devices(n: int) -> tuple[list[str], str]:
    """Devices for ``n`` replicas and their type: GPUs when at least ``n`` are visible,
    else ``n`` logical CPUs."""
    visible = gpus()
    if len(visible) >= n:
        return visible[:n], "GPU"
    if visible:
        print(f"realdist: {n} replicas but only {len(visible)} GPU(s): using {n} logical CPUs")
    return configure_cpus(n), "CPU"


def tpu_status() -> tuple[object | None, str]:
    """(TPUClusterResolver or None, one line saying what was found)."""
    name = os.environ.get("TPU_NAME")
    if not name and not glob.glob("/dev/accel*"):
        return None, TPU_SIMULATOR_ONLY
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=name or "local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        cores = tf.config.list_logical_devices("TPU")
    except (ValueError, RuntimeError, tf.errors.OpError) as error:
        return None, (f"TPU: {name or 'local TPU'} not reachable ({type(error).__name__}: "
                      f"{str(error).splitlines()[0] if str(error) else error!r}): TPU runs are "
                      "simulator-only here")
    if not cores:
        return None, f"TPU: {name or 'local TPU'} has no TPU cores: simulator-only here"
    return resolver, f"TPU: {len(cores)} cores through TPUClusterResolver({name or 'local'!r})"


def describe() -> list[str]:
    """What ``realdist devices`` prints: CPUs, GPUs and the TPU line."""
    cpus = tf.config.list_physical_devices("CPU")
    lines = [f"TensorFlow {tf.__version__}",
             f"CPU: {len(cpus)} physical ({os.cpu_count()} cores); MirroredStrategy gets N "
             f"replicas by cutting it into N logical devices (realdist run mirrored "
             f"--replicas N)"]
    visible = gpus()
    lines.append(f"GPU: {len(visible)} visible" + (
        f" ({', '.join(visible)}); MirroredStrategy all-reduces with NCCL" if visible else
        ": GPU and NCCL runs are simulator-only here"))
    lines.append(tpu_status()[1])
    return lines
