"""``realdist run STRATEGY``: train an exercise with a real tf.distribute strategy.

It takes the same exercise options as ``simdist run`` (``Exercise.add_arguments``), prints
every step's loss and time as it goes, and writes the same ``RunResult`` JSON, for
``simdist compare``; parameter_server adds ``--processes`` and ``--evaluation``.
"""

from __future__ import annotations

import os

from simdist.base.errors import InvalidArgumentError
from simdist.base.files import check_outputs
from simdist.distribute.registry import STRATEGIES
from simdist.hardware.tf_config import TFConfig
from simdist.hardware.units import check_seconds
from simdist.training.evaluation import STYLES, describe
from simdist.training.exercises import Exercise


def add_arguments(run) -> None:
    """``realdist run``'s options: the strategy, the exercise's (as ``simdist run``'s) and
    parameter_server's own."""
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


def cmd_run(args) -> int:
    check_seconds(args.timeout, "--timeout")
    exercise = Exercise.from_args(args.strategy, args, seed=args.seed)
    exercise.build()  # a model and dataset that do not fit fail here, before TF starts
    from realdist import check_runs_on_tf

    check_runs_on_tf(exercise)  # before TF starts too
    if os.environ.get("TF_CONFIG"):  # TF reads it too, and fails with a JSON traceback
        TFConfig.from_env()
    check_outputs({"--result": args.result, "--trace": args.trace})
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
        from realdist.training.parameter_server_runner import check_memory

        check_memory(exercise.workers, exercise.ps, bool(  # before TF starts
            args.processes or exercise.failures or (options.get("evaluation") or {}).get("kill")))
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
