"""Lesson 10, exercise 4 under MPI: a ParameterServerStrategy job (a chief, 2 workers and
1 ps) whose tasks are spread over the MPI ranks, the coordinator scheduling your registered
function on the workers by name.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/10_parameter_server_strategy/coordinator_mpi.py

(yours; ``--solution`` runs the reference; any -n from 1 to 4 works; as root, or with more
ranks than cores, Open MPI wants ``--allow-run-as-root --oversubscribe`` after ``mpiexec``).
Every rank runs this same program, as every task of a real job runs the same file: each calls your
``register_functions`` with its own ``InProcessCluster`` before the job starts, so that a
worker's rank finds by name what the coordinator's "run" messages name. The values come back
as real MPI messages while the cost model decides when they arrive. Rank 0 checks every label
count; the exit code is 1 when a check fails (the job ends normally, without MPI_Abort).
"""

import sys
from pathlib import Path

from course.mpi import exercise_path, failure_text, run_exercise, task_ranks, verdict
from course.lessons import load_module
from simdist.sim.transports import MPITransport

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    path = exercise_path(argv, HERE, __doc__, "register_functions")
    checks = load_module(HERE / "checks.py")
    transport = MPITransport()
    job = {}

    def run():
        cluster, fn = checks.prepare_labels_job(load_module(path))
        job.update(name=fn.__name__, registered=sorted(cluster.functions))
        return checks.run_labels_job(cluster, fn, transport)

    def report(result):
        ranks = transport.size
        lines = [f"coordinator_mpi: register_functions from {path.name}; a chief, 2 workers "
                 f"and 1 ps over {ranks} MPI rank(s) ({task_ranks(checks.LABELS_JOB, ranks)})",
                 f"  registered on every rank: {', '.join(job['registered'])}"]
        return verdict(lines, lambda: checks.verify_labels(result, job["name"]),
                       f"the workers found {job['name']} and dataset_fn by name")

    return run_exercise(transport, run, report, lambda e: failure_text(e, path, "10"),
                        "coordinator_mpi")


if __name__ == "__main__":
    sys.exit(main())
