"""tf.distribute's synchronous strategies on a simulated task.

A strategy object lives in one simulated task's program (``ctx``), as in a TF script:

    strategy = MirroredStrategy(ctx)                  # one replica per device of this task
    with strategy.scope():
        variables = strategy.variables(model.init(seed))
    for batch in strategy.experimental_distribute_dataset(global_batches):
        out = yield from strategy.run(step_fn, args=(batch, variables), flops=...)
        grads = yield from strategy.extended.batch_reduce_to(ReduceOp.SUM, out_grads)

``run`` calls ``fn`` once per local replica on that replica's components (real numpy values)
and charges ``flops`` to each replica's device in parallel; ``batch_reduce_to`` all-reduces
with the strategy's cross-device ops over every replica (of every worker, for
MultiWorkerMirroredStrategy); ``update`` applies an update to every copy of a variable.
CentralStorageStrategy is in ``central_storage_strategy.py``.
"""

from __future__ import annotations

import contextlib
import json

import numpy as np

from simdist.hardware.tf_config import TFConfig
from simdist.hardware.host_costs import HostStep
from simdist.collectives import ReduceOp
from simdist.distribute.input_lib import split_bounds
from simdist.base.errors import InvalidArgumentError
from simdist.distribute.cross_device_ops import (CollectiveAllReduce, CommunicationOptions,
                                                 CrossDeviceOps, choose_the_best)
from simdist.distribute.values import Mirrored, MirroredVariable, PerReplica, local_value, regroup


class InputContext:
    """``tf.distribute.InputContext``: what an input function needs to shard its data."""

    def __init__(self, num_input_pipelines: int, input_pipeline_id: int,
                 num_replicas_in_sync: int):
        self.num_input_pipelines = num_input_pipelines
        self.input_pipeline_id = input_pipeline_id
        self.num_replicas_in_sync = num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        if global_batch_size % self.num_replicas_in_sync:
            raise InvalidArgumentError(
                f"the global batch size {global_batch_size} is not divisible by "
                f"num_replicas_in_sync {self.num_replicas_in_sync}")
        return global_batch_size // self.num_replicas_in_sync


class Strategy:
    """The default strategy (``tf.distribute.get_strategy()``): no distribution, one replica
    on this task's first device."""

    #: whether batch_reduce_to starts collective kernels even for one replica (CollectiveReduceV2,
    #: a group of one included), as a calibrated profile charges (``collective_launch_ns``)
    mirrored_runtime = False
    #: the host costs (``HostCosts`` names) its machinery adds to each step (``host_step``):
    #: none for the default strategy, whose experimental_distribute_dataset hands the dataset
    #: back as it is; every other one wraps it (``input_pipeline_overhead_ns``)
    step_costs: tuple[str, ...] = ()

    def __init__(self, ctx, devices=(0,)):
        self.ctx = ctx
        self._devices = [self._device_index(d) for d in devices]
        if not self._devices:
            raise InvalidArgumentError(f"{type(self).__name__} needs at least one device")
        if len(set(self._devices)) != len(self._devices):
            raise InvalidArgumentError(f"{type(self).__name__}: devices {list(devices)} "
                                       "name a device twice")
        self.extended = self  # TF's StrategyExtended methods live on the strategy here
        self._in_scope = False

    def _device_index(self, device) -> int:
        """A device index from an int or a TF device string ("/gpu:1", "/device:CPU:0")."""
        if isinstance(device, (int, np.integer)) and not isinstance(device, bool):
            self.ctx.device(int(device))  # checks the range
            return int(device)
        from simdist.hardware.device_spec import DeviceSpec

        spec = DeviceSpec.from_string(str(device))
        kind = self.ctx.hardware.device.device_type
        if spec.device_type is not None and spec.device_type != kind:
            raise InvalidArgumentError(
                f"device {device!r} is a {spec.device_type}, but the tasks of hardware profile "
                f"'{self.ctx.hardware.system.name}' have {kind} devices "
                f"(/{kind.lower()}:0 .. /{kind.lower()}:{self.ctx.hardware.layout.devices_per_task - 1})")
        index = 0 if spec.device_index is None else spec.device_index
        self.ctx.device(index)  # unknown device: a clear error
        return index

    # -- what the strategy is -----------------------------------------------------------------

    @property
    def num_replicas_in_sync(self) -> int:
        return len(self._devices) * self._num_workers()

    def _num_workers(self) -> int:
        return 1

    def _worker_index(self) -> int:
        return 0

    @property
    def worker_devices(self) -> tuple[str, ...]:
        """This task's replica devices as TF device strings."""
        return tuple(self.ctx.device(d) for d in self._devices)

    def _members(self) -> list:
        """Every replica of the strategy as a collective member (task, device)."""
        return [(self.ctx.name, d) for d in self._devices]

    def host_step(self, input_bytes: int) -> HostStep:
        """The host's work of one step on this task with ``input_bytes`` of input, for
        ``ctx.host_step`` to price: its local replicas and its machinery's ``step_costs``."""
        return HostStep(len(self._devices), input_bytes, self.step_costs)

    def _cross_device_ops(self) -> CrossDeviceOps:
        return choose_the_best(self.ctx)

    def __repr__(self):
        return (f"{type(self).__name__}(replicas={self.num_replicas_in_sync}, "
                f"devices={list(self.worker_devices)})")

    # -- variables ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def scope(self):
        """``strategy.scope()``: variables made inside are distributed by this strategy."""
        self._in_scope = True
        try:
            yield self
        finally:
            self._in_scope = False

    def variables(self, initial: dict) -> dict[str, MirroredVariable]:
        """Variables from initial values: a copy on every replica's device."""
        if not self._in_scope:
            raise InvalidArgumentError(f"create variables inside `with strategy.scope():` "
                                       f"so that {type(self).__name__} can place them")
        return {name: MirroredVariable(name, [value] * len(self._devices),
                                       [self.ctx.device(d) for d in self._devices])
                for name, value in initial.items()}

    # -- input ----------------------------------------------------------------------------------

    def experimental_distribute_dataset(self, batches):
        """Each global batch (x, y) cut into per-replica batches as TF does
        (``simdist.distribute.input_lib.split_global_batch``); yields ``PerReplica`` (x, y) pairs, with the
        global batch size of the step as ``.global_batch_size``."""
        workers, me, local = self._num_workers(), self._worker_index(), len(self._devices)
        for x, y in batches:
            bounds = split_bounds(len(x), workers * local)
            # sub-batch j goes to worker j % W, local replica j // W (rebatch, then shard)
            mine = [bounds[r * workers + me] for r in range(local)]
            batch = (PerReplica(x[a:b] for a, b in mine), PerReplica(y[a:b] for a, b in mine))
            yield DistributedBatch(batch, len(x))

    def distribute_datasets_from_function(self, dataset_fn):
        """``dataset_fn(InputContext)`` returns a worker's iterable of per-replica batches
        (x, y); consecutive elements go to the local replicas in turn.

        As in TF, iteration goes on while any worker has data: a replica whose worker ran
        out gets an empty batch (no examples, the element's other dimensions), so that every
        worker takes part in every step's collectives. TF's workers learn whether any has
        data left from one small all-reduce per step; simdist calls ``dataset_fn`` with each
        worker's ``InputContext`` instead (it must give a worker the same data every call).
        """
        workers, local = self._num_workers(), len(self._devices)
        datasets = [list(dataset_fn(InputContext(workers, w, self.num_replicas_in_sync)))
                    for w in range(workers)]
        first = next((d[0] for d in datasets if d), None)
        if first is None:
            return
        empty = tuple(np.asarray(part)[:0] for part in first)
        steps = max(-(-len(d) // local) for d in datasets)
        for k in range(steps):
            def parts(w):
                chunk = datasets[w][k * local:(k + 1) * local]
                return chunk + [empty] * (local - len(chunk))
            mine = parts(self._worker_index())
            size = sum(len(p[0]) for w in range(workers) for p in parts(w))
            batch = (PerReplica(p[0] for p in mine), PerReplica(p[1] for p in mine))
            yield DistributedBatch(batch, size)

    # -- running and reducing -------------------------------------------------------------------

    def run(self, fn, args=(), kwargs=None, flops=0.0, nbytes=0, name="step", ops=0,
            time_factor=1.0):
        """``strategy.run``: ``fn`` on every local replica (``yield from``), returning its
        outputs as ``PerReplica`` values. ``flops`` (a number, or a function of the replica
        index) is charged to each replica's device, with ``ops`` TF ops' dispatch; replicas
        run in parallel. ``time_factor`` multiplies every local replica's compute time (a
        straggling machine, ``simdist.hardware.stragglers``; not a TF argument)."""
        if time_factor != 1.0 and not (isinstance(time_factor, (int, float))
                                       and 0 < time_factor < float("inf")):
            raise InvalidArgumentError(f"time_factor {time_factor!r}: expected a number > 0")
        kwargs = kwargs or {}
        outputs, events = [], []
        for r, device in enumerate(self._devices):
            outputs.append(fn(*local_value(args, r), **local_value(kwargs, r)))
            cost = flops(r) if callable(flops) else flops
            if time_factor == 1.0:
                events.append(self.ctx.compute(name, flops=cost, nbytes=nbytes, device=device,
                                               replica=r, ops=ops))
                continue
            self.ctx.device(device)  # checks the index, as compute does
            alone = self.ctx.hardware.device.compute_time_ns(cost, nbytes, ops=ops,
                                                             tasks=self.ctx.num_tasks)
            events.append(self.ctx.busy(device, name, round(alone * time_factor), "compute",
                                        flops=cost, replica=r, straggler=round(time_factor, 4)))
        yield self.ctx.env.all_of(events)
        return regroup(outputs)

    def batch_reduce_to(self, op, values):
        """All-reduce a structure of ``PerReplica`` tensors over every replica (``yield
        from``); returns the same structure of ``Mirrored`` values."""
        op = ReduceOp.parse(op)
        flat, rebuild = _flatten(values)
        ops = self._cross_device_ops()
        ops.check_devices(self.ctx)
        members = self._members()
        launch = self.ctx.hardware.device.host_costs.collective_launch_ns(len(flat))
        if launch and self.mirrored_runtime:  # a calibrated profile's cost of starting
            yield self.ctx.env.all_of([self.ctx.busy(d, "launch collective", launch)
                                       for d in self._devices])
        procs = []
        for r, device in enumerate(self._devices):
            tensors = [v.values[r] for v in flat]
            procs.append(self.ctx.process(ops.batch_all_reduce(self.ctx, members, tensors,
                                                               device, op),
                                          name=f"all-reduce replica {r}"))
        yield self.ctx.env.all_of(procs)
        per_replica = [p.value for p in procs]
        return rebuild([Mirrored(per_replica[r][i] for r in range(len(self._devices)))
                        for i in range(len(flat))])

    def reduce(self, op, value, axis=None):
        """``strategy.reduce``: one value from every replica's (``yield from``). With
        ``axis``, each replica first reduces its value along that axis (MEAN divides by the
        total count over all replicas)."""
        op = ReduceOp.parse(op)
        local = [np.asarray(local_value(value, r)) for r in range(len(self._devices))]
        count = None
        if axis is not None:
            if op is ReduceOp.MEAN:
                count = PerReplica(np.array([v.shape[axis]], np.float64) for v in local)
                local = [v.sum(axis=axis) for v in local]
            else:
                fn = {ReduceOp.SUM: np.sum, ReduceOp.MAX: np.max, ReduceOp.MIN: np.min}[op]
                local = [fn(v, axis=axis) for v in local]
        inner = ReduceOp.SUM if op is ReduceOp.MEAN and axis is not None else op
        total = yield from self.batch_reduce_to(inner, [PerReplica(local)])
        result = total[0].values[0]
        if count is not None:
            n = yield from self.batch_reduce_to(ReduceOp.SUM, [count])
            result = result / n[0].values[0][0]
        return result

    def update(self, variables: dict, grads: dict, fn, name="update"):
        """Apply ``fn(var_copy, grad) -> new value`` to every copy of every variable, each
        copy on its replica's device (``yield from``)."""
        events = []
        for r, device in enumerate(self._devices):
            nbytes = 0
            for k, var in variables.items():
                new = list(var.values)
                new[r] = fn(var.values[r], grads[k].values[r])
                var.assign_each(new)
                nbytes += 3 * var.values[r].nbytes  # read var and grad, write var
            flops = sum(2 * var.values[r].size for var in variables.values())
            events.append(self.ctx.compute(name, flops=flops, nbytes=nbytes, device=device,
                                           replica=r, ops=len(variables)))
        yield self.ctx.env.all_of(events)

    def experimental_local_results(self, value) -> tuple:
        return value.values if isinstance(value, PerReplica) else (value,)


class OneDeviceStrategy(Strategy):
    """``tf.distribute.OneDeviceStrategy(device)``: everything on one chosen device."""

    step_costs = ("input_pipeline_overhead_ns",)  # its dataset prefetches to its device

    def __init__(self, ctx, device=0):
        super().__init__(ctx, [device])


class MirroredStrategy(Strategy):
    """``tf.distribute.MirroredStrategy(devices, cross_device_ops)``: one replica per device of
    this task (default: all of them), variables mirrored, gradients all-reduced."""

    #: a DistributedDataset, and the mirrored machinery (mirrored_run, a DistributedIterator)
    step_costs = ("input_pipeline_overhead_ns", "distributed_step_overhead_ns")

    mirrored_runtime = True

    def __init__(self, ctx, devices=None, cross_device_ops: CrossDeviceOps | None = None):
        if devices is None:
            devices = range(ctx.hardware.layout.devices_per_task)
        super().__init__(ctx, list(devices))
        if cross_device_ops is not None and not isinstance(cross_device_ops, CrossDeviceOps):
            raise InvalidArgumentError(
                f"cross_device_ops must be one of NcclAllReduce(), "
                f"HierarchicalCopyAllReduce(), ReductionToOneDevice(), got {cross_device_ops!r}")
        self.cross_device_ops = cross_device_ops or choose_the_best(ctx)

    def _cross_device_ops(self):
        return self.cross_device_ops


class MultiWorkerMirroredStrategy(Strategy):
    """``tf.distribute.MultiWorkerMirroredStrategy``: MirroredStrategy on every worker task,
    the all-reduce spanning all replicas of all workers. The cluster and this task's role come
    from ``TF_CONFIG`` (a JSON string or dict; default: the one simdist gives this task),
    which must match the simulated cluster."""

    #: MirroredStrategy's, and collectives that span a cluster's group (even of one worker)
    step_costs = (*MirroredStrategy.step_costs, "multi_worker_step_overhead_ns")

    mirrored_runtime = True

    def __init__(self, ctx, communication_options: CommunicationOptions = CommunicationOptions(),
                 tf_config=None, devices=None):
        if tf_config is None:
            config = TFConfig(ctx.cluster, ctx.task_type, ctx.task_id)
        else:
            config = TFConfig.from_json(tf_config if isinstance(tf_config, str)
                                        else json.dumps(tf_config))
        if config.cluster != ctx.cluster or (config.task_type, config.task_id) != (
                ctx.task_type, ctx.task_id):
            raise InvalidArgumentError(
                f"TF_CONFIG does not match the cluster this task runs in: it says cluster "
                f"{config.cluster.as_dict()} and task {config.task_type}:{config.task_id}, "
                f"but this is {ctx.name} of {ctx.cluster.as_dict()}")
        if ctx.task_type != "worker" or "worker" not in ctx.cluster.jobs:
            raise InvalidArgumentError(
                f"MultiWorkerMirroredStrategy runs on worker tasks; {ctx.name} is not one")
        self.tf_config = config
        if devices is None:
            devices = range(ctx.hardware.layout.devices_per_task)
        super().__init__(ctx, list(devices))
        self.cross_device_ops = CollectiveAllReduce(communication_options)

    def _num_workers(self):
        return self.ctx.cluster.num_tasks("worker")

    def _worker_index(self):
        return self.ctx.task_id

    def _members(self):
        return [(f"worker:{w}", d) for w in range(self._num_workers()) for d in self._devices]

    def _cross_device_ops(self):
        return self.cross_device_ops


class DistributedBatch(tuple):
    """One step's per-replica batch (x, y) and the size of the global batch it came from."""

    def __new__(cls, pair, global_batch_size: int):
        obj = super().__new__(cls, pair)
        obj.global_batch_size = global_batch_size
        return obj


def compute_average_loss(per_example_loss, global_batch_size: int):
    """``tf.nn.compute_average_loss``: sum of this replica's losses / the global batch size,
    so that summing the replicas' values gives the global mean."""
    if global_batch_size < 1:
        raise InvalidArgumentError(f"global_batch_size must be >= 1, got {global_batch_size}")
    return np.float32(np.sum(per_example_loss, dtype=np.float32) / np.float32(global_batch_size))


def scale_regularization_loss(regularization_loss, num_replicas_in_sync: int):
    """``tf.nn.scale_regularization_loss``: the sum of the regularization losses (a scalar, a
    list of them or an array) / the number of replicas in sync, so that the strategy's SUM
    of the replicas' losses counts it once. TF reads ``num_replicas_in_sync`` from the
    strategy of the replica context; simdist has no replica context and takes it here."""
    if isinstance(num_replicas_in_sync, bool) or not isinstance(
            num_replicas_in_sync, (int, np.integer)) or num_replicas_in_sync < 1:
        raise InvalidArgumentError(f"num_replicas_in_sync must be an int >= 1, got "
                                   f"{num_replicas_in_sync!r}")
    total = np.sum(np.asarray(regularization_loss, np.float32), dtype=np.float32)
    return np.float32(total / np.float32(num_replicas_in_sync))


def _walk(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, (list, tuple)) and not isinstance(value, PerReplica):
        for v in value:
            yield from _walk(v)
    else:
        yield value


def _flatten(values):
    """A dict or list of PerReplica values as a list, and the function that rebuilds it."""
    if isinstance(values, dict):
        keys = list(values)
        return [values[k] for k in keys], lambda flat: dict(zip(keys, flat))
    values = list(values)
    return values, list


__all__ = ["CentralStorageStrategy", "DistributedBatch", "InputContext", "MirroredStrategy",
           "MultiWorkerMirroredStrategy", "OneDeviceStrategy", "Strategy", "compute_average_loss",
           "scale_regularization_loss"]
