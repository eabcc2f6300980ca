"""``realdist ps``: simdist ps's between-graph program on real TF (tf.compat.v1, graph mode),
sync with SyncReplicasOptimizer or async, one process per task; ``--compare`` simulates the
same program and prints both side by side.
"""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError
from simdist.base.files import check_outputs

from realdist.commands import save_trace


def add_arguments(ps) -> None:
    """``realdist ps``'s options: simdist ps's, with step times and failures in wall time."""
    ps.add_argument("--mode", choices=["sync", "async"], default="sync")
    ps.add_argument("--workers", type=int, default=3)
    ps.add_argument("--ps", type=int, default=1, help="parameter server tasks")
    ps.add_argument("--steps", type=int, default=10, help="stop at this global step")
    ps.add_argument("--step-ms", metavar="T0,T1,...",
                    help="each worker's compute time per step in ms (default 100 each)")
    ps.add_argument("--replicas-to-aggregate", type=int,
                    help="sync: gradients per step (default: --workers)")
    ps.add_argument("--learning-rate", type=float, default=0.05)
    ps.add_argument("--seed", type=int, default=0)
    ps.add_argument("--model", choices=["dense", "sparse"], default="dense",
                    help="dense: every weight in every step; sparse: each example looks up "
                         "8 of them (an embedding; sync gradients go through a "
                         "SparseConditionalAccumulator)")
    ps.add_argument("--fail", action="append", default=[], metavar="TASK@TIME+DOWN",
                    help="kill TASK's process (ps:0, worker:1...) TIME after the start line "
                         "and start it again DOWN later, e.g. ps:0@1s+500ms (repeatable; "
                         "simdist ps's --fail)")
    ps.add_argument("--checkpoint-dir", metavar="DIR",
                    help="MonitoredTrainingSession's: the chief saves checkpoints here and "
                         "restores from them (give an empty folder: it restores what it finds)")
    ps.add_argument("--save-checkpoint-steps", type=int,
                    help="save a checkpoint every this many global steps")
    ps.add_argument("--compare", action="store_true",
                    help="also simulate the same program with simdist (step_us = step_ms x "
                         "1000) and print both side by side")
    ps.add_argument("--timeout", type=float, default=240, metavar="S")
    ps.add_argument("--trace", metavar="FILE", help="write the Chrome/Perfetto trace JSON here")


def _step_ms(text):
    """'100,170,400' -> [100.0, 170.0, 400.0] (None stays None)."""
    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise InvalidArgumentError(f"--step-ms {text!r}: expected step times in ms, one per "
                                   "worker, separated by commas (e.g. 100,170,400)") from None


def cmd_ps(args) -> int:
    from realdist.training.ps_programs import check_train_on_ps, real_train_on_ps

    options = dict(workers=args.workers, ps=args.ps, mode=args.mode, steps=args.steps,
                   step_ms=_step_ms(args.step_ms),
                   replicas_to_aggregate=args.replicas_to_aggregate,
                   learning_rate=args.learning_rate,
                   failures=args.fail,
                   checkpoint_dir=args.checkpoint_dir,
                   save_checkpoint_steps=args.save_checkpoint_steps, timeout=args.timeout,
                   model=args.model)
    check_train_on_ps(**options, seed=args.seed)
    check_outputs({"--trace": (args.trace, ".json")},
                  {"--checkpoint-dir": args.checkpoint_dir})
    print(f"realdist: {args.mode} training, {args.workers} worker and {args.ps} ps "
          "processes on localhost; starting TensorFlow...", flush=True)
    run = real_train_on_ps(seed=args.seed, **options)
    for line in run.describe():
        print(line)
    if args.compare:
        from realdist.training.ps_compare import compare_ps_runs, format_comparison, simulate_like

        print("simdist: the same program simulated (step_us = step_ms x 1000)...", flush=True)
        rows = compare_ps_runs(simulate_like(run.trace.metadata["options"]), run)
        for line in format_comparison(rows):
            print("  " + line)
    save_trace(run.trace, args.trace)
    return 0
