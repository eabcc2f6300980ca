"""Lesson 14, exercise 5: your prediction of exercise 4 (VGG-16 on 4 machines of 2 GPUs, the
hierarchical all-reduce) against the run with its 8 workers spread over the MPI ranks.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/14_speedups/grouped_mpi.py

(yours; ``--solution`` runs the reference, ``--file PATH`` another file; any -n from 1 to 8
works; as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``). Every rank asks your ``predict_grouped`` for its
answer, then simulates its own workers with ``simulate(..., transport=MPITransport())``: the
reduce inside a machine, the ring between the machines' leaders and the broadcast are real
MPI messages when two workers sit on different ranks, in the same simulated time as in one
process. Rank 0 checks your pair against machine 0's NIC and the step; the exit code is 1
when the check fails (the job ends normally, without MPI_Abort).
"""

import sys

from course.lessons import load_module, tr
from course.mpi import MPIExercise, main, task_ranks, verdict


def run(ex: MPIExercise):
    checks = ex.checks
    mine = load_module(ex.path).predict_grouped()  # every rank, before simulating
    machines, per = checks.ASKED
    g = checks.GROUPED
    return mine, checks.data_parallel(g["model"], machines, per, g["batch"], g["system"],
                                      g["algorithm"], trace=True, transport=ex.transport)


def report(ex: MPIExercise, result):
    mine, run = result
    checks, size = ex.checks, ex.transport.size
    real = checks.grouped_of(run)
    machines, per = checks.ASKED
    where = task_ranks({"worker": machines * per}, size, ex.lang)
    lines = [ex.say(f"grouped_mpi: predict_grouped from {ex.path.name} returned {mine!r}; "
                    f"{machines} machines of {per} GPUs, 8 workers over {size} MPI rank(s) "
                    f"({where})",
                    f"grouped_mpi：来自 {ex.path.name} 的 predict_grouped 返回了 {mine!r}；"
                    f"{machines} 台机器、每台 {per} 个 GPU，8 个工作器分布在 {size} 个 MPI rank 上"
                    f"（{where}）")]
    return verdict(lines, lambda: checks.verify_grouped(mine, real),
                   tr("machine 0's NIC bytes and the step", "machine 0 的网卡字节和步长"),
                   ex.lang)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "predict_grouped", run, report))
