"""Lesson 08, exercise 5: your master_requests against in-graph replication spread over MPI
ranks, one rank per task as a real TF1 job runs one process per task.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/08_replication/in_graph_mpi.py

(yours; ``--solution`` runs the reference, ``--file PATH`` another file; any -n from 1 to 4
works; as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``). Every rank asks your ``master_requests`` for three
in-graph jobs, then runs each job with ``in_graph_training(..., transport=MPITransport())``:
the one client and its master on worker:0's rank, ps:0 and the other workers on theirs. The
master's RegisterGraph and RunGraph requests to a task on another rank, and the tensors
between them, travel as real MPI messages, while the cost model decides when they arrive.
Rank 0 counts the requests in the trace and checks your answers; the exit code is 1 when a
check fails (the job ends normally, without MPI_Abort).
"""

import sys

from course.lessons import load_module, tr
from course.mpi import MPIExercise, main, task_ranks, verdict


def run(ex: MPIExercise):
    answers = ex.checks.request_answers(load_module(ex.path))  # every rank, before simulating
    runs = {case: ex.checks.run_requests_case(case, ex.transport)
            for case in ex.checks.REQUEST_CASES}
    return answers, runs


def report(ex: MPIExercise, result):
    answers, runs = result
    checks, ranks = ex.checks, ex.transport.size
    lines = [ex.say(f"in_graph_mpi: master_requests from {ex.path.name}; in_graph_training "
                    f"over {ranks} MPI rank(s)",
                    f"in_graph_mpi：来自 {ex.path.name} 的 master_requests；in_graph_training "
                    f"分布在 {ranks} 个 MPI rank 上")]
    measured = {}
    for case, run in runs.items():
        workers, mode, steps = case
        register, run_graph = measured[case] = checks.counted_requests(run)
        where = task_ranks({"ps": 1, "worker": workers}, ranks, ex.lang)
        across, total = checks.between_ranks(run, workers, ranks), register + run_graph
        lines.append(ex.say(f"  {workers} workers, {mode}, {steps} steps ({where}): the master "
                            f"sent {register} RegisterGraph and {run_graph} RunGraph requests, "
                            f"{across} of the {total} to a task on another rank",
                            f"  {workers} 个工作器，{mode}，{steps} 步（{where}）：master 发出了 "
                            f"{register} 个 RegisterGraph 请求和 {run_graph} 个 RunGraph 请求，"
                            f"这 {total} 个中有 {across} 个发往另一个 rank 上的任务"))
    return verdict(lines, lambda: checks.verify_requests(answers, measured),
                   tr("your predictions match the requests counted on rank 0",
                      "你的预测与 rank 0 上数出的请求一致"), ex.lang)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "master_requests", run, report))
