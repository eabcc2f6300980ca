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

from course.lessons import load_module, tr
from course.mpi import MPIExercise, main, task_ranks, verdict


def run(ex: MPIExercise):
    cluster, fn = ex.checks.prepare_labels_job(load_module(ex.path))
    return fn.__name__, sorted(cluster.functions), ex.checks.run_labels_job(cluster, fn,
                                                                            ex.transport)


def report(ex: MPIExercise, result):
    name, registered, labels = result
    ranks = ex.transport.size
    where = task_ranks(ex.checks.LABELS_JOB, ranks, ex.lang)
    lines = [ex.say(f"coordinator_mpi: register_functions from {ex.path.name}; a chief, 2 "
                    f"workers and 1 ps over {ranks} MPI rank(s) ({where})",
                    f"coordinator_mpi：来自 {ex.path.name} 的 register_functions；一个主工作器、"
                    f"2 个工作器和 1 个 ps 分布在 {ranks} 个 MPI rank 上（{where}）"),
             ex.say("  registered on every rank: ", "  每个 rank 上注册的：")
             + ", ".join(registered)]
    return verdict(lines, lambda: ex.checks.verify_labels(labels, name),
                   tr(f"the workers found {name} and dataset_fn by name",
                      f"工作器按名字找到了 {name} 和 dataset_fn"), ex.lang)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "register_functions", run, report))
