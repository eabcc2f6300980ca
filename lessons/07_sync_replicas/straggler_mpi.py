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

from course.lessons import load_module, tr
from course.mpi import MPIExercise, main, on_ranks, verdict


def run(ex: MPIExercise):  # the prediction first, on every rank: a stub stops them all alike
    predicted = ex.checks.valid_applied(load_module(ex.path).predict_applied())
    return predicted, ex.checks.run_slow_chief(ex.transport)


def worker_lines(ex: MPIExercise, run) -> list:
    """Each worker's steps, gradients applied and dropped, and loss (as ``run.describe()``
    writes them in English)."""
    if ex.lang != "zh":
        return [line for line in run.describe() if line.startswith("  worker ")]
    lines = []
    for k, (applied, dropped) in run.gradients_by_worker().items():
        losses = [loss for _, _, loss in run.worker_runs[k]]
        lines.append(f"  工作器 {k}：{len(losses)} 步，应用了 {applied} 个梯度，丢弃 {dropped} 个，"
                     f"损失 {losses[0]:.3f} -> {losses[-1]:.3f}" if losses
                     else f"  工作器 {k}：一步也没有")
    return lines


def report(ex: MPIExercise, result):
    predicted, run = result
    size, workers = ex.transport.size, ex.checks.SLOW_CHIEF["workers"]
    where = on_ranks(["ps:0"] + [f"worker:{k}" for k in range(workers)], size, ex.lang)
    lines = [ex.say(f"straggler_mpi: predict_applied from {ex.path.name}; 1 ps and 4 workers "
                    f"over {size} MPI rank(s) ({where})",
                    f"straggler_mpi：来自 {ex.path.name} 的 predict_applied；1 个 ps 和 4 个"
                    f"工作器分布在 {size} 个 MPI rank 上（{where}）")]
    lines += worker_lines(ex, run)
    return verdict(lines, lambda: ex.checks.verify_applied(predicted, run),
                   tr("your prediction is the accumulators' tally", "你的预测与累加器的计数一致"),
                   ex.lang)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "predict_applied", run, report))
