"""How replicas' values are combined: TF's cross-device ops, mapped onto simdist's collectives.

- ``NcclAllReduce``: NCCL's ring all-reduce over the devices (MirroredStrategy's default on
  GPUs); ``num_packs`` buffers, like TF's.
- ``HierarchicalCopyAllReduce``: TF's answer for a DGX-1's 8 GPUs: the hierarchical
  all-reduce over two groups of devices (the two halves); each group reduces to its first
  device, the two leaders all-reduce, each leader broadcasts in its group.
- ``ReductionToOneDevice``: everything to the first device, reduce there, copy back (the naive
  one).
- ``CollectiveAllReduce``: TF's collective all-reduce with ``CommunicationImplementation``
  RING or NCCL: MultiWorkerMirroredStrategy's across every replica of every worker, and
  MirroredStrategy's default since TF 2.x (RING on CPUs, NCCL on GPUs).

Gradients are packed into ``num_packs`` flat buffers first (TF's ``num_packs``, Horovod's
tensor fusion), so the latency is paid per pack, not per tensor.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from simdist.collectives import ReduceOp, all_reduce, pack, unpack
from simdist.base.errors import InvalidArgumentError


class CommunicationImplementation(enum.Enum):
    """``tf.distribute.experimental.CommunicationImplementation``."""

    AUTO = "auto"
    RING = "ring"
    NCCL = "nccl"


@dataclass(frozen=True)
class CommunicationOptions:
    """``tf.distribute.experimental.CommunicationOptions`` (the parts simdist models)."""

    implementation: CommunicationImplementation = CommunicationImplementation.AUTO
    timeout_seconds: float | None = None


class CrossDeviceOps:
    """Base: all-reduce a list of tensors across ``members`` ((task, device) pairs)."""

    algorithm = "ring"
    needs_gpu = False
    cpu_alternative = "ReductionToOneDevice"

    def __init__(self, num_packs: int = 1):
        if not isinstance(num_packs, int) or num_packs < 1:
            raise InvalidArgumentError(f"num_packs must be an int >= 1, got {num_packs!r}")
        self.num_packs = num_packs

    def __repr__(self):
        return f"{type(self).__name__}(num_packs={self.num_packs})"

    def __str__(self):
        return type(self).__name__

    def check_devices(self, ctx) -> None:
        kind = ctx.hardware.device.device_type
        if self.needs_gpu and kind != "GPU":
            raise InvalidArgumentError(
                f"{type(self).__name__} needs GPUs, but the hardware profile "
                f"'{ctx.hardware.system.name}' has {kind} devices: pick a GPU profile (e.g. "
                f"--profile v100-nvlink2-25gbe) or {self.cpu_alternative}")

    def batch_all_reduce(self, ctx, members, tensors: list, device, op=ReduceOp.SUM):
        """All-reduce ``tensors`` (this member's list) over ``members`` (``yield from``)."""
        packs, spec = pack(tensors, min(self.num_packs, len(tensors)))
        out = []
        for buf in packs:
            out.append((yield from self._all_reduce(ctx, members, buf, device, op)))
        return unpack(out, spec)

    def _all_reduce(self, ctx, members, value, device, op):
        return (yield from all_reduce(ctx, members, value, op, algorithm=self.algorithm,
                                      device=device, **self._options(members)))

    def _options(self, members) -> dict:
        """The all-reduce algorithm's options for these members."""
        return {}


class NcclAllReduce(CrossDeviceOps):
    """``tf.distribute.NcclAllReduce``: NCCL's ring (GPUs only)."""

    algorithm = "ring"
    needs_gpu = True


class ReductionToOneDevice(CrossDeviceOps):
    """``tf.distribute.ReductionToOneDevice``: reduce on the first device, copy back."""

    algorithm = "reduce-to-one"


class HierarchicalCopyAllReduce(CrossDeviceOps):
    """``tf.distribute.HierarchicalCopyAllReduce``: two groups of devices, leaders in between."""

    algorithm = "hierarchical"

    def _options(self, members):
        half = (len(members) + 1) // 2
        return {"groups": [members[:half], members[half:]] if len(members) > 1 else [members]}


class CollectiveAllReduce(CrossDeviceOps):
    """MultiWorkerMirroredStrategy's all-reduce over all workers' replicas: a ring (TF's RING
    implementation over gRPC, and what NCCL runs for large tensors)."""

    algorithm = "ring"
    cpu_alternative = "the RING implementation (--communication ring)"

    def __init__(self, options: CommunicationOptions = CommunicationOptions(),
                 num_packs: int = 1):
        super().__init__(num_packs)
        self.options = options
        self.needs_gpu = options.implementation is CommunicationImplementation.NCCL

    def __str__(self):
        return f"CollectiveAllReduce ({self.options.implementation.name})"


CROSS_DEVICE_OPS = {"nccl": NcclAllReduce, "hierarchical_copy": HierarchicalCopyAllReduce,
                    "reduction_to_one": ReductionToOneDevice}


def choose_the_best(ctx) -> CrossDeviceOps:
    """MirroredStrategy's default in TF 2.21 (``MirroredExtended._make_collective_ops_with_
    fallbacks``): collective all-reduce, RING when the devices are CPUs, NCCL when they are
    physical GPUs. (TF 1 sessions and mixed CPU/GPU device lists fall back to
    ReductionToOneDevice; older TF 2 releases used it on CPUs too.)"""
    if ctx.hardware.device.device_type == "GPU":
        return CollectiveAllReduce(CommunicationOptions(CommunicationImplementation.NCCL))
    return CollectiveAllReduce(CommunicationOptions(CommunicationImplementation.RING))
