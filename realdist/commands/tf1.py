"""``realdist tf1``: the TF1 script ``simdist tf1`` runs, on real TensorFlow, one process per
task (a localhost cluster behind a loopback-only network)."""

from __future__ import annotations

import argparse
import json
import os

from simdist.base.files import check_output
from simdist.training.tf1_script import describe, parse_cluster


def add_arguments(tf1) -> None:
    """``realdist tf1``'s options: the script, the cluster, where results go."""
    tf1.add_argument("script", help="the TF1 script (from distlab import tf)")
    tf1.add_argument("--cluster", default="ps=1,worker=2", metavar="JOB=N,...",
                     help="the tasks of each job (default ps=1,worker=2)")
    tf1.add_argument("--results", metavar="JSON",
                     help="write what each task reported (distlab.report)")
    tf1.add_argument("--timeout", type=float, default=240, help="seconds (default 240)")
    tf1.add_argument("script_args", nargs=argparse.REMAINDER,
                     help="after --: the script's own arguments")


def cmd_tf1(args) -> int:
    from realdist.training.tf1_script import run_script

    check_output(args.results, "--results", ".json")
    script_args = [a for a in args.script_args if a != "--"]
    results = run_script(args.script, parse_cluster(args.cluster), script_args, args.timeout)
    for line in describe(results):
        print(line)
    if args.results:
        tmp = f"{args.results}.tmp"
        with open(tmp, "w") as f:
            json.dump({"half": "realdist", "cluster": args.cluster, "results": results}, f,
                      indent=1)
        os.replace(tmp, args.results)
        print(f"results: {args.results}")
    return 0
