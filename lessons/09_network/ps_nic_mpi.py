"""Lesson 09, exercise 5: your choose_ps_for_float16 against between-graph training spread
over MPI ranks, the workers and the ps tasks in processes of their own.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/09_network/ps_nic_mpi.py

(yours; ``--solution`` runs the reference, ``--file PATH`` another file; any -n from 1 to 4
works; as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``). Every rank asks your ``choose_ps_for_float16`` for a
number of ps tasks P, then trains the four workers of exercise 4 on P ps tasks, and on P - 1,
with ``run_ps_training(spec, MPITransport())``: each worker's client on its own task's rank,
the ps tasks on theirs. The weights and the float16 gradients between them travel as real MPI
messages (2 MB and 1 MB a worker and update, cut over the ps), while the simulated 10 GbE
NICs decide when they arrive. Rank 0 reads every ps NIC's load from the trace
(``nic_loads()``) and checks your choice; the exit code is 1 when a check fails (the job
ends normally, without MPI_Abort).
"""

import sys

from course.lessons import load_module, tr
from course.mpi import MPIExercise, main, verdict


def run(ex: MPIExercise):
    mine = ex.checks.float16_answer(load_module(ex.path))  # every rank, before simulating
    return mine, {ps: ex.checks.run_float16(ps, ex.transport)
                  for ps in ex.checks.float16_cases(mine)}


def report(ex: MPIExercise, result):
    mine, runs = result
    checks, ranks = ex.checks, ex.transport.size
    lines = [ex.say(f"ps_nic_mpi: choose_ps_for_float16 from {ex.path.name} returned {mine}; "
                    f"4 workers with float16 gradients over {ranks} MPI rank(s)",
                    f"ps_nic_mpi：来自 {ex.path.name} 的 choose_ps_for_float16 返回了 {mine}；"
                    f"4 个使用 float16 梯度的工作器分布在 {ranks} 个 MPI rank 上")]
    loads = {}
    for ps, run in runs.items():
        load = loads[ps] = checks.busiest_ps(run)
        where = checks.task_ranks(ps, ranks)  # "rank 0: worker:0, ...; rank 1: ..."
        where = ex.say(where, where.replace(": ", "：").replace("; ", "；"))
        lines.append(ex.say(f"  {ps} ps ({where}): the busiest ps NIC busy "
                            f"{load.busy_out:.0%} out, {load.busy_in:.0%} in",
                            f"  {ps} 个 ps（{where}）：最忙的 ps 网卡出方向忙碌 "
                            f"{load.busy_out:.0%}，入方向 {load.busy_in:.0%}"))
    at_most = checks.FLOAT16_AT_MOST
    return verdict(lines, lambda: checks.verify_float16(mine, loads.get),
                   tr(f"the fewest ps tasks that keep every ps NIC at most {at_most:.0%} busy",
                      f"让每个 ps 网卡的忙碌时间不超过 {at_most:.0%} 的最少 ps 任务数"),
                   ex.lang)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "choose_ps_for_float16", run, report))
