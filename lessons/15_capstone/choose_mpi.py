"""Lesson 15, exercise 4: your choice of exercise 3 (a strategy and its settings for BERT-base
on up to 4 machines of 4 V100s, and its step) against the run of that choice with its
workers spread over the MPI ranks.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/15_capstone/choose_mpi.py

(yours; ``--solution`` runs the reference, ``--file PATH`` another file; any -n from 1 to 16
works; as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``). Every rank asks your ``choose_and_predict`` for its
answer, then runs ``simdist run data_parallel`` with your settings over
``MPITransport()``: the all-reduce (or the ps traffic) between workers on different ranks
is real MPI messages, in the same simulated time as in one process. Rank 0 checks your
choice and step against the run; the exit code is 1 when the check fails (the job ends
normally, without MPI_Abort).
"""

import sys

from course.lessons import load_module, tr
from course.mpi import MPIExercise, main, task_ranks, verdict


def run(ex: MPIExercise):
    checks = ex.checks
    mine = load_module(ex.path).choose_and_predict()  # every rank, before simulating
    choice = checks.parsed_choice(mine)  # a wrong form: the same CheckFailed on every rank
    job = checks.JOB
    argv = checks.command(job["model"], job["system"], choice["machines"], job["gpus"],
                          choice["strategy"], choice["algorithm"], choice["num_ps"])
    return mine, choice, checks.simulate_command(argv, transport=ex.transport)


def report(ex: MPIExercise, result):
    mine, choice, run = result
    checks, size = ex.checks, ex.transport.size
    step = checks.step_of(run) / 1e6
    workers = choice["machines"] * checks.JOB["gpus"]
    where = task_ranks({"worker": workers}, size, ex.lang)
    lines = [ex.say(f"choose_mpi: choose_and_predict from {ex.path.name} returned {mine!r}; "
                    f"{workers} workers over {size} MPI rank(s) ({where}): {step:.1f} ms a step",
                    f"choose_mpi：来自 {ex.path.name} 的 choose_and_predict 返回了 {mine!r}；"
                    f"{workers} 个工作器分布在 {size} 个 MPI rank 上（{where}）：每步 {step:.1f} ms")]
    return verdict(lines, lambda: checks.verify_choice(mine, step),
                   tr("the strategy chosen and its step", "选定的策略及其步长"), ex.lang)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "choose_and_predict", run, report))
