"""``simdist ps``: between-graph training on parameter servers, synchronous or asynchronous.

Every worker is a TF1 client program (its own graph, variables on the ps through
replica_device_setter) running at once on one simulated cluster. ``--mode sync`` wraps the
optimizer in SyncReplicasOptimizer (gradients gathered in ConditionalAccumulators on the ps,
the chief applies their mean and hands out tokens; with --replicas-to-aggregate below
--workers the others are backup workers and their late gradients are dropped);
``--mode async`` lets each worker apply its gradient at once, so gradients are stale by the
updates others made meanwhile. It prints each worker's steps, applied and dropped gradients
and the staleness, and draws loss, global step and gradients (--plot) or the timeline.
"""

from __future__ import annotations

import argparse
import sys

from simdist.base.files import check_outputs
from simdist.commands import option_type, parse_on_rank_0, reporting_errors, run_limits
from simdist.distribute.failures import SYNTAX, Failure
from simdist.hardware.stragglers import NONE, stragglers_option
from simdist.sim.launcher import mpiexec_world


def _step_times(text: str) -> list[float]:
    from simdist.base.errors import InvalidArgumentError

    try:
        times = [float(part) for part in text.split(",")]
    except ValueError:
        raise InvalidArgumentError(f"--step-us {text!r}: expected step times in us, one per "
                                   "worker, separated by commas (e.g. 1000,1000,3500)") from None
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="simdist ps", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples: simdist ps --workers 3 --replicas-to-aggregate 2 --step-us "
               "1000,1000,3500 --plot out/sync.png;  simdist ps --mode async --workers 4 "
               "--step-us 1000,1200,1500,4000 --plot out/async.png")
    parser.add_argument("--mode", choices=["sync", "async"], default="sync")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--ps", type=int, default=1, help="parameter server tasks")
    parser.add_argument("--steps", type=int, default=10, help="stop at this global step")
    parser.add_argument("--step-us", type=option_type(_step_times), metavar="T0,T1,...",
                        help="each worker's compute time per step in us (default 1000 each)")
    parser.add_argument("--replicas-to-aggregate", type=int,
                        help="sync: gradients per step (default: --workers)")
    parser.add_argument("--stall-us", type=float, default=0.0,
                        help="a straggling step's time in us (with --stall-probability)")
    parser.add_argument("--stall-probability", type=float, default=0.0,
                        help="chance that a step straggles (seeded per worker)")
    parser.add_argument("--stragglers", type=stragglers_option, default=NONE, metavar="SPEC",
                        help="each step's compute time times a factor drawn per worker and "
                             "step: lognormal:SIGMA, exponential:MEAN or empirical:FILE of "
                             "measured step times (as simdist run data_parallel's)")
    parser.add_argument("--max-staleness", type=int,
                        help="async: drop gradients staler than this many updates")
    parser.add_argument("--staleness-weighting", action="store_true",
                        help="async: scale each gradient by 1 / (1 + its staleness)")
    parser.add_argument("--warmup-steps", type=int, default=0,
                        help="async: worker 0 trains alone until this global step")
    parser.add_argument("--fail", type=option_type(Failure.parse), action="append", default=[],
                        metavar=SYNTAX,
                        help="inject a failure: ps:0@8ms+2ms fails ps:0 8 ms into the run and "
                             "restarts it 2 ms later (never, without +DOWN; repeatable)")
    parser.add_argument("--checkpoint-dir", metavar="DIR",
                        help="the chief saves checkpoints here and restores from them")
    parser.add_argument("--save-checkpoint-steps", type=int,
                        help="save a checkpoint every this many global steps")
    parser.add_argument("--features", type=int, default=8,
                        help="the model's weights (a million: 4 MB that every step moves)")
    parser.add_argument("--examples", type=int, default=32, help="examples per worker")
    parser.add_argument("--model", choices=["dense", "sparse"], default="dense",
                        help="sparse: each example looks up 8 of --features weights (an "
                             "embedding); async, one ps")
    parser.add_argument("--gradient-dtype", choices=["float32", "float16"], default="float32",
                        help="float16: gradients cross the network at half the bytes")
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace", metavar="JSON", help="write the Chrome/Perfetto trace")
    parser.add_argument("--plot", metavar="PNG", help="draw loss, global step and gradients")
    parser.add_argument("--timeline", metavar="PNG", help="draw the timeline of every task")
    run_limits.add_arguments(parser)
    rank, ranks = mpiexec_world()
    args = parse_on_rank_0(parser, list(sys.argv[1:] if argv is None else argv), rank)
    args.transport = None
    if ranks > 1:  # the tasks spread over the ranks; rank 0 reports and writes the files
        from simdist.sim.transports import MPITransport

        args.transport = MPITransport(watchdog_s=args.timeout)
    try:  # every rank meets the same error at the same point: rank 0 says it once
        return reporting_errors("simdist ps", _train, args, quiet=rank != 0)
    finally:
        if args.transport is not None:
            args.transport.finalize()  # a non-zero exit then ends the job without an abort


def _train(args) -> int:
    from simdist.training.ps_sweeps import plot_ps_training
    from simdist.training.ps_spec import PSTrainingSpec
    from simdist.training.ps_training import run_ps_training
    from simdist.trace.plots import plot_timeline

    check_outputs({"--plot": (args.plot, ".png"), "--timeline": (args.timeline, ".png"),
                   "--trace": (args.trace, ".json")}, {"--checkpoint-dir": args.checkpoint_dir})
    with run_limits.run_limits(args) as limits:  # simdist run's limits, with its defaults
        spec = PSTrainingSpec(workers=args.workers, ps=args.ps, mode=args.mode, steps=args.steps,
                              step_us=args.step_us,
                              replicas_to_aggregate=args.replicas_to_aggregate,
                              learning_rate=args.learning_rate, seed=args.seed,
                              stall_us=args.stall_us, stall_probability=args.stall_probability,
                              stragglers=args.stragglers,
                              max_staleness=args.max_staleness,
                              staleness_weighting=args.staleness_weighting,
                              warmup_steps=args.warmup_steps, failures=args.fail,
                              checkpoint_dir=args.checkpoint_dir,
                              save_checkpoint_steps=args.save_checkpoint_steps,
                              features=args.features, examples=args.examples,
                              gradient_dtype=args.gradient_dtype, model=args.model, limits=limits)
        run = run_ps_training(spec, args.transport)
    if run is None:  # an MPI rank other than 0: rank 0 reports
        return 0
    for line in run.describe():
        print(line)
    if args.transport is not None:  # how the tasks sat on the ranks, and whether ranks help
        from simdist.commands.placement import placement, print_report
        from simdist.graph import Machine

        print_report(placement(args.workers + args.ps, args.transport.size,
                               Machine().hardware),  # the servers' default machine
                     args.transport.tally, sys.stderr)
    if args.plot:
        plot_ps_training(run, args.plot)
        print(f"figure: {args.plot}")
    if args.timeline:
        plot_timeline(run.trace, args.timeline)
        print(f"timeline: {args.timeline}")
    if args.trace:
        print(f"trace: {run.trace.save(args.trace)} (open it in https://ui.perfetto.dev)")
    return 0
