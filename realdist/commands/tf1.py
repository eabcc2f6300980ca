"""Run a TF1 script on real TensorFlow, one process per task (a localhost cluster behind a
loopback-only network): what ``simdist tf1`` simulates. Arguments after ``--`` go to the
script.

    realdist tf1 lessons/scripts/between_graph_trainer.py --cluster ps=1,worker=3
    realdist tf1 lessons/scripts/in_graph_trainer.py --cluster ps=1,worker=3 --clients worker:0
"""

from __future__ import annotations

import argparse

from simdist.base.files import check_outputs
from simdist.training.tf1_script import describe, parse_cluster, write_results


def parse(argv) -> argparse.Namespace:
    """``realdist tf1``'s options; the script's own come after ``--``."""
    argv = list(argv)
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="realdist tf1", description=__doc__)
    parser.add_argument("script", help="the TF1 script (from distlab import tf)")
    parser.add_argument("--cluster", default="ps=1,worker=2", metavar="JOB=N,...",
                        help="the tasks of each job (default ps=1,worker=2)")
    parser.add_argument("--clients", metavar="TASK,...",
                        help="the tasks (or jobs) that run a client and end, e.g. worker:0 "
                             "for in-graph replication (default: every task but the ps); the "
                             "others serve and are stopped when the clients have ended")
    parser.add_argument("--results", metavar="JSON",
                        help="write what each task reported (distlab.report)")
    parser.add_argument("--timeout", type=float, default=240, help="seconds (default 240)")
    args = parser.parse_args(argv)
    args.script_args = script_args
    return args


def cmd_tf1(args) -> int:
    from realdist.training.tf1_script import run_script

    check_outputs({"--results": (args.results, ".json")}, {"SCRIPT": args.script})
    clients = args.clients.split(",") if args.clients else None
    results = run_script(args.script, parse_cluster(args.cluster), args.script_args,
                         args.timeout, clients)
    for line in describe(results):
        print(line)
    if args.results:
        write_results(args.results, "realdist", args.cluster, results)
        print(f"results: {args.results}")
    return 0
