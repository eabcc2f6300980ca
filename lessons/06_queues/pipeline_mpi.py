"""Lesson 06, exercise 5: your queue capacity (exercise 4) with the loader/trainer program's
three tasks on MPI ranks.

    mpiexec -n 3 --mca btl ^tcp python -m mpi4py lessons/06_queues/pipeline_mpi.py  # yours
    mpiexec -n 3 --mca btl ^tcp python -m mpi4py lessons/06_queues/pipeline_mpi.py --solution  # reference

(as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``; any -n from 1 to 3 works). Every rank runs this same
program: each calls your ``choose_capacity`` and runs ``loader_trainer`` with it, and simulates
its own tasks: ps:0 holds the queue, worker:0 is the trainer, worker:1 the loader. Every
enqueue and dequeue that crosses ranks travels as a real MPI message, while the cost model
decides when it arrives, so the figures are those of one process. Rank 0 checks your capacity
(and half of it) as ``simdist check 06`` does; the exit code is 1 when a check fails (the job
ends normally, without MPI_Abort).
"""

import sys

from course.lessons import CheckFailed, load_module, tr
from course.mpi import MPIExercise, main, on_ranks, verdict

#: the roles of loader_trainer's tasks (checks.PIPELINE_TASKS) in Chinese
ROLES_ZH = {"the queue": "队列", "the trainer": "训练者", "the loader": "加载者"}


def same_on_every_rank(transport, capacity):
    """``capacity`` if every rank chose it: each rank builds its clients' graphs (the queue's
    capacity in them) from its own call of ``choose_capacity``; else CheckFailed, on every
    rank alike."""
    chosen = transport.allgather(repr(capacity))
    other = next((r for r, c in enumerate(chosen) if c != chosen[0]), None)
    if other is not None:
        raise CheckFailed(tr(f"choose_capacity returned {chosen[0]} on rank 0 and "
                             f"{chosen[other]} on rank {other}",
                             f"choose_capacity 在 rank 0 上返回 {chosen[0]}，在 rank {other} 上"
                             f"返回 {chosen[other]}"),
                          tr("every rank runs the same program and must make the same choice: "
                             "do not let it depend on the rank, the time or a random draw",
                             "每个进程运行的是同一个程序，必须做出同样的选择：别让它取决于进程号、"
                             "时间或随机数"))
    return capacity


def run(ex: MPIExercise):
    capacity = same_on_every_rank(ex.transport, load_module(ex.path).choose_capacity())
    capacity = ex.checks.valid_capacity(capacity)
    return capacity, {c: ex.checks.run_stalls(c, ex.transport)
                      for c in ex.checks.capacity_runs(capacity)}


def report(ex: MPIExercise, result):
    capacity, runs = result
    checks, size = ex.checks, ex.transport.size
    where = on_ranks([ex.say(f"{task} ({role})", f"{task}（{ROLES_ZH.get(role, role)}）")
                      for task, role in checks.PIPELINE_TASKS.items()], size, ex.lang)
    lines = [ex.say(f"pipeline_mpi: choose_capacity from {ex.path.name}; loader_trainer's 3 "
                    f"tasks over {size} MPI rank(s) ({where})",
                    f"pipeline_mpi：来自 {ex.path.name} 的 choose_capacity；loader_trainer 的 "
                    f"3 个任务分布在 {size} 个 MPI rank 上（{where}）")]
    lines += ["  " + ex.say(checks.describe_stalls(c, run),
                            f"容量 {c}：训练者饥饿 {run.starved_fraction:.1%}，它最长的一步 "
                            f"{checks.longest_step_ns(run) / 1e6:.2f} ms")
              for c, run in runs.items()]
    return verdict(lines, lambda: checks.verify_capacity(capacity, runs),
                   tr("the queue carries the trainer through a stall",
                      "队列让训练者撑过了一次停顿"), ex.lang)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "choose_capacity", run, report))
