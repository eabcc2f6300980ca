"""Run a TF1 script once per task of a simulated cluster.

    simdist tf1 lessons/scripts/between_graph_trainer.py --cluster ps=1,worker=3
    simdist tf1 trainer.py --cluster ps=2,worker=4 --results out/sim.json -- --steps 20

The script is written as TF1's distributed guide writes it, with ``from distlab import tf``
as its one import of TensorFlow: each task gets ``--job_name``, ``--task_index`` and
``TF_CONFIG``; ``realdist tf1`` runs the same file on real TensorFlow, one process per task.
Arguments after ``--`` go to the script. For now every task runs in this one process (its
clients are simulated threads); under mpiexec, use -n 1.
"""

from __future__ import annotations

import argparse
import sys

from simdist.base.files import check_output
from simdist.commands import reporting_errors
from simdist.hardware.units import format_ns
from simdist.sim.launcher import mpiexec_world


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="simdist tf1", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("script", help="the TF1 script (from distlab import tf)")
    parser.add_argument("--cluster", default="ps=1,worker=2", metavar="JOB=N,...",
                        help="the tasks of each job (default ps=1,worker=2)")
    parser.add_argument("--results", metavar="JSON",
                        help="write what each task reported (distlab.report)")
    parser.add_argument("--trace", metavar="JSON", help="write the Chrome/Perfetto trace")
    args = parser.parse_args(argv)
    rank, ranks = mpiexec_world()
    if ranks > 1:
        if rank == 0:
            print(f"simdist tf1: error: mpiexec -n {ranks}: the TF1 world runs in one process "
                  "for now (its tasks are not spread over MPI ranks yet); use -n 1",
                  file=sys.stderr)
        # the other ranks end quietly: a non-zero exit there would have mpiexec kill
        # rank 0 before its line is out; the job's status is rank 0's
        return 2 if rank == 0 else 0
    args.script_args = script_args
    return reporting_errors("simdist tf1", _run, args)


def _run(args) -> int:
    from simdist.training.tf1_script import describe, parse_cluster, run_script, write_results

    check_output(args.results, "--results", ".json")
    check_output(args.trace, "--trace", ".json")
    run = run_script(args.script, parse_cluster(args.cluster), args.script_args)
    for line in describe(run.results, run.outputs):
        print(line)
    print(f"simulated time: {format_ns(run.end_time)}, {len(run.outputs)} tasks")
    if args.results:
        write_results(args.results, "simdist", args.cluster, run.results)
        print(f"results: {args.results}")
    if args.trace:
        print(f"trace: {run.trace.save(args.trace)} (open it in https://ui.perfetto.dev)")
    return 0
