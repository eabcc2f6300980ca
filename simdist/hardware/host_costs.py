"""Host costs: the host-side work of TF's runtime that a calibrated profile prices.

``HostCosts`` holds one number per cost, under one name: a ``DeviceProfile`` holds one (a
profiles file sets a cost by that name), and ``simdist calibrate`` fits them under that name
(``simdist.calibration.fit.PARAMETERS`` is made from the fields and their metadata). The
built-in profiles leave them at 0, so that a step is its roofline ops and messages alone, as
the lessons' closed forms have it (all but the coordinator's cost per scheduled function,
``schedule_overhead_ns``, 100 us as it has always been).

A strategy describes the host's work of one of its training steps as a ``HostStep`` (its
local replicas, its input's bytes, the costs its machinery adds); ``TaskContext.host_step``
has the profile price it (``HostCosts.step_ns``) and asks no question about the strategy.
Adding a cost: a field here, and the strategies that pay it name it (``Strategy.step_costs``)
or price it where they do the work.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from simdist.base.errors import InvalidArgumentError, brief
from simdist.hardware.checks import ceil_div, check_int

#: the coordinator's own time per scheduled function that the built-in profiles assume (about
#: what TF's coordinator spends per small closure on a CPU host; ``schedule_overhead_ns``)
SCHEDULE_OVERHEAD_NS = 100_000


def _cost(what: str, typical: float, unit: str = "ns", applies: str = "all",
          default: int = 0):
    """A cost field, 0 unless ``default`` says otherwise, with what calibration needs to fit
    it: its unit, what it charges, a typical size (where a fit starts), and which exercises can
    depend on it: "all", "multi_worker" (several workers), "multi_device" (several devices on a
    worker) or a strategy's name."""
    return field(default=default, metadata={"unit": unit, "what": what, "typical": typical,
                                            "applies": applies})


@dataclass(frozen=True)
class HostCosts:
    """The host-side costs of a device's profile, integer ns (``input_kb_ns``: ns per KB)."""

    #: the host's own work per training step: the Python loop, the input iterator, the
    #: ``tf.function`` call
    step_overhead_ns: int = _cost("host work per step (loop, iterator, function call)", 1e6)
    #: per local replica per step: cutting the batch, dispatching the replica's function
    replica_overhead_ns: int = _cost("host work per local replica per step", 3e5)
    #: the extra work per step when the strategy wraps the dataset (tf.distribute's
    #: ``DistributedDataset``, OneDeviceStrategy's prefetch to its device): every strategy
    #: but the default one
    input_pipeline_overhead_ns: int = _cost("extra host work per step of a wrapped dataset",
                                            3e5)
    #: the extra work per step of a strategy that runs through tf.distribute's mirrored
    #: machinery (``mirrored_run``, a ``DistributedIterator``): MirroredStrategy and
    #: MultiWorkerMirroredStrategy, even with one replica
    distributed_step_overhead_ns: int = _cost(
        "extra host work per step of the mirrored strategies", 1e6)
    #: MultiWorkerMirroredStrategy's extra work per step over MirroredStrategy's (its
    #: collectives span a cluster's group, even of one worker; measured on TF 2.21 to cost a
    #: lone worker ~0.6 ms a step more than MirroredStrategy on one device)
    multi_worker_step_overhead_ns: int = _cost(
        "extra host work per step of MultiWorkerMirroredStrategy", 5e5,
        applies="multi_worker_mirrored")
    #: the host's time per KB (1000 bytes) of a step's input, features and labels (the
    #: dataset's generator, the conversion to tensors, the split: measured on TF 2.21 to grow
    #: with the batch's bytes: 64-pixel digits cost 4-8x more per example than 8-feature rows)
    input_kb_ns: int = _cost("host time per KB of a step's input", 1e3, unit="ns/KB")
    #: TF's executor dispatching one op, for each TF op a simulated compute call stands for
    #: (a replica's forward and backward pass is ``Model.num_ops`` ops, an update one op per
    #: variable)
    op_overhead_ns: int = _cost("executor dispatch per TF op", 2e4)
    #: per TF op, for each other task of the cluster: a localhost cluster (realdist's) runs
    #: every task as a process on the same cores, so an op waits for a core the longer the
    #: more processes there are (measured on 2026-11-26: MultiWorkerMirrored's 39-op MLP cost
    #: ~5 ms a step more than its 27-op softmax regression on 2 workers, ~12 ms on 4, whatever
    #: the MLP's width; 0.5 ms in one process)
    shared_op_overhead_ns: int = _cost(
        "per TF op, for each other worker process on the same cores", 1e5,
        applies="multi_worker")
    #: TF's collective executor starting one all-reduce on a device (a ``CollectiveReduceV2``
    #: kernel: its instance, its group, its buffers), paid by every member of each all-reduce
    #: before its messages
    collective_overhead_ns: int = _cost("starting one all-reduce, per member", 2e5)
    #: per tensor of such an all-reduce, per member: in a ``tf.function`` TF's
    #: ``CollectiveReplicaLauncher.batch_all_reduce`` packs a step's gradients into one tensor
    #: (a reshape and a shape op per tensor, a concat) and cuts the result back (a split, a
    #: reshape per tensor), so a model's variable count costs ops that its forward and
    #: backward pass do not hold
    packed_tensor_overhead_ns: int = _cost("per tensor packed into an all-reduce, per member",
                                           5e4)
    #: ParameterServerStrategy's ``ClusterCoordinator``, per scheduled function: ``schedule``
    #: putting a closure on the queue, a worker thread taking it, the RPC that starts it on the
    #: worker and the ``RemoteValue`` that comes back (TF's Python, serialization, gRPC), paid
    #: one function at a time on the coordinator; 100 us by default, as the built-in runs
    #: and their golden traces have it, not 0 like the other costs
    schedule_overhead_ns: int = _cost(
        "the coordinator's work per scheduled function (queue, thread, RPC, RemoteValue)",
        1e6, applies="parameter_server", default=SCHEDULE_OVERHEAD_NS)

    def __post_init__(self):
        for name in HOST_COST_NAMES:
            check_int(name, getattr(self, name), 0)

    def step_ns(self, step: HostStep) -> int:
        """The host's work of one training step: the step's and each replica's overhead, the
        input's time per KB (rounded up to whole ns), and each cost the strategy adds."""
        return (self.step_overhead_ns + step.replicas * self.replica_overhead_ns
                + ceil_div(step.input_bytes * self.input_kb_ns, 1000)
                + sum(getattr(self, name) for name in step.extra))

    def ops_ns(self, ops: int, tasks: int = 1) -> int:
        """The dispatch of ``ops`` TF ops by a task of a cluster of ``tasks`` tasks, each other
        task one more process on the same cores."""
        return ops * (self.op_overhead_ns + (tasks - 1) * self.shared_op_overhead_ns)

    def collective_launch_ns(self, tensors: int) -> int:
        """One member starting an all-reduce of ``tensors`` tensors packed into one."""
        return self.collective_overhead_ns + tensors * self.packed_tensor_overhead_ns


#: every cost's name, in the order of the fields (and of calibration's parameters)
HOST_COST_NAMES = tuple(f.name for f in dataclasses.fields(HostCosts))


@dataclass(frozen=True)
class HostStep:
    """The host's work of one training step as its strategy describes it: ``replicas`` local
    replicas, ``input_bytes`` of input (features and labels), and ``extra``, the costs
    (``HostCosts`` names) that the strategy's machinery adds once a step."""

    replicas: int
    input_bytes: int = 0
    extra: tuple[str, ...] = ()

    def __post_init__(self):
        check_int("replicas", self.replicas, 0)
        check_int("input_bytes", self.input_bytes, 0)
        for name in self.extra:
            if name not in HOST_COST_NAMES:
                raise InvalidArgumentError(f"unknown host cost {brief(name)}: expected one of "
                                           f"{', '.join(HOST_COST_NAMES)}")
