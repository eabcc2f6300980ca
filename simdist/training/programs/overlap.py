"""Overlap and fusion for ``data_parallel``: the backward pass makes the gradients ready layer
by layer, last layer first, and the all-reduce starts on fused buckets as they fill.

What PyTorch's DistributedDataParallel does with its buckets (``bucket_cap_mb``, 25 MiB by
default: Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
Training", VLDB 2020), Horovod with its fusion buffer (``HOROVOD_FUSION_THRESHOLD``, 64 MiB)
and TF's collective all-reduce with its packing (``CommunicationOptions(bytes_per_pack=)``):
the gradients are cut into buckets in backward order (``Model.gradient_buckets``); a bucket
is all-reduced as soon as the backward pass has computed its last gradient, while the device
goes on with the earlier layers. The all-reduces of a ring, a tree or hierarchical run one
after another (one NCCL stream, Horovod's one background thread); a parameter server's run
at once, each bucket pushed as it becomes ready (BytePS, TF's ps pushes per variable).

The forward and backward time is the model's, as without overlap (one roofline op of its
FLOPs), split between the forward pass and each stretch of the backward pass in proportion
to their FLOPs: overlap moves the all-reduce, never the compute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simdist.base.errors import InvalidArgumentError
from simdist.models.layer import BACKWARD_PER_FORWARD
from simdist.sim.payloads import Phantom

#: PyTorch DDP's default bucket (``bucket_cap_mb=25``, in MiB: its code multiplies by 1024^2)
FUSION_MIB = 25
FUSION_BYTES = FUSION_MIB << 20
#: algorithms whose buckets are all-reduced at once, each as soon as it is ready (pushed to
#: the servers as the backward pass makes it ready); the others run one after another
CONCURRENT = frozenset({"ps"})
#: the trace lane of the buckets' all-reduces (one span each, from ready to reduced)
LANE = "gradient buckets"


def fusion_option(text) -> int:
    """argparse's ``type=`` of ``--fusion-mb``: MiB as a number (25, 0.5; 0: a bucket per
    layer) or a size with units (64MiB, 25MB); returns bytes."""
    import argparse  # the command line's error type; nothing else of it is used here

    from simdist.hardware.units import parse_size

    try:
        mib = float(text)
    except ValueError:
        try:
            return parse_size(text)
        except InvalidArgumentError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected MiB (25, 0.5; 0: a bucket per layer) or a size with units "
                "(64MiB, 25MB)") from None
    if not math.isfinite(mib) or mib < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected MiB >= 0 (25, 0.5; 0: a bucket "
                                         "per layer)")
    return round(mib * (1 << 20))


@dataclass(frozen=True)
class Stretch:
    """A stretch of the backward pass: layers in backward order, ending with the layer whose
    gradient completes ``bucket`` (None: the layers after the last gradient)."""

    name: str
    flops: int  # backward FLOPs of the batch
    bucket: int | None


@dataclass(frozen=True)
class BackwardPlan:
    """One worker's step: the forward pass, the backward pass in stretches, the buckets."""

    forward_flops: int  # of the batch
    stretches: tuple[Stretch, ...]
    buckets: tuple[int, ...]  # bytes of each bucket, in backward order

    def split(self, total_ns: int) -> list[int]:
        """``total_ns`` of forward and backward over the forward pass and each stretch, in
        proportion to their FLOPs (cut at rounded cumulative times: they add up exactly)."""
        flops = [self.forward_flops, *(s.flops for s in self.stretches)]
        whole = sum(flops)
        if not whole:
            return [total_ns] + [0] * len(self.stretches)
        cuts, done = [], 0
        for f in flops:
            done += f
            cuts.append(total_ns * done // whole)
        return [b - a for a, b in zip([0, *cuts], cuts)]


def backward_plan(model, batch: int, gradient_bytes: int, fusion_bytes: int) -> BackwardPlan:
    """The plan of ``model``'s step: its buckets of ``fusion_bytes`` (gradients of
    ``gradient_bytes`` an element), each ready at the end of the stretch that computes its
    last gradient."""
    dtype = {4: "float32", 2: "float16"}[gradient_bytes]
    buckets = model.gradient_buckets(fusion_bytes, dtype)
    closes = {}  # the layer whose gradient completes a bucket -> the bucket
    for k, bucket in enumerate(buckets):
        closes[bucket.layers[-1]] = k
    stretches, first, flops = [], None, 0
    for layer in reversed(model.layers):
        first = first or layer.name
        flops += BACKWARD_PER_FORWARD * layer.flops * batch
        k = closes.get(layer.name) if layer.params else None
        if k is not None:
            stretches.append(Stretch(_name(first, layer.name), flops, k))
            first, flops = None, 0
    if first is not None:
        stretches.append(Stretch(_name(first, model.layers[0].name), flops, None))
    return BackwardPlan(model.forward_flops * batch, tuple(stretches),
                        tuple(b.nbytes for b in buckets))


def _name(first: str, last: str) -> str:
    return f"backward {first}" if first == last else f"backward {first}..{last}"


@dataclass
class OverlapLog:
    """What one worker's all-reduces took, and how much of it the backward pass hid."""

    buckets: tuple[int, ...]
    steps: int = 0
    comm_ns: int = 0  # the all-reduces' time (their union, when several run at once)
    hidden_ns: int = 0  # of which before the backward pass ended

    def add(self, intervals, backward_end: int) -> None:
        merged = []
        for start, end in sorted(intervals):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.steps += 1
        self.comm_ns += sum(end - start for start, end in merged)
        self.hidden_ns += sum(max(0, min(end, backward_end) - start) for start, end in merged)

    @property
    def hidden(self) -> float:
        """The share of the all-reduce time hidden behind the backward pass (0 to 1)."""
        return self.hidden_ns / self.comm_ns if self.comm_ns else 0.0


def overlapped_step(ctx, plan: BackwardPlan, total_ns: int, step: int, members, algorithm: str,
                    options: dict, log: OverlapLog, **span_args):
    """One step's forward and backward pass with each bucket all-reduced as it is ready (use
    with ``yield from``); ``total_ns``: the forward and backward time, split by ``plan``."""
    from simdist.collectives import all_reduce

    start = ctx.now
    cuts = plan.split(total_ns)
    ctx.busy(0, "forward", cuts[0], "compute", flops=plan.forward_flops, step=step, **span_args)
    ready, done = {}, None
    for stretch, ns in zip(plan.stretches, cuts[1:]):
        done = ctx.busy(0, stretch.name, ns, "compute", flops=stretch.flops, step=step,
                        **span_args)
        if stretch.bucket is not None:
            ready[stretch.bucket] = done
    intervals = []
    n = len(plan.buckets)

    def reduce(k):
        yield ready[k]
        began = ctx.now
        yield from all_reduce(ctx, members, Phantom(plan.buckets[k]), algorithm=algorithm,
                              **options)
        ctx.span(LANE, f"all-reduce bucket {k + 1}/{n}", "collective", began, ctx.now - began,
                 bucket=k, bytes=plan.buckets[k], step=step)
        intervals.append((began, ctx.now))

    if algorithm in CONCURRENT:
        yield ctx.env.all_of([ctx.process(reduce(k), name=f"bucket {k}") for k in range(n)])
    else:
        for k in range(n):
            yield from reduce(k)
    if done is not None:
        yield done  # the backward pass's end (its last stretch may hold no gradient)
    log.add(intervals, start + sum(cuts))
