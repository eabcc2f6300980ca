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
The subcommands with options of their own (run, split, queues, ps, tf1) are modules of
``realdist/commands/``; ``measure`` parses its own (``realdist.calibration.measure``).
"""

from __future__ import annotations

import argparse
import sys

from simdist.base.errors import DeadlineExceededError, SimdistError, UnavailableError

from realdist.commands import ps, queues, run, split, tf1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="realdist", description="DistLab exercises on real TensorFlow strategies")
    sub = parser.add_subparsers(dest="command", required=True)
    run.add_arguments(sub.add_parser(
        "run", help="train an exercise with a real tf.distribute strategy"))
    sub.add_parser("devices", help="the CPUs, GPUs and TPU that real runs can use")
    measure = sub.add_parser("measure", help="step times of a plan of exercises (what simdist "
                                             "calibrate and simdist bench predict run)",
                             add_help=False)
    measure.add_argument("rest", nargs=argparse.REMAINDER,
                         help="'realdist measure --help' for its options")
    split.add_arguments(sub.add_parser("split", help="which examples each replica receives "
                                                     "(TF's own split of a global batch)"))
    queues.add_arguments(sub.add_parser("queues", help="TF1 queues on real TF: their facts, "
                                        "padded batches, a loader/trainer, an ensemble"))
    ps.add_arguments(sub.add_parser(
        "ps", help="between-graph training on parameter servers (sync with "
                   "SyncReplicasOptimizer, or async), one process per task",
        description="simdist ps's program on real TF 2.21 (tf.compat.v1, graph mode): "
                    "each worker's own graph with replica_device_setter, "
                    "MonitoredTrainingSession, StopAtStepHook, and for --mode sync "
                    "SyncReplicasOptimizer with its hook; prints what `simdist ps` prints"))
    sub.add_parser("tf1", add_help=False,
                   help="a TF1 script once per task, one process each (what simdist tf1 "
                        "simulates): realdist tf1 SCRIPT --cluster ps=1,worker=3").add_argument(
        "rest", nargs=argparse.REMAINDER, help="'realdist tf1 --help' for its options")
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["measure"]:
        from realdist.calibration.measure import main as measure_main

        return measure_main(argv[1:])
    if argv[:1] == ["tf1"]:  # its own options, and the script's after --
        command, args = tf1.cmd_tf1, tf1.parse(argv[1:])
    else:
        args = build_parser().parse_args(argv)
        command = {"run": run.cmd_run, "devices": cmd_devices, "split": split.cmd_split,
                   "queues": queues.cmd_queues, "ps": ps.cmd_ps}[args.command]
    try:
        return command(args)
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


def cmd_devices(args) -> int:
    from realdist.runtime.devices import describe

    for line in describe():
        print(line)
    return 0
