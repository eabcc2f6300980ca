"""The ``realdist`` command: run an exercise on real TensorFlow, show devices, show TF's split.

    realdist run mirrored --replicas 4 --steps 20 --result out/real.json --trace out/trace.json
    realdist run multi_worker_mirrored --workers 2 --replicas 1
    realdist run parameter_server --workers 2 --ps 2 --processes --fail worker:1@2s+1s
    realdist devices
    realdist split mirrored --replicas 4 --global-batch 7 --examples 16
    realdist queues padded '[[1], [2, 3, 4], [5, 6]]'
    realdist queues loader-trainer --capacity 8 --loaders 2 --trace out/queue.json
    realdist queues ensemble --predictors 3 --slow 2 --timeout-ms 500
    realdist queues facts --check
    realdist ps --mode sync --workers 3 --replicas-to-aggregate 2 --step-ms 120,150,500 --compare
    realdist ps --workers 2 --step-ms 100,170 --fail ps:0@1s+500ms --checkpoint-dir D --compare

``realdist run`` takes the same exercise options as ``simdist run`` (``Exercise.add_arguments``)
and writes the same ``RunResult`` JSON, for ``simdist compare``. Bad input is one line,
``realdist: error: ...``, and exit status 2; a run that fails or times out exits with 1.
"""

from __future__ import annotations

import argparse
import os
import sys

from simdist.base.errors import (DeadlineExceededError, InvalidArgumentError, SimdistError,
                            UnavailableError)
from simdist.hardware.cluster import TFConfig
from simdist.training.evaluation import STYLES, describe
from simdist.distribute.registry import STRATEGIES
from simdist.training.exercises import Exercise
from simdist.base.files import check_output
from simdist.hardware.units import check_seconds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="realdist", description="DistLab exercises on real TensorFlow strategies")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train an exercise with a real tf.distribute strategy")
    run.add_argument("strategy", metavar="STRATEGY", help="one of " + ", ".join(
        f"{name} ({record.tf_class})" for name, record in STRATEGIES.items()))
    Exercise.add_arguments(run)
    run.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    run.add_argument("--timeout", type=float, default=300, metavar="S",
                     help="give up after S seconds (default 300)")
    run.add_argument("--trace", metavar="FILE", help="write the Chrome/Perfetto trace JSON here")
    run.add_argument("--processes", action="store_true",
                     help="parameter_server: one process per worker and ps task (default: "
                          "all in the coordinator's process, unless --fail kills a worker)")
    run.add_argument("--evaluation", choices=STYLES, metavar="STYLE",
                     help="parameter_server: evaluate after training, " + ", ".join(STYLES)
                          + " (as simdist run parameter_server --evaluation; sidecar: an "
                          "evaluator process reading the checkpoints of every epoch)")
    sub.add_parser("devices", help="the CPUs, GPUs and TPU that real runs can use")
    measure = sub.add_parser("measure", help="step times of a plan of exercises (what simdist "
                                             "calibrate and simdist bench predict run)",
                             add_help=False)
    measure.add_argument("rest", nargs=argparse.REMAINDER,
                         help="'realdist measure --help' for its options")
    split = sub.add_parser("split", help="which examples each replica receives (TF's own "
                                         "split of a global batch)")
    split.add_argument("strategy", metavar="STRATEGY", choices=["mirrored",
                                                                "multi_worker_mirrored"])
    split.add_argument("--replicas", type=int, default=4, help="replicas per worker")
    split.add_argument("--workers", type=int, default=2, help="workers (multi_worker_mirrored)")
    split.add_argument("--global-batch", type=int, default=7)
    split.add_argument("--examples", type=int, default=16, help="examples in the dataset")
    split.add_argument("--timeout", type=float, default=120, metavar="S")
    _add_queue_commands(sub.add_parser("queues", help="TF1 queues on real TF: their facts, "
                                       "padded batches, a loader/trainer, an ensemble"))
    _add_ps_command(sub.add_parser(
        "ps", help="between-graph training on parameter servers (sync with "
                   "SyncReplicasOptimizer, or async), one process per task",
        description="simdist ps's program on real TF 2.21 (tf.compat.v1, graph mode): "
                    "each worker's own graph with replica_device_setter, "
                    "MonitoredTrainingSession, StopAtStepHook, and for --mode sync "
                    "SyncReplicasOptimizer with its hook; prints what `simdist ps` prints"))
    return parser


def _add_ps_command(ps) -> None:
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


def _add_queue_commands(queues) -> None:
    sub = queues.add_subparsers(dest="queue_command", required=True)
    facts = sub.add_parser("facts", help="record what real TF1 queues do (op names, shapes, "
                                         "errors) as JSON; print it unless --write/--check")
    facts.add_argument("--write", action="store_true", help="write it to --output")
    facts.add_argument("--check", action="store_true",
                       help="compare it with --output; exit 1 where they differ")
    facts.add_argument("--output", metavar="FILE", help="the fact sheet (default: "
                       "tests/data/tf_queue_facts.json of this checkout)")
    facts.add_argument("--timeout", type=float, default=180, metavar="S")
    padded = sub.add_parser("padded", help="the batch real TF's PaddingFIFOQueue.dequeue_many "
                                           "gives for some elements")
    padded.add_argument("values", metavar="VALUES",
                        help="the elements as a JSON list, e.g. '[[1], [2, 3, 4], [5, 6]]'")
    padded.add_argument("--shape", help="the queue's element shape, e.g. 'None' or "
                                        "'None,2' (default: None in every dimension)")
    padded.add_argument("--dtype", help="int32, float32, string, bool (default: from the "
                                        "first element)")
    padded.add_argument("--timeout", type=float, default=120, metavar="S")
    loader = sub.add_parser("loader-trainer", help="a loader client fills a shared FIFOQueue "
                                                   "while a trainer client consumes it")
    loader.add_argument("--capacity", type=int, default=8, help="queue capacity (examples)")
    loader.add_argument("--loaders", type=int, default=2, help="enqueue threads")
    loader.add_argument("--steps", type=int, default=20)
    loader.add_argument("--batch", type=int, default=2, help="examples per training step")
    loader.add_argument("--load-ms", type=float, default=20.0, help="time to read an example")
    loader.add_argument("--train-ms", type=float, default=10.0, help="time of a step")
    loader.add_argument("--tf-data", action="store_true",
                        help="also run the same trainer fed by tf.data (shuffle buffer = "
                             "--capacity), for comparison")
    loader.add_argument("--compare", action="store_true",
                        help="also simulate the same program in simdist and print both "
                             "(steps/s, starvation, queue size) with their ratio")
    loader.add_argument("--plot", metavar="PNG",
                        help="with --compare: draw the queue's occupancy and the trainer's "
                             "waits, simulated above real")
    ensemble = sub.add_parser("ensemble", help="the between-graph ensemble: predictor "
                                               "clients, an aggregator with a timeout")
    ensemble.add_argument("--predictors", type=int, default=2)
    ensemble.add_argument("--inputs", type=int, default=3)
    ensemble.add_argument("--slow", type=int, help="this predictor takes --slow-ms")
    ensemble.add_argument("--predict-ms", type=float, default=5.0)
    ensemble.add_argument("--slow-ms", type=float, default=1500.0)
    ensemble.add_argument("--timeout-ms", type=int, default=500,
                          help="the aggregator's operation_timeout_in_ms")
    for program in (loader, ensemble):
        program.add_argument("--timeout", type=float, default=120, metavar="S")
        program.add_argument("--trace", metavar="FILE",
                             help="write the Chrome/Perfetto trace JSON here")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["measure"]:
        from realdist.calibration.measure import main as measure_main

        return measure_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return {"run": cmd_run, "devices": cmd_devices, "split": cmd_split,
                "queues": cmd_queues, "ps": cmd_ps}[args.command](args)
    except (DeadlineExceededError, UnavailableError) as error:
        print(f"realdist: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except SimdistError as error:
        print(f"realdist: error: {error}", file=sys.stderr)
        return 2
    except MemoryError as error:
        print(f"realdist: error: out of memory ({error or 'MemoryError'}): give smaller sizes",
              file=sys.stderr)
        return 2


def cmd_run(args) -> int:
    check_seconds(args.timeout, "--timeout")
    exercise = Exercise.from_args(args.strategy, args, seed=args.seed)
    exercise.build()  # a model and dataset that do not fit fail here, before TF starts
    if os.environ.get("TF_CONFIG"):  # TF reads it too, and fails with a JSON traceback
        TFConfig.from_env()
    check_output(args.result, "--result")
    check_output(args.trace, "--trace")
    options = {}
    if args.processes:
        if exercise.strategy != "parameter_server":
            raise InvalidArgumentError(f"--processes is parameter_server's option, not "
                                       f"{exercise.strategy}'s")
        options["processes"] = True
    if args.evaluation:
        if exercise.strategy != "parameter_server":
            raise InvalidArgumentError(f"--evaluation is parameter_server's option, not "
                                       f"{exercise.strategy}'s")
        from realdist.training.parameter_server_eval import check_options

        options["evaluation"] = check_options(exercise, args.evaluation)
    from realdist import run_exercise

    where = (f"{exercise.workers} worker processes x {exercise.devices_per_worker}"
             if STRATEGIES[exercise.strategy].multi_worker else "this process")
    if STRATEGIES[exercise.strategy].asynchronous:  # parameter_server
        where = (f"{exercise.workers} workers and {exercise.ps} ps with a coordinator, "
                 + ("one process per task" if args.processes or exercise.failures
                    else "in one process"))
    print(f"realdist: {exercise.strategy}, {exercise.num_replicas} replica(s) ({where}), "
          f"model {exercise.model} on {exercise.dataset}, global batch "
          f"{exercise.global_batch}, {exercise.steps} steps; starting TensorFlow...",
          flush=True)

    def on_step(k, loss, ns):
        if k == 0:
            print(f"{'step':>5} {'loss':>12} {'step time (ms)':>15}")
        print(f"{k:>5} {loss:>12.6f} {ns / 1e6:>15.2f}", flush=True)

    result = run_exercise(exercise, timeout=args.timeout, on_step=on_step, **options)
    meta = result.metadata
    later = result.step_times_ns[1:] or result.step_times_ns
    print(f"realdist: TensorFlow {meta['tensorflow']} {meta['strategy_class']} on "
          f"{', '.join(_short(d) for d in meta['devices'])}; cross-device "
          f"reduction: {meta['cross_device_ops']}")
    print(f"realdist: final loss {result.losses[-1]:.6f}; mean step time "
          f"{sum(later) / len(later) / 1e6:.2f} ms (after step 0, which traces the functions)")
    if "function_runs" in meta:  # parameter_server
        _print_function_runs(meta)
    if "evaluation" in meta:
        print(f"realdist: {describe(meta['evaluation'])}")
    if args.result:
        saved = result.save(args.result, with_trace=not args.result_no_trace)
        print(f"realdist: run result written to {saved}")
    if args.trace:
        print(f"realdist: trace written to {result.trace.save(args.trace)} (open it in "
              "https://ui.perfetto.dev)")
    return 0


def _print_function_runs(meta: dict) -> None:
    runs = meta["function_runs"]
    again = [name for name, n in runs.items() if n > 1]
    print(f"realdist: {meta['cluster']}; {meta['functions']} functions scheduled, "
          f"{sum(runs.values())} runs started ({', '.join(again) or 'none'} ran again), "
          f"{meta['iterations']} steps applied; {meta['function_ns_per_step'] / 1e6:.2f} ms "
          "per step inside the functions")
    for kill in meta["kills"]:
        back = (f", restarted at {kill['restarted'] / 1e9:.2f} s" if kill["restarted"]
                else "") + (f", serving again at {kill['serving'] / 1e9:.2f} s"
                            if kill["serving"] else "")
        print(f"realdist: {kill['task']} killed (SIGKILL) at {kill['killed'] / 1e9:.2f} s{back}")
    failures = meta["failures"]
    if len(meta["kills"]) < len(failures):
        print(f"realdist: {len(failures) - len(meta['kills'])} of the failures "
              f"{', '.join(failures)} did not happen: the training ended first")


def _short(device: str) -> str:
    """'/job:localhost/replica:0/task:0/device:CPU:1' -> 'CPU:1'; other jobs keep the task."""
    return (device.replace("/job:localhost/replica:0/task:0/device:", "")
            .replace("/job:worker/replica:0/task:", "worker:").replace("/device:", " "))


def cmd_devices(args) -> int:
    from realdist.runtime.devices import describe

    for line in describe():
        print(line)
    return 0


def cmd_split(args) -> int:
    from simdist.distribute.input_lib import split_global_batch

    check_seconds(args.timeout, "--timeout")
    for name in ("replicas", "workers", "global_batch", "examples"):
        if getattr(args, name) < 1:
            raise InvalidArgumentError(f"--{name.replace('_', '-')} must be >= 1, got "
                                       f"{getattr(args, name)}")
    if args.strategy == "mirrored":
        from realdist.runtime.devices import replica_devices
        from realdist.distribute.split import received_ids
        from realdist.runtime.tfenv import tf

        devices, _ = replica_devices(args.replicas)
        workers = [received_ids(tf.distribute.MirroredStrategy(devices), args.examples,
                                args.global_batch)]
        replicas = args.replicas
    else:
        from realdist.distribute.multiworker import multi_worker_split

        workers = multi_worker_split(args.workers, args.examples, args.global_batch,
                                     timeout=args.timeout)
        replicas = args.workers
    from realdist.distribute.split import format_split

    print(f"TF's split of global batches of {args.global_batch} over {replicas} replicas "
          f"(simdist.distribute.input_lib.split_global_batch: {split_global_batch(args.global_batch, replicas)})")
    for line in format_split(workers):
        print(line)
    return 0


def cmd_queues(args) -> int:
    return {"facts": _queue_facts, "padded": _padded, "loader-trainer": _loader_trainer,
            "ensemble": _ensemble}[args.queue_command](args)


def _queue_facts(args) -> int:
    import json

    from realdist.graph import queues

    path = args.output or queues.FACTS_PATH
    recorded = queues.load_facts(path) if args.check else None  # a missing file fails first
    facts = queues.queue_facts(timeout=args.timeout)
    if args.check:
        changes = queues.differences(recorded, facts)
        for line in changes:
            print(line)
        print(f"realdist: {len(changes)} difference(s) between real TF and {path}")
        return 1 if changes else 0
    if args.write:
        print(f"realdist: TF {facts['tensorflow']}'s queue facts written to "
              f"{queues.write_facts(facts, path)}")
    else:
        print(json.dumps(facts, indent=1, sort_keys=True))
    return 0


def _shape(text: str) -> list:
    """'None,2' (or '[None, 2]', '?' or -1 for None) -> [None, 2]."""
    dims = [d.strip() for d in text.strip("[]()").split(",") if d.strip()]
    try:
        return [None if d in ("None", "?", "-1") else int(d) for d in dims]
    except ValueError:
        raise InvalidArgumentError(f"--shape {text!r}: expected dimensions separated by "
                                   "commas, each an int or None, e.g. 'None,2'") from None


def _padded(args) -> int:
    import json

    import numpy as np

    from realdist.graph.queues import padded_batch

    try:
        values = json.loads(args.values)
    except ValueError as error:
        raise InvalidArgumentError(f"VALUES {args.values!r} is not JSON ({error}); expected "
                                   "a list of elements such as '[[1], [2, 3, 4]]'") from None
    if not isinstance(values, list) or not values:
        raise InvalidArgumentError(f"VALUES must be a non-empty JSON list of elements, got "
                                   f"{args.values!r}")
    shape = [None] * np.ndim(values[0]) if args.shape is None else _shape(args.shape)
    batch = padded_batch([shape], values, None if args.dtype is None else [args.dtype],
                         timeout=args.timeout)
    print(f"PaddingFIFOQueue(shapes=[{tuple(shape)}]).dequeue_many({len(values)}) on "
          f"real TF: shape {tuple(batch.shape)}, dtype {batch.dtype}")
    print(batch)
    return 0


def _loader_trainer(args) -> int:
    from realdist.training.queue_programs import (check_loader_trainer, describe_pipeline,
                                 real_dataset_trainer, real_loader_trainer)

    check_loader_trainer(args.capacity, args.loaders, args.steps, args.batch, args.load_ms,
                         args.train_ms)
    options = dict(loaders=args.loaders, steps=args.steps, batch=args.batch,
                   load_ms=args.load_ms, train_ms=args.train_ms, timeout=args.timeout)
    print(f"realdist: a loader (worker:1, {args.loaders} QueueRunner threads) and a trainer "
          f"(worker:0) sharing FIFOQueue 'examples' (capacity {args.capacity}) on ps:0; "
          "starting TensorFlow...", flush=True)
    run = real_loader_trainer(capacity=args.capacity, **options)
    for line in describe_pipeline(run):
        print("  " + line)
    if args.compare:
        _compare_pipeline(run, args.plot)
    if args.tf_data:
        print(f"realdist: the same trainer fed by tf.data (map with {args.loaders} parallel "
              f"reads, shuffle({args.capacity}), batch, prefetch)...", flush=True)
        for line in describe_pipeline(real_dataset_trainer(buffer=args.capacity, **options)):
            print("  " + line)
    _save_trace(run.trace, args.trace)
    return 0


def _compare_pipeline(run, plot) -> None:
    from simdist.trace.plots import plot_queue_comparison

    from realdist.training.queue_compare import compare_pipelines, format_comparison, simulate_like

    print("simdist: the same program simulated (reads and steps of the same length)...",
          flush=True)
    simulated = simulate_like(run.trace.metadata["options"])
    for line in format_comparison(compare_pipelines(simulated, run)):
        print("  " + line)
    if plot:
        plot_queue_comparison({"simulated": simulated.trace, "real TF": run.trace}, "examples",
                              plot, "the loader/trainer queue, simulated and on real TF")
        print(f"realdist: occupancy plot written to {plot}")


def _ensemble(args) -> int:
    from realdist.training.queue_programs import check_ensemble, real_ensemble

    check_ensemble(args.predictors, args.inputs, args.slow, args.predict_ms, args.slow_ms,
                   args.timeout_ms)
    print(f"realdist: {args.predictors} predictor clients, an aggregator with "
          f"operation_timeout_in_ms={args.timeout_ms}; starting TensorFlow...", flush=True)
    run = real_ensemble(args.predictors, args.inputs, args.slow, args.predict_ms,
                        args.slow_ms, args.timeout_ms, args.timeout)
    for i, (got, mean) in enumerate(zip(run.received, run.means)):
        print(f"  input {i}: predictions {got} -> mean {mean}")
    print(f"  timed-out waits: {run.timeouts}; late predictions dropped (input, predictor): "
          f"{run.late}; predictors stopped by: {run.ended_by}")
    _save_trace(run.trace, args.trace)
    return 0


def _save_trace(trace, path) -> None:
    if path:
        print(f"realdist: trace written to {trace.save(path)} (open it in "
              "https://ui.perfetto.dev)")


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
    check_output(args.trace, "--trace", ".json")
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
    _save_trace(run.trace, args.trace)
    return 0
