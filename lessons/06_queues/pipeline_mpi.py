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
from pathlib import Path

from course.lessons import CheckFailed, load_module, tr
from course.mpi import exercise_path, failure_text, run_exercise, verdict
from simdist.sim.transports import MPITransport

HERE = Path(__file__).resolve().parent


def same_on_every_rank(transport, capacity):
    """``capacity`` if every rank chose it: each rank builds its clients' graphs (the queue's
    capacity in them) from its own call of ``choose_capacity``; else CheckFailed, on every
    rank alike."""
    chosen = transport.allgather(repr(capacity))
    other = next((r for r, c in enumerate(chosen) if c != chosen[0]), None)
    if other is not None:
        raise CheckFailed(f"choose_capacity returned {chosen[0]} on rank 0 and {chosen[other]} "
                          f"on rank {other}",
                          tr("every rank runs the same program and must make the same choice: "
                             "do not let it depend on the rank, the time or a random draw",
                             "每个进程运行的是同一个程序，必须做出同样的选择：别让它取决于进程号、"
                             "时间或随机数"))
    return capacity


def main(argv=None) -> int:
    path = exercise_path(argv, HERE, __doc__, "choose_capacity")
    checks = load_module(HERE / "checks.py")
    transport = MPITransport()
    chosen = []

    def run():
        capacity = same_on_every_rank(transport, load_module(path).choose_capacity())
        chosen.append(checks.valid_capacity(capacity))
        return {c: checks.run_stalls(c, transport) for c in checks.capacity_runs(chosen[0])}

    def report(runs):
        lines = [f"pipeline_mpi: choose_capacity from {path.name}; loader_trainer's 3 tasks "
                 f"over {transport.size} MPI rank(s) ({checks.pipeline_ranks(transport.size)})"]
        lines += ["  " + checks.describe_stalls(c, run) for c, run in runs.items()]
        return verdict(lines, lambda: checks.verify_capacity(chosen[0], runs),
                       f"the queue carries the trainer through a stall")

    return run_exercise(transport, run, report, lambda e: failure_text(e, path, "06"),
                        "pipeline_mpi")


if __name__ == "__main__":
    sys.exit(main())
