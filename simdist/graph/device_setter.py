"""Models tf.compat.v1.train.replica_device_setter and its ps strategies.

The device function puts every variable op (``ps_ops``) on a ps task chosen by
``ps_strategy`` (round-robin by default, or ``GreedyLoadBalancingStrategy`` by byte size)
and every other op on ``worker_device``; fields the op already set win (TF's merge rule).
"""

from __future__ import annotations

import numpy as np

from simdist.hardware.cluster import ClusterSpec
from simdist.hardware.device_spec import DeviceSpec
from simdist.base.errors import InvalidArgumentError
from simdist.graph.dtypes import as_dtype

STANDARD_PS_OPS = ("Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable",
                   "MutableHashTableV2", "MutableHashTableOfTensors",
                   "MutableHashTableOfTensorsV2", "MutableDenseHashTable",
                   "MutableDenseHashTableV2", "VarHandleOp")


class _RoundRobinStrategy:
    """ps task 0, 1, ..., n-1, 0, 1, ... in the order variables are created."""

    def __init__(self, num_tasks):
        self._num_tasks, self._next = num_tasks, 0

    def __call__(self, unused_op):
        task = self._next
        self._next = (self._next + 1) % self._num_tasks
        return task


def byte_size_load_fn(op) -> int:
    """A variable's size in bytes, from its shape and dtype (tf.contrib's load function)."""
    shape = op.attrs.get("shape", op.outputs[0].shape if op.outputs else None)
    dtype = op.attrs.get("dtype", op.outputs[0].dtype if op.outputs else None)
    if shape is None or None in shape or dtype is None:
        raise InvalidArgumentError(f"byte_size_load_fn: variable {op.name!r} needs a fully "
                                   f"known shape, got {shape}")
    return int(np.prod(shape, dtype=np.int64)) * as_dtype(dtype).size


class GreedyLoadBalancingStrategy:
    """Each variable goes to the ps task with the least load so far (lowest index on ties)."""

    def __init__(self, num_tasks, load_fn=byte_size_load_fn):
        if not isinstance(num_tasks, int) or num_tasks < 1:
            raise InvalidArgumentError(f"num_tasks {num_tasks!r} must be an int >= 1")
        self._num_tasks, self._load_fn = num_tasks, load_fn
        self._ps_loads = [0] * num_tasks

    def __call__(self, op):
        task = min(range(self._num_tasks), key=lambda i: self._ps_loads[i])
        self._ps_loads[task] += self._load_fn(op)
        return task


class _ReplicaDeviceChooser:
    def __init__(self, ps_tasks, ps_device, worker_device, merge_devices, ps_ops,
                 ps_strategy):
        self._ps_tasks, self._ps_device = ps_tasks, ps_device
        self._worker_device, self._merge_devices = worker_device, merge_devices
        self._ps_ops, self._ps_strategy = ps_ops, ps_strategy

    def device_function(self, op):
        if not self._merge_devices and op.device:
            return op.device  # TF: merge_devices=False leaves a device that is set alone
        current = DeviceSpec.from_string(op.device or "")
        if self._ps_tasks and self._ps_device and op.type in self._ps_ops:
            ps_device = DeviceSpec.from_string(self._ps_device)
            if ps_device.job and (not current.job or current.job == ps_device.job):
                ps_device = ps_device.replace(task=self._ps_strategy(op))
            return ps_device.make_merged_spec(current).to_string()
        worker = DeviceSpec.from_string(self._worker_device or "")
        return worker.make_merged_spec(current).to_string()


def replica_device_setter(ps_tasks=0, ps_device="/job:ps", worker_device="/job:worker",
                          merge_devices=True, cluster=None, ps_ops=None, ps_strategy=None):
    """A device function for ``device(...)``: variables on ps tasks, other ops on the worker.

    ``cluster`` (a ClusterSpec or dict) gives ``ps_tasks`` as the size of the job that
    ``ps_device`` names; with no ps tasks (no cluster and ``ps_tasks=0``, or a cluster
    without that job, or a ``ps_device`` naming no job) there is nothing to place and it
    returns None, as TF does. With ``merge_devices=False`` an op whose device is already set
    keeps it untouched.
    """
    if cluster is not None:
        cluster = cluster if isinstance(cluster, ClusterSpec) else ClusterSpec(cluster)
        ps_job = DeviceSpec.from_string(ps_device).job
        if ps_job not in cluster.jobs:  # no job in ps_device, or one the cluster lacks
            return None
        ps_tasks = cluster.num_tasks(ps_job)
    if not isinstance(ps_tasks, int) or ps_tasks < 0:
        raise InvalidArgumentError(f"ps_tasks {ps_tasks!r} must be an int >= 0")
    if ps_tasks == 0:
        return None
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise InvalidArgumentError(f"ps_strategy {ps_strategy!r} must be callable (op -> task)")
    chooser = _ReplicaDeviceChooser(ps_tasks, ps_device, worker_device, merge_devices,
                                    tuple(ps_ops or STANDARD_PS_OPS), ps_strategy)
    return chooser.device_function
