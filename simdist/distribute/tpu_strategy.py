"""``tf.distribute.TPUStrategy`` on a simulated TPU slice.

A slice is TPU chips of two TensorCores each (a core is one device, one replica), four chips
to a host, the chips joined by inter-chip links (ICI) into a 2D torus of X x Y chips: a v3-8
is 2 x 2 chips, 8 cores, one host. What the model keeps of a real TPU:

- **Host loop.** The TF program runs on the host; each call of a ``tf.function`` is one
  host -> TPU dispatch (``HOST_LOOP_OVERHEAD_NS``) on the "host loop" lane, after which the
  cores run the compiled steps with no host in between. ``steps_per_execution`` steps share one
  dispatch (Keras ``compile(steps_per_execution=k)``, or a custom loop's ``tf.function`` that
  loops k times), so more steps per call leave the cores idle less: ``utilization``.
- **Cross-replica all-reduce over the torus.** XLA fuses a step's all-reduces into one; its
  time is the closed form ``torus_all_reduce_ns`` (a ring along the X rings of the torus, then
  along the Y rings), booked on every core as a "cross-replica all-reduce" span. The two cores
  of a chip share its links; their exchange inside the chip is not modelled.
- **Hosts.** A slice of more than one host (a v3-32 is 4 hosts of 8 cores) is one task per
  host, the ``worker`` job of the cluster, as ``TPUClusterResolver`` names them: each host
  feeds and dispatches to its own cores, and the cores' all-reduce spans the whole slice. The
  values cross hosts as messages (each host's partial sums to every other host), while the
  all-reduce's time stays the torus formula, counted from the moment the last host's cores
  reach it; it ends later only if those messages arrive later (large gradients on many
  hosts). Every host runs the same program, so hosts sit on MPI ranks like any tasks.
- **Static shapes.** XLA compiles one program for fixed shapes: a batch that is not the first
  batch's shape (a partial last batch of a dataset batched without ``drop_remainder``) or does
  not split evenly over the cores is an InvalidArgumentError before it runs. That is TF with
  ``tf.distribute.RunOptions(experimental_enable_dynamic_batch_size=False)``; TF 2.21's
  default pads a partial batch to the compiled shape instead, which simdist does not model.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from simdist.collectives import ReduceOp, formulas
from simdist.base.errors import InvalidArgumentError
from simdist.distribute.strategy import DistributedBatch, Strategy, _flatten
from simdist.distribute.values import Mirrored

#: TensorCores per chip (TPU v2, v3, v4: two)
CORES_PER_CHIP = 2
#: chips per host (a Cloud TPU v2/v3 host drives 4 chips: a v3-8 is one host)
CHIPS_PER_HOST = 4
#: TensorCores per host
CORES_PER_HOST = CORES_PER_CHIP * CHIPS_PER_HOST
#: host -> TPU dispatch of one ``tf.function`` call, ns. Teaching assumption: TF's guides give no
#: number; tens of microseconds to a millisecond is the range of a Python-side function call
#: plus a launch over the host's PCIe link, and 100 us makes the effect of
#: ``steps_per_execution`` plain on this course's small models.
HOST_LOOP_OVERHEAD_NS = 100_000
HOST_LOOP_LANE = "host loop"


def slice_hosts(cores: int) -> tuple[int, int]:
    """(hosts, cores per host) of a slice of ``cores`` TensorCores: one host up to 8 cores,
    else 8 cores on each host (a v3-32 is 4 hosts); a clear error for a slice that no TPU
    comes as."""
    if cores <= CORES_PER_HOST:
        if cores > 1 and cores % CORES_PER_CHIP:
            raise InvalidArgumentError(f"a TPU slice of {cores} cores: expected 1 or a "
                                       f"multiple of {CORES_PER_CHIP} (two cores per chip)")
        return 1, cores
    if cores % CORES_PER_HOST:
        raise InvalidArgumentError(
            f"a TPU slice of {cores} cores spans hosts of {CORES_PER_HOST} cores (4 chips "
            f"each): expected a multiple of {CORES_PER_HOST}, e.g. 32 for a v3-32")
    return cores // CORES_PER_HOST, CORES_PER_HOST


def torus_shape(chips: int) -> tuple[int, int]:
    """The 2D torus (X, Y) of ``chips`` chips: as square as it goes, X >= Y (2 x 2 for 4)."""
    y = max(d for d in range(1, math.isqrt(chips) + 1) if chips % d == 0)
    return chips // y, y


def torus_all_reduce_ns(x: int, y: int, nbytes: int, latency_ns: int, bandwidth: int) -> float:
    """All-reduce of ``nbytes`` over an X x Y torus of chips: a ring all-reduce along every X
    ring (in parallel), then along every Y ring, so each chip moves 2(X-1)/X + 2(Y-1)/Y of
    the bytes over ICI, in 2(X-1) + 2(Y-1) link latencies (the ring is ``formulas.ring``).
    TPU pods reduce gradients dimension by dimension of the torus this way: Ying et al.,
    "Image Classification at Supercomputer Scale", arXiv:1811.06992 (2018), section 3."""
    return (formulas.ring(x, nbytes, latency_ns, bandwidth)
            + formulas.ring(y, nbytes, latency_ns, bandwidth))


class TPUStrategy(Strategy):
    """``tf.distribute.TPUStrategy``: one replica per TPU core of the slice (the devices of
    its host tasks), variables mirrored on every core, gradients all-reduced over the torus,
    one host dispatch per ``steps_per_execution`` calls of ``run`` on each host."""

    step_costs = ("input_pipeline_overhead_ns",)  # a DistributedDataset

    def __init__(self, ctx, steps_per_execution: int = 1,
                 host_loop_overhead_ns: int = HOST_LOOP_OVERHEAD_NS):
        kind = ctx.hardware.device.device_type
        if kind != "TPU":
            raise InvalidArgumentError(
                f"TPUStrategy needs TPU devices, but hardware profile "
                f"'{ctx.hardware.system.name}' has {kind} devices: use --profile tpu-v3")
        local = ctx.hardware.layout.devices_per_task
        hosts = ctx.cluster.num_tasks("worker") if ctx.task_type == "worker" else 1
        cores = local * hosts
        if slice_hosts(cores) != (hosts, local):
            raise InvalidArgumentError(
                f"TPUStrategy on {hosts} host tasks of {local} cores each: a slice of more "
                f"than one host has {CORES_PER_HOST} cores on every host")
        for name, value, low in (("steps_per_execution", steps_per_execution, 1),
                                 ("host_loop_overhead_ns", host_loop_overhead_ns, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidArgumentError(f"{name} must be an int >= {low}, got {value!r}")
        super().__init__(ctx, range(local))
        self.chips = max(1, cores // CORES_PER_CHIP)
        self.topology = torus_shape(self.chips)
        self.hosts = hosts
        self.steps_per_execution = steps_per_execution
        self.host_loop_overhead_ns = host_loop_overhead_ns
        self._calls = 0
        self._reductions = 0  # all-reduces so far: the tag of each one's messages
        self._batch_shape = None

    def _num_workers(self) -> int:
        return self.hosts

    def _worker_index(self) -> int:
        return self.ctx.task_id if self.hosts > 1 else 0

    def __repr__(self):
        x, y = self.topology
        return (f"TPUStrategy(replicas={self.num_replicas_in_sync}, chips={x}x{y}, "
                f"hosts={self.hosts}, steps_per_execution={self.steps_per_execution})")

    def experimental_distribute_dataset(self, batches):
        """Batches cut over the cores as MirroredStrategy does, after the static-shape check."""
        for step, batch in enumerate(super().experimental_distribute_dataset(batches)):
            self._check_static_shape(step, batch)
            yield batch

    def _check_static_shape(self, step: int, batch: DistributedBatch) -> None:
        shape = (batch.global_batch_size, *batch[0].values[0].shape[1:])
        if self._batch_shape is None:
            self._batch_shape = shape
        if shape != self._batch_shape:
            raise InvalidArgumentError(
                f"TPUStrategy: the global batch of step {step} has shape {shape}, the first "
                f"had {self._batch_shape}: XLA compiles for static shapes, and a partial batch "
                f"is a dynamic one; batch the dataset with drop_remainder=True (simdist "
                f"models experimental_enable_dynamic_batch_size=False; TF 2.21 pads by "
                f"default)")
        if shape[0] % self.num_replicas_in_sync:
            raise InvalidArgumentError(
                f"TPUStrategy: a global batch of shape {shape} does not split evenly over "
                f"{self.num_replicas_in_sync} TPU cores: XLA needs the same static shape on "
                f"every core; use a global batch that is a multiple of "
                f"{self.num_replicas_in_sync}")

    def run(self, fn, args=(), kwargs=None, flops=0.0, nbytes=0, name="step", ops=0,
            time_factor=1.0):
        """``strategy.run``; the first call of each execution waits for the host's dispatch."""
        if self._calls % self.steps_per_execution == 0:
            start = self.ctx.now  # the cores are idle until the dispatch arrives
            self.ctx.span(HOST_LOOP_LANE, f"dispatch {self._calls // self.steps_per_execution}",
                          "host", start, self.host_loop_overhead_ns,
                          steps=self.steps_per_execution)
            yield self.ctx.timeout(self.host_loop_overhead_ns)
        self._calls += 1
        return (yield from super().run(fn, args, kwargs, flops, nbytes, name, ops,
                                       time_factor))

    def all_reduce_ns(self, nbytes: int) -> int:
        """The simulated time of one fused all-reduce of ``nbytes`` over the slice's torus."""
        link = self.ctx.hardware.network
        return math.ceil(torus_all_reduce_ns(*self.topology, nbytes, link.latency_ns,
                                             link.bandwidth))

    def ici_bytes_per_chip(self, nbytes: int) -> int:
        """What each chip sends over ICI in one all-reduce of ``nbytes``: 2(X-1)/X + 2(Y-1)/Y
        of them (``torus_all_reduce_ns``)."""
        return round(sum(2 * (p - 1) * math.ceil(nbytes / p) for p in self.topology))

    def batch_reduce_to(self, op, values):
        """One fused cross-replica all-reduce of every tensor (``yield from``), booked on
        every core for ``all_reduce_ns``; returns ``Mirrored`` values."""
        op = ReduceOp.parse(op)
        flat, rebuild = _flatten(values)
        replicas = len(self._devices)
        partial = [functools.reduce(op.combine, value.values) for value in flat]
        nbytes = sum(np.asarray(v.values[0]).nbytes for v in flat)
        total = self.num_replicas_in_sync
        duration = self.all_reduce_ns(nbytes) if total > 1 else 0
        if self.hosts > 1:
            partial = yield from self._across_hosts(op, partial, duration, nbytes)
            out = [Mirrored([op.finalize(acc, total)] * replicas) for acc in partial]
            return rebuild(out)
        out = [Mirrored([op.finalize(acc, replicas)] * replicas) for acc in partial]
        ends = []
        for device in self._devices:
            lane = f"TPU:{device}"  # the lane of the core's compute spans
            start = self.ctx.occupy(lane, duration)
            self.ctx.span(lane, "cross-replica all-reduce", "collective", start, duration,
                          **self._span_args(nbytes))
            ends.append(start + duration)
        yield self.ctx.timeout(max(ends) - self.ctx.now)
        return rebuild(out)

    def _across_hosts(self, op, partial: list, duration: int, nbytes: int):
        """The slice-wide sums of this host's ``partial`` sums (``yield from``): each host
        sends its own to every other one and adds all of them in host order, so every host
        holds the same values. The cores' all-reduce span starts when the last host is ready
        (its message's send time) and lasts ``duration``, or until the last message is in."""
        ctx, me = self.ctx, self.ctx.task_id
        tag = f"TPU all-reduce {self._reductions}"
        self._reductions += 1
        for host in range(self.hosts):
            if host != me:
                ctx.send(f"worker:{host}", tag, [np.asarray(a) for a in partial])
        sums, ready = {me: partial}, ctx.now
        for host in range(self.hosts):
            if host != me:
                msg = yield ctx.recv(f"worker:{host}", tag)
                sums[host], ready = msg.payload, max(ready, msg.sent_at)
        end = max(ready + duration, ctx.now)
        for device in self._devices:
            lane = f"TPU:{device}"
            ctx.occupy(lane, end - ctx.now)
            ctx.span(lane, "cross-replica all-reduce", "collective", ready, end - ready,
                     hosts=self.hosts, **self._span_args(nbytes))
        yield ctx.timeout(end - ctx.now)
        return [functools.reduce(op.combine, (sums[host][i] for host in range(self.hosts)))
                for i in range(len(partial))]

    def _span_args(self, nbytes: int) -> dict:
        return {"bytes": nbytes, "ici_bytes_per_chip": self.ici_bytes_per_chip(nbytes),
                "topology": f"{self.topology[0]}x{self.topology[1]}"}


def utilization(trace, task: str = "worker:0", lane: str = "TPU:0") -> float:
    """Device busy time / wall time of one core in a finished trace: the sum of its spans
    over the time from the first dispatch to the end of its last span."""
    spans = [s for s in trace.spans if s.pid == task and s.lane == lane]
    starts = [s.start for s in trace.spans if s.pid == task and s.lane == HOST_LOOP_LANE]
    if not spans:
        return 0.0
    begin = min(starts + [s.start for s in spans])
    end = max(s.start + s.dur for s in spans)
    return sum(s.dur for s in spans) / max(1, end - begin)


__all__ = ["CORES_PER_HOST", "HOST_LOOP_OVERHEAD_NS", "TPUStrategy", "slice_hosts", "torus_all_reduce_ns", "torus_shape",
           "utilization"]
