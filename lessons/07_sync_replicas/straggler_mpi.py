"""Lesson 07, exercise 5: your prediction of exercise 4 (whose gradients are applied when the
chief straggles) against the job run with its ps and four workers on MPI ranks.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/07_sync_replicas/straggler_mpi.py  # yours
    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/07_sync_replicas/straggler_mpi.py --solution  # reference

(as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``; any -n from 1 to 5 works). Every rank runs this same
program, as every task of a between-graph job runs the same file: each calls your
``predict_applied``, then simulates its own tasks of ``train_on_ps``'s job and runs their
clients: the ps with its ConditionalAccumulators and the sync token queue, and the workers'
training loops (the chief's queue runner too). Gradients, tokens and the variables' reads
cross ranks as real MPI messages, while the cost model decides when they arrive. Rank 0
gathers the accumulators' tally and checks your prediction; the exit code is 1 when it is
wrong (the job ends normally, without MPI_Abort).
"""

import sys
from pathlib import Path

from course.lessons import load_module
from course.mpi import exercise_path, failure_text, run_exercise, verdict
from simdist.sim.transports import MPITransport

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    path = exercise_path(argv, HERE, __doc__, "predict_applied")
    checks = load_module(HERE / "checks.py")
    transport = MPITransport()
    predicted = []

    def run():  # the prediction first, on every rank: a stub stops them all alike
        predicted.append(checks.valid_applied(load_module(path).predict_applied()))
        return checks.run_slow_chief(transport)

    def report(run):
        lines = [f"straggler_mpi: predict_applied from {path.name}; 1 ps and 4 workers over "
                 f"{transport.size} MPI rank(s) ({checks.job_ranks(transport.size)})"]
        lines += [line for line in run.describe() if line.startswith("  worker ")]
        return verdict(lines, lambda: checks.verify_applied(predicted[0], run),
                       f"your prediction is the accumulators' tally")

    return run_exercise(transport, run, report, lambda e: failure_text(e, path, "07"),
                        "straggler_mpi")


if __name__ == "__main__":
    sys.exit(main())
