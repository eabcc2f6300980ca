"""Lesson 12, exercise 3 under MPI: your predict_sidecar against a side-car evaluation whose
tasks (a chief, 2 workers, a ps and the evaluator) are spread over the MPI ranks.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/12_evaluation/sidecar_mpi.py

(yours; ``--solution`` runs the reference, ``--file PATH`` another file; any -n from 1 to 5
works; as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``). Every rank asks your ``predict_sidecar`` for its
answer, then runs the exercise's training and side-car with
``simulate_evaluation(..., transport=MPITransport())``: the evaluator task, on a rank of its
own when there are enough, learns of each complete checkpoint by a message from the chief
that carries its values (the checkpoint files it reads), a real MPI message when the two sit
on different ranks. Rank 0 checks your list against what the evaluator evaluated; the exit
code is 1 when a check fails (the job ends normally, without MPI_Abort).
"""

import sys
from pathlib import Path

from course.mpi import exercise_path, failure_text, run_exercise, task_ranks, verdict
from course.lessons import load_module
from simdist.sim.transports import MPITransport

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    path = exercise_path(argv, HERE, __doc__, "predict_sidecar")
    checks = load_module(HERE / "checks.py")
    transport = MPITransport()

    def run():
        mine = load_module(path).predict_sidecar()  # every rank, before simulating
        return mine, checks.simulate_evaluation(checks.Exercise(**checks.SIDECAR), "sidecar",
                                                poll_ns=checks.POLL_NS, transport=transport)

    def report(result):
        mine, run = result
        side = checks.sidecar_of(run)
        jobs = {"chief": 1, "worker": checks.SIDECAR["workers"], "ps": 1, "evaluator": 1}
        lines = [f"sidecar_mpi: predict_sidecar from {path.name} returned {mine!r}; a chief, "
                 f"{jobs['worker']} workers, a ps and the evaluator over {transport.size} MPI "
                 f"rank(s) ({task_ranks(jobs, transport.size)})",
                 "  the evaluator could see: " + ", ".join(
                     f"{name} at {at / 1e6:.3f} ms" for name, at in side["visible"].items())]
        return verdict(lines, lambda: checks.verify_sidecar(mine, side),
                       "the checkpoints the side-car evaluates")

    return run_exercise(transport, run, report, lambda e: failure_text(e, path, "12"),
                        "sidecar_mpi")


if __name__ == "__main__":
    sys.exit(main())
