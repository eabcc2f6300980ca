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

from course.lessons import load_module, tr
from course.mpi import MPIExercise, main, task_ranks, verdict


def run(ex: MPIExercise):
    checks = ex.checks
    mine = load_module(ex.path).predict_sidecar()  # every rank, before simulating
    return mine, checks.simulate_evaluation(checks.Exercise(**checks.SIDECAR), "sidecar",
                                            poll_ns=checks.POLL_NS, transport=ex.transport)


def report(ex: MPIExercise, result):
    mine, run = result
    checks, size = ex.checks, ex.transport.size
    side = checks.sidecar_of(run)
    jobs = {"chief": 1, "worker": checks.SIDECAR["workers"], "ps": 1, "evaluator": 1}
    where = task_ranks(jobs, size, ex.lang)
    lines = [ex.say(f"sidecar_mpi: predict_sidecar from {ex.path.name} returned {mine!r}; a "
                    f"chief, {jobs['worker']} workers, a ps and the evaluator over {size} MPI "
                    f"rank(s) ({where})",
                    f"sidecar_mpi：来自 {ex.path.name} 的 predict_sidecar 返回了 {mine!r}；一个"
                    f"主工作器、{jobs['worker']} 个工作器、一个 ps 和评估器分布在 {size} 个 MPI "
                    f"rank 上（{where}）"),
             ex.say("  the evaluator could see: " + ", ".join(
                 f"{name} at {at / 1e6:.3f} ms" for name, at in side["visible"].items()),
                    "  评估器能看到的：" + "，".join(
                 f"{name}（{at / 1e6:.3f} ms 时）" for name, at in side["visible"].items()))]
    return verdict(lines, lambda: checks.verify_sidecar(mine, side),
                   tr("the checkpoints the side-car evaluates", "边车评估器评估的检查点"),
                   ex.lang)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "predict_sidecar", run, report))
