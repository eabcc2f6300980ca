"""Synchronous data-parallel training with a tf.distribute strategy, one program per strategy
record (``simdist.distribute.registry``): ``simdist run mirrored --replicas 4``, ``simdist run
multi_worker_mirrored --workers 2`` ... The options are the exercise's
(``Exercise.add_arguments``), the same as ``realdist run``'s; ``--result FILE`` writes the
``RunResult`` for ``simdist compare``."""

from __future__ import annotations

from simdist.training.exercises import Exercise
from simdist.training.loop import training_loop
from simdist.training.programs.program import Program


def _exercise(strategy: str, args) -> Exercise:
    from simdist.distribute.registry import strategy_named

    hardware = strategy_named(strategy).default_hardware if args.profile is None \
        else args.profile
    return Exercise.from_args(strategy, args, seed=args.seed, hardware=hardware)


def make_program(record) -> Program:
    """The ``simdist run`` program of a strategy record."""
    loop = training_loop(record)
    strategy = record.name
    run = {}  # the tasks' main of the run that setup prepared, and its finish
    evaluates = record.asynchronous  # parameter_server: evaluation.py's styles

    def add_arguments(parser):
        Exercise.add_arguments(parser)
        if evaluates:
            from simdist.training.evaluation import STYLES

            parser.add_argument("--evaluation", choices=STYLES, metavar="STYLE",
                                help="evaluate after training: " + ", ".join(STYLES)
                                + " (TF's parameter-server training guide; sidecar adds an "
                                "evaluator task reading the checkpoints)")

    def setup(args):
        exercise = _exercise(strategy, args)
        exercise.build()  # model/dataset mismatches before anything runs
        run["finish"] = lambda result, out: result
        if getattr(args, "evaluation", None):
            from simdist.hardware.cluster import ClusterSpec
            from simdist.training.evaluation import evaluation_program

            jobs, run["main"], run["finish"] = evaluation_program(exercise, args.evaluation)
            return ClusterSpec(jobs), loop.cluster_and_layout(exercise)[1]
        run["main"] = loop.make_main(exercise)
        return loop.cluster_and_layout(exercise)

    def main(ctx, args):
        return run["main"](ctx)

    def result_of(result, hardware, args):
        return run["finish"](loop.to_run_result(_exercise(strategy, args), result, hardware),
                             result)

    def report(result, hardware, args) -> str:
        from simdist.training.compare import format_run

        done = result_of(result, hardware, args)
        text = "\n" + format_run(done)
        if getattr(args, "evaluation", None):
            from simdist.training.evaluation import describe

            text += "\n" + describe(done.metadata["evaluation"])
        return text

    def save(result, hardware, args) -> list[str]:
        if not args.result:
            return []
        run = result_of(result, hardware, args)
        saved = run.save(args.result, with_trace=not args.result_no_trace)
        return [f"result:   {saved}  (simdist compare it with a realdist run)"]

    def cost(args) -> int:
        """About the events of the run: per step, the replicas' all-reduce (~8 n^2 events
        for n replicas) and their computations."""
        exercise = _exercise(strategy, args)
        return exercise.steps * (8 * exercise.num_replicas ** 2 + 100)

    return Program(name=strategy, summary=record.summary, setup=setup, main=main,
                   default_system=record.default_hardware, add_arguments=add_arguments,
                   report=report, save=save, cost=cost)
