"""Synchronous data-parallel training in analytic mode: size-only gradients, for scale.

What a MultiWorkerMirroredStrategy job does each step, with sizes instead of data: every
worker runs the forward and backward pass of its batch (by default 6 FLOPs per parameter and
example: 2 forward, 4 backward, as in Kaplan et al., "Scaling Laws for Neural Language
Models", 2020; a convolutional net reuses each weight all over its image and needs
``--flops-per-example``), all-reduces the gradients of the whole model (a ``Phantom`` of 4
bytes per parameter, 2 with ``--gradient-dtype float16``) and applies them (read the weights
and the gradients, write the weights). With a model of layers (``--model``) the gradients
become ready layer by layer in the backward pass, last layer first, and each bucket of
``--fusion-mb`` is all-reduced as soon as it fills, while the backward pass goes on
(``overlap.py``: PyTorch DDP's buckets, Horovod's fusion buffer); ``--no-overlap`` all-reduces
the whole model after the backward pass, in one piece. With ``--fidelity flow`` the
all-reduce is a few flows (``simdist.collectives.flow``), which is how ``simdist bench scale``
runs 1,024 workers x 100 steps in seconds:

    simdist run data_parallel --workers 1024 --steps 100 --params 25M --fidelity flow --quiet

A real network by name from the model zoo (``simdist.models``) or from a JSON or TOML file
gives the parameters and the FLOPs (its forward FLOPs x 3: forward and backward) instead:

    simdist run data_parallel --model resnet101 --workers 64 --fidelity flow
    simdist run data_parallel --list-models

A sparse model (``--embedding-dim D``): each example also looks up ``--lookups`` rows of an
embedding table of width D. Their gradient is an IndexedSlices (the rows' values and their
int64 indices), which TF's CollectiveAllReduce all-gathers instead of all-reducing, so every
worker receives every other worker's rows and applies them all: the bytes grow with the
workers where a dense all-reduce's stay flat. The all-gather always runs as messages (flow
mode covers all-reduces only).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from simdist.hardware.cluster import ClusterSpec
from simdist.hardware.devices import Layout
from simdist.hardware.host_costs import HostStep
from simdist.base.errors import InvalidArgumentError, SimdistError
from simdist.sim.payloads import Phantom
from simdist.hardware.stragglers import NONE, Stragglers, stragglers_option
from simdist.hardware.units import count_option, format_bytes, format_ns
from simdist.training.programs.overlap import (CONCURRENT, FUSION_BYTES, FUSION_MIB,
                                               BackwardPlan, OverlapLog, backward_plan,
                                               fusion_option, overlapped_step)
from simdist.training.programs.program import Program

#: bytes of one gradient element on the wire, by --gradient-dtype
GRADIENT_BYTES = {"float32": 4, "float16": 2}
INDEX_BYTES = 8  # an IndexedSlices' indices are int64


def add_arguments(parser):
    from simdist.collectives import ALGORITHMS
    from simdist.training.programs.allreduce import add_layout_and_options

    parser.add_argument("--workers", type=int, default=8, help="workers (default 8)")
    parser.add_argument("--steps", type=int, default=10, help="training steps (default 10)")
    parser.add_argument("--params", type=count_option, default=None,
                        help="the model's dense parameters, e.g. 25e6 or 25M (default 25 "
                             "million)")
    parser.add_argument("--model", metavar="NAME|FILE", default=None,
                        help="a model of the zoo (resnet101, bert_base...: --list-models) or "
                             "a .json/.toml model file: its parameters and FLOPs instead of "
                             "--params and --flops-per-example")
    parser.add_argument("--list-models", action=_ListModels,
                        help="list the model zoo (params, GFLOPs, activation MB) and exit")
    parser.add_argument("--batch", type=int, default=32,
                        help="examples per worker per step (default 32)")
    parser.add_argument("--algorithm", default="ring", choices=list(ALGORITHMS),
                        help="the gradients' all-reduce (default ring)")
    parser.add_argument("--flops-per-example", type=count_option, default=None, metavar="F",
                        help="forward+backward FLOPs of one example (default 6 x --params; "
                             "ResNet-50: about 23e9)")
    parser.add_argument("--gradient-dtype", choices=list(GRADIENT_BYTES), default="float32",
                        help="float16: the gradients cross the network at half the bytes")
    parser.add_argument("--embedding-dim", type=int, default=0, metavar="D",
                        help="a sparse model: an embedding of width D besides the dense "
                             "parameters (default 0: dense only)")
    parser.add_argument("--lookups", type=int, default=8,
                        help="embedding rows each example looks up (default 8)")
    parser.add_argument("--stragglers", type=stragglers_option, default=NONE, metavar="SPEC",
                        help="each worker's forward+backward time times a seeded draw: "
                             "lognormal:SIGMA, exponential:MEAN (1 + Exp(MEAN)) or "
                             "empirical:FILE (measured step times over their median); "
                             "default none")
    parser.add_argument("--fusion-mb", type=fusion_option, default=FUSION_BYTES,
                        metavar="SIZE",
                        help=f"with --model: gradients fused into buckets of SIZE, each "
                             f"all-reduced as soon as the backward pass fills it (default "
                             f"{FUSION_MIB}: MiB, PyTorch DDP's bucket_cap_mb, Li et al. VLDB "
                             "2020; Horovod's HOROVOD_FUSION_THRESHOLD is 64MiB; units "
                             "allowed; 0: a bucket per layer)")
    parser.add_argument("--no-overlap", dest="overlap", action="store_false",
                        help="one all-reduce of the whole model after the backward pass (no "
                             "buckets, nothing hidden)")
    add_layout_and_options(parser)


@dataclass(frozen=True)
class WorkerRun:
    """What a worker's ``main`` returns: the end of each step, and its all-reduces' overlap
    with the backward pass (None: one all-reduce after it)."""

    ends: list
    overlap: OverlapLog | None


class _ListModels(argparse.Action):
    """``--list-models``: print the zoo and exit, as ``--help`` does."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=None, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from simdist.models import table

        print(table())
        parser.exit()


def use_model(args) -> None:
    """``--model``: the zoo's (or the file's) parameters and training FLOPs in ``args``, and
    the model itself as ``args.model_layers`` (its gradients in backward order: none given
    with --params alone)."""
    args.model_layers = None
    if getattr(args, "model", None) is None:
        if args.params is None:
            args.params = 25e6
        return
    from simdist.models import model_named

    for given in ("params", "flops_per_example"):
        if getattr(args, given) is not None:
            raise InvalidArgumentError(f"--{given.replace('_', '-')} with --model "
                                       f"{args.model}: the model gives it; expected one or "
                                       "the other")
    model = model_named(args.model)
    args.model_layers = model
    args.params, args.flops_per_example = model.params, model.training_flops


def check(args) -> None:
    from simdist.collectives.flow import no_flow_plan
    from simdist.training.programs.allreduce import options

    use_model(args)
    for name in ("workers", "steps", "batch", "lookups", "tasks_per_machine"):
        value = getattr(args, name)
        if value < 1:
            raise InvalidArgumentError(f"--{name.replace('_', '-')} {value}: expected a whole "
                                       "number >= 1")
    if not args.params >= 1:
        raise InvalidArgumentError(f"--params {args.params:g}: expected a number of "
                                   "parameters >= 1")
    if args.flops_per_example is not None and not args.flops_per_example >= 0:
        raise InvalidArgumentError(f"--flops-per-example {args.flops_per_example:g}: expected "
                                   "a number of FLOPs >= 0")
    if args.embedding_dim < 0:
        raise InvalidArgumentError(f"--embedding-dim {args.embedding_dim}: expected a width "
                                   ">= 0 (0: no embedding)")
    options(args)  # an option the algorithm does not take: an error before anything runs
    why = no_flow_plan(args.algorithm, args.workers, args.tasks_per_machine,
                       getattr(args, "pieces", None) or 1)
    if getattr(args, "fidelity", "message") == "flow" and why:
        raise InvalidArgumentError(f"--fidelity flow: {why}")
    args.backward_plan = None
    if args.model_layers is not None and getattr(args, "overlap", True):
        args.backward_plan = backward_plan(args.model_layers, args.batch,
                                           GRADIENT_BYTES[args.gradient_dtype],
                                           getattr(args, "fusion_mb", FUSION_BYTES))


def setup(args):
    check(args)
    return ClusterSpec({"worker": args.workers}), Layout(tasks_per_machine=args.tasks_per_machine)


def train(ctx, params: int, steps: int, batch: int, algorithm: str = "ring", *,
          flops_per_example: float | None = None, gradient_dtype: str = "float32",
          embedding_dim: int = 0, lookups: int = 8, options: dict | None = None,
          stragglers: Stragglers = NONE, seed: int = 0, plan: BackwardPlan | None = None,
          log: OverlapLog | None = None, input_bytes: int = 0):
    """One worker's training loop (use as a task's main). Returns the end of each step.
    With ``stragglers`` each step's forward+backward time is multiplied by the worker's
    draw (seeded by ``seed`` and the worker). With a ``plan`` (``overlap.backward_plan``: a
    model's buckets) and a ``log`` (``OverlapLog``), each bucket is all-reduced as the
    backward pass fills it (``overlap.overlapped_step``), and ``log`` says how much of their
    time it hid; without, the whole model is all-reduced after the backward pass. Each step
    starts with the host's work (the profile's ``HostCosts`` for a step of ``batch`` inputs of
    ``input_bytes`` each: a span on the host lane where the profile charges any, as a
    calibrated one does; built-in profiles charge none)."""
    from simdist.collectives import all_gather, all_reduce

    members = range(ctx.num_tasks)  # a range: no list of every worker on every worker
    wire = GRADIENT_BYTES[gradient_dtype]
    gradients = Phantom(wire * params)
    flops = (6 * params if flops_per_example is None else flops_per_example) * batch
    rows = batch * lookups if embedding_dim else 0  # embedding rows this worker looks up
    slices = Phantom(rows * (embedding_dim * wire + INDEX_BYTES))  # its IndexedSlices
    factors = stragglers.factors(seed, ctx.order, steps) if stragglers.active else None
    if log is None:
        plan = None
    if plan is not None:
        alone = ctx.hardware.device.compute_time_ns(flops, tasks=ctx.num_tasks)
    host = HostStep(0, batch * input_bytes)
    charged = ctx.hardware.device.host_costs.step_ns(host) > 0
    ends = []
    for step in range(steps):
        if charged:
            yield ctx.host_step(host)
        if rows:
            yield ctx.compute("embedding lookup", nbytes=4 * rows * embedding_dim, step=step)
        if plan is not None:
            extra = {"straggler": round(factors[step], 4)} if factors else {}
            yield from overlapped_step(
                ctx, plan, round(alone * factors[step]) if factors else alone, step, members,
                algorithm, options or {}, log, **extra)
        elif factors:
            alone = ctx.hardware.device.compute_time_ns(flops, tasks=ctx.num_tasks)
            yield ctx.busy(0, "forward+backward", round(alone * factors[step]), "compute",
                           flops=flops, step=step, straggler=round(factors[step], 4))
        else:
            yield ctx.compute("forward+backward", flops=flops, step=step)
        if plan is None:
            yield from all_reduce(ctx, members, gradients, algorithm=algorithm,
                                  **(options or {}))
        yield ctx.compute("apply gradients", flops=2 * params, nbytes=12 * params, step=step)
        if rows:
            yield from all_gather(ctx, members, slices)
            updates = ctx.num_tasks * rows * embedding_dim  # every worker's rows
            yield ctx.compute("apply embedding gradients", flops=2 * updates,
                              nbytes=12 * updates, step=step)
        ends.append(ctx.now)
    return ends


def main(ctx, args):
    from simdist.training.programs.allreduce import options

    plan = getattr(args, "backward_plan", None)  # set by check(): one for every task
    log = None if plan is None else OverlapLog(plan.buckets)
    ends = yield from train(ctx, int(args.params), args.steps, args.batch, args.algorithm,
                            flops_per_example=args.flops_per_example,
                            gradient_dtype=args.gradient_dtype,
                            embedding_dim=args.embedding_dim, lookups=args.lookups,
                            options=options(args), stragglers=args.stragglers, seed=args.seed,
                            plan=plan, log=log,
                            input_bytes=getattr(args.model_layers, "input_bytes", 0))
    return WorkerRun(ends, log)


def report(result, hardware, args) -> str:
    run = next(iter(result.returns.values()))
    step = run.ends[-1] / len(run.ends)
    sparse = ""
    if args.embedding_dim:
        rows = args.batch * args.lookups
        each = rows * (args.embedding_dim * GRADIENT_BYTES[args.gradient_dtype] + INDEX_BYTES)
        sparse = (f", {rows} embedding rows of {args.embedding_dim} per worker all-gathered "
                  f"({format_bytes(each)} each)")
    model = getattr(args, "model_layers", None)
    what = (f"{model.name} ({args.params / 1e6:.1f}M parameters, "
            f"{args.flops_per_example / 1e9:.1f} GFLOPs an example forward and backward, "
            f"{len(model.gradients())} gradients)" if model else
            f"{args.params:.3g}-parameter model")
    return (f"\n{args.workers} workers x {args.steps} steps of a {what} "
            f"({args.gradient_dtype} gradients, {args.algorithm} all-reduce{sparse}, "
            f"{'' if not args.stragglers.active else args.stragglers.describe() + ', '}"
            f"{_fidelity(result)}): {format_ns(round(step))} per step simulated"
            + _efficiency(hardware, args, step) + _overlap(run.overlap, args))


def _fidelity(result) -> str:
    """The fidelity the run had: flow only where its collectives ran as flows (a layout
    without a flow plan falls back to messages; ``check`` refuses the ones it knows)."""
    if result.fidelity != "flow" or not result.messages:
        return f"fidelity {result.fidelity}"
    if not result.flows:
        return (f"fidelity message: flow mode ran no collective as flows, {result.messages:,} "
                "messages")
    return (f"fidelity flow for {result.flows:,} collectives, {result.messages:,} messages "
            "besides")


def _efficiency(hardware, args, step: float) -> str:
    """A dense model's step of compute alone (forward, backward, apply: no all-reduce) over
    the simulated step: what communication costs."""
    if args.embedding_dim:
        return ""
    flops = (6 * args.params if args.flops_per_example is None else
             args.flops_per_example) * args.batch
    device = hardware.device
    alone = (device.compute_time_ns(flops, tasks=args.workers)
             + device.compute_time_ns(2 * int(args.params), 12 * int(args.params),
                                      tasks=args.workers))
    return (f"\nscaling efficiency {alone / step * 100:.1f}% (compute alone "
            f"{format_ns(alone)} a step)")


def _overlap(log: OverlapLog | None, args) -> str:
    """The buckets and how much of their all-reduces the backward pass hid."""
    if log is None:
        why = ("--no-overlap" if getattr(args, "model_layers", None) is not None else
               "--params gives no layers: --model does")
        return (f"\noverlap: none ({why}): one all-reduce of the whole model after the "
                "backward pass")
    sizes = sorted(log.buckets)
    listed = (", ".join(format_bytes(b) for b in log.buckets) if len(sizes) <= 8 else
              f"{format_bytes(sizes[0])} to {format_bytes(sizes[-1])}")
    steps = max(log.steps, 1)
    how = ("each pushed as it is ready" if args.algorithm in CONCURRENT else
           "one after another, each as soon as it fills")
    return (f"\noverlap: {len(log.buckets)} bucket(s) of --fusion-mb "
            f"{format_bytes(args.fusion_mb)} ({listed}), {how}; "
            f"{log.hidden * 100:.1f}% of the all-reduce time "
            f"({format_ns(round(log.hidden_ns / steps))} of {format_ns(round(log.comm_ns / steps))}"
            " a step) hidden behind the backward pass")


def cost(args) -> int:
    """About the events of the run: per step and worker, a few in flow mode; a ring's 2(p-1)
    messages in message mode, each in ``--pieces`` pieces; and an all-gather's p-1 for a
    sparse model."""
    workers = max(args.workers, 1)
    pieces = max(getattr(args, "pieces", None) or 1, 1)
    buckets = _buckets(args)
    per_step = (6 if args.fidelity == "flow" else 2 * workers * pieces + 6) * buckets
    if getattr(args, "embedding_dim", 0):
        per_step += 2 * workers
    return args.steps * args.workers * per_step


def _buckets(args) -> int:
    """The all-reduces of a step: the model's buckets when it overlaps, else 1."""
    name = getattr(args, "model", None)
    if name is None or not getattr(args, "overlap", True):
        return 1
    from simdist.models import model_named

    try:
        model = model_named(name)
    except SimdistError:
        return 1  # setup says what is wrong with it
    fusion = getattr(args, "fusion_mb", FUSION_BYTES)
    return len(model.gradient_buckets(fusion, getattr(args, "gradient_dtype", "float32")))


PROGRAM = Program(
    name="data_parallel",
    summary="synchronous data-parallel training with size-only gradients (for scale: "
            "--fidelity flow)",
    setup=setup,
    main=main,
    add_arguments=add_arguments,
    report=report,
    cost=cost,
)
