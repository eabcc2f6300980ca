"""Lesson 13, exercise 5: your prediction of exercise 4 (where a ParameterServerStrategy job
starts again after a ps failure during a checkpoint's save) against the job run with its
tasks (the chief, which is the coordinator, 2 workers and the ps) spread over the MPI ranks.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/13_failures/restart_mpi.py

(yours; ``--solution`` runs the reference, ``--file PATH`` another file; any -n from 1 to 4
works; as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``). Every rank asks your ``predict_restart_epoch`` for its
answer, then simulates its own tasks of the job with ``simulate_exercise(...,
transport=MPITransport())``: the coordinator's functions, the failed ps's errors, the
cancels and the checkpoint's reads and restore are real MPI messages when two tasks sit on
different ranks. Rank 0 checks your pair against what its coordinator did; the exit code is
1 when the check fails (the job ends normally, without MPI_Abort).
"""

import sys

from course.lessons import load_module, tr
from course.mpi import MPIExercise, main, task_ranks, verdict


def run(ex: MPIExercise):
    checks = ex.checks
    mine = load_module(ex.path).predict_restart_epoch()  # every rank, before simulating
    exercise = checks.Exercise(**checks.EPOCH_JOB, failures=(checks.PS_FAILURE,))
    return mine, checks.simulate_exercise(exercise, transport=ex.transport)


def report(ex: MPIExercise, result):
    mine, run = result
    checks, size = ex.checks, ex.transport.size
    real = checks.restart_of(run)
    where = task_ranks({"chief": 1, "worker": checks.EPOCH_JOB["workers"], "ps": 1}, size,
                       ex.lang)
    lines = [ex.say(f"restart_mpi: predict_restart_epoch from {ex.path.name} returned "
                    f"{mine!r}; the coordinator, 2 workers and a ps over {size} MPI rank(s) "
                    f"({where})",
                    f"restart_mpi：来自 {ex.path.name} 的 predict_restart_epoch 返回了 "
                    f"{mine!r}；协调器、2 个工作器和一个 ps 分布在 {size} 个 MPI rank 上"
                    f"（{where}）"),
             ex.say(f"  checkpoints complete before the failure: {', '.join(real['saved'])}",
                    f"  故障之前完成的检查点：{'、'.join(real['saved'])}")]
    return verdict(lines, lambda: checks.verify_epoch(mine, real),
                   tr("where the coordinator starts again", "协调器从哪里重新开始"), ex.lang)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "predict_restart_epoch", run, report))
