"""Lesson 01, exercise 3: your ring all-reduce as an MPI program.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/01_collectives/ring_mpi.py  # yours
    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/01_collectives/ring_mpi.py --solution  # reference

(as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``). Four simulated tasks run over the MPI ranks (one task per
rank with -n 4; any -n works): every message of your ring travels as a real MPI message, while
the cost model decides when it arrives. Rank 0 checks the result as ``simdist check 01`` does
(numpy's sum, 2(p-1) messages per task, ``formulas.ring``'s time) and prints it; the exit code
is 1 when a check fails (the job ends normally: no MPI_Abort). "Yours" is your workspace
copy, my_exercises/01_collectives/exercises.py (``simdist lesson start 01``), else the stub.
"""

import sys

from course.lang import word
from course.lessons import CheckFailed, load_module, localize, tr
from course.mpi import MPIExercise, main

TASKS = 4


def check_failed(error: CheckFailed, lang: str) -> str:
    return (f"{localize(error.message, lang)}\n      {word('hint', lang)}: "
            f"{localize(error.hint, lang)}")


def run(ex: MPIExercise):
    rings = [m.ring_all_reduce for m in ex.checks.task_copies(load_module(ex.path), TASKS)]
    return {kind: ex.checks.run_ring(rings, TASKS, kind, ex.transport)
            for kind in ("int", "float")}


def report(ex: MPIExercise, results):
    checks, size = ex.checks, ex.transport.size
    lines = [ex.say(f"ring_mpi: ring_all_reduce from {ex.path} on {TASKS} tasks over {size} "
                    f"MPI rank(s)",
                    f"ring_mpi：来自 {ex.path} 的 ring_all_reduce，{TASKS} 个任务分布在 {size} 个 "
                    f"MPI rank 上")]
    verifications = [
        (tr("every task gets numpy's sum (int64)", "每个任务都得到 numpy 的求和结果（int64）"),
         lambda: checks.verify_sums(results["int"], TASKS, "int")),
        (tr("every task gets numpy's sum (float32)", "每个任务都得到 numpy 的求和结果（float32）"),
         lambda: checks.verify_sums(results["float"], TASKS, "float")),
        (tr("every task sends 2(p-1) messages", "每个任务发送 2(p-1) 条消息"),
         lambda: checks.verify_messages(results["float"], TASKS)),
        (tr("simulated time within 1% of formulas.ring", "模拟时间与 formulas.ring 相差不到 1%"),
         lambda: checks.verify_time(results["float"], TASKS)[1]),
    ]
    passed = 0
    for title, verify in verifications:
        title = localize(title, ex.lang)
        try:
            detail = verify()
        except CheckFailed as failed:
            lines.append(f"  ✗ {title}\n      {check_failed(failed, ex.lang)}")
            continue
        passed += 1
        lines.append(f"  ✓ {title}" + (ex.say(": ", "：") + localize(detail, ex.lang)
                                        if detail else ""))
    lines.append(word("summary", ex.lang, passed=passed, total=len(verifications)))
    return "\n".join(lines), passed == len(verifications)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "ring_all_reduce", run, report,
                  check_failed=check_failed))
