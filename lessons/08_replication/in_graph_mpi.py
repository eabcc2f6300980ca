"""Lesson 08, exercise 5: your master_requests against in-graph replication spread over MPI
ranks, one rank per task as a real TF1 job runs one process per task.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/08_replication/in_graph_mpi.py

(yours; ``--solution`` runs the reference, ``--file PATH`` another file; any -n from 1 to 4
works; as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``). Every rank asks your ``master_requests`` for three
in-graph jobs, then runs each job with ``in_graph_training(..., transport=MPITransport())``:
the one client and its master on worker:0's rank, ps:0 and the other workers on theirs. The
master's RegisterGraph and RunGraph requests to a task on another rank, and the tensors
between them, travel as real MPI messages, while the cost model decides when they arrive.
Rank 0 counts the requests in the trace and checks your answers; the exit code is 1 when a
check fails (the job ends normally, without MPI_Abort).
"""

import sys
from pathlib import Path

from course.mpi import exercise_path, failure_text, run_exercise, task_ranks, verdict
from course.lessons import load_module
from simdist.sim.transports import MPITransport

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    path = exercise_path(argv, HERE, __doc__, "master_requests")
    checks = load_module(HERE / "checks.py")
    transport = MPITransport()

    def run():
        answers = checks.request_answers(load_module(path))  # every rank, before simulating
        runs = {case: checks.run_requests_case(case, transport) for case in checks.REQUEST_CASES}
        return answers, runs

    def report(result):
        answers, runs = result
        ranks = transport.size
        lines = [f"in_graph_mpi: master_requests from {path.name}; in_graph_training over "
                 f"{ranks} MPI rank(s)"]
        measured = {}
        for case, run in runs.items():
            workers, mode, steps = case
            register, run_graph = measured[case] = checks.counted_requests(run)
            lines.append(f"  {workers} workers, {mode}, {steps} steps "
                         f"({task_ranks({'ps': 1, 'worker': workers}, ranks)}): the master sent {register} "
                         f"RegisterGraph and {run_graph} RunGraph requests, "
                         f"{checks.between_ranks(run, workers, ranks)} of the "
                         f"{register + run_graph} to a task on another rank")
        return verdict(lines, lambda: checks.verify_requests(answers, measured),
                       f"your predictions match the requests counted on rank 0")

    return run_exercise(transport, run, report, lambda e: failure_text(e, path, "08"),
                        "in_graph_mpi")


if __name__ == "__main__":
    sys.exit(main())
