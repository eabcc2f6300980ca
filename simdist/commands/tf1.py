"""Run a TF1 script once per task of a simulated cluster.

    simdist tf1 lessons/scripts/between_graph_trainer.py --cluster ps=1,worker=3
    simdist tf1 trainer.py --cluster ps=2,worker=4 --results out/sim.json -- --steps 20

The script is written as TF1's distributed guide writes it, with ``from distlab import tf``
as its one import of TensorFlow: each task gets ``--job_name``, ``--task_index`` and
``TF_CONFIG``; ``realdist tf1`` runs the same file on real TensorFlow, one process per task.
Arguments after ``--`` go to the script. In one process every task's client is a simulated
thread; under mpiexec the tasks are spread over the ranks (each rank runs the script for
its own tasks, their servers, ops and variables), with the same trace and results:

    mpiexec -n 4 python -m mpi4py -m simdist tf1 trainer.py --cluster ps=1,worker=3
"""

from __future__ import annotations

import argparse
import sys

from simdist.base.files import check_outputs
from simdist.commands import parse_on_rank_0, reporting_errors
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
    parser.add_argument("--timeout", type=float, default=300, metavar="S",
                        help="under mpiexec: end the job when a rank waits this long for the "
                             "others (default 300 s)")
    rank, ranks = mpiexec_world()
    args = parse_on_rank_0(parser, argv, rank)
    args.script_args = script_args
    if ranks > 1 and not args.timeout > 0:
        parser.error(f"--timeout {args.timeout}: expected seconds > 0")
    if ranks > 1:
        from simdist.sim.transports import MPITransport

        args.transport = MPITransport(watchdog_s=args.timeout)
    else:
        args.transport = None
    try:  # every rank raises the same error at the same point: rank 0 says it once
        return reporting_errors("simdist tf1", _run, args, quiet=rank != 0)
    finally:
        if args.transport is not None:
            args.transport.finalize()  # a non-zero exit then ends the job without an abort


def _run(args) -> int:
    from simdist.training.tf1_script import describe, parse_cluster, run_script, write_results

    check_outputs({"--results": (args.results, ".json"), "--trace": (args.trace, ".json")},
                  {"SCRIPT": args.script})
    transport = args.transport
    jobs = parse_cluster(args.cluster)
    run = run_script(args.script, jobs, args.script_args, transport)
    if transport is not None and transport.rank != 0:
        return 0
    where = f" over {transport.size} MPI ranks" if transport is not None else ""
    for line in describe(run.results, run.outputs):
        print(line)
    print(f"simulated time: {format_ns(run.end_time)}, {len(run.outputs)} tasks{where}")
    if transport is not None:  # how the tasks sat on the ranks, and whether ranks help
        from simdist.commands.placement import placement, print_report
        from simdist.graph import Machine

        print_report(placement(sum(jobs.values()), transport.size, Machine().hardware),
                     transport.tally, sys.stderr)
    if args.results:
        write_results(args.results, "simdist", args.cluster, run.results)
        print(f"results: {args.results}")
    if args.trace:
        print(f"trace: {run.trace.save(args.trace)} (open it in https://ui.perfetto.dev)")
    return 0
