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

import argparse
import sys
from pathlib import Path

from course.mpi import failure_text, run_exercise
from course.lessons import CheckFailed, load_module, localize, solution_path
from simdist.sim.transports import MPITransport
from course.workspace import exercise_file

HERE = Path(__file__).resolve().parent
TASKS = 4


def _check_failed(error: CheckFailed) -> str:
    return f"{error.message}\n      hint: {localize(error.hint, 'en')}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--solution", action="store_true", help="run the reference solution")
    which.add_argument("--file", metavar="PATH", help="run ring_all_reduce from this file "
                                                      "(default: your my_exercises/ copy)")
    args = parser.parse_args(argv)
    path = (Path(args.file) if args.file else solution_path(HERE) if args.solution
            else exercise_file(HERE))
    checks = load_module(HERE / "checks.py")
    transport = MPITransport()

    def run():
        rings = [m.ring_all_reduce for m in checks.task_copies(load_module(path), TASKS)]
        return {kind: checks.run_ring(rings, TASKS, kind, transport) for kind in ("int", "float")}

    def report(results):
        lines = [f"ring_mpi: ring_all_reduce from {path} on {TASKS} tasks over "
                 f"{transport.size} MPI rank(s)"]
        verifications = [
            ("every task gets numpy's sum (int64)",
             lambda: checks.verify_sums(results["int"], TASKS, "int")),
            ("every task gets numpy's sum (float32)",
             lambda: checks.verify_sums(results["float"], TASKS, "float")),
            ("every task sends 2(p-1) messages",
             lambda: checks.verify_messages(results["float"], TASKS)),
            ("simulated time within 1% of formulas.ring",
             lambda: checks.verify_time(results["float"], TASKS)[1]),
        ]
        passed = 0
        for title, verify in verifications:
            try:
                detail = verify()
            except CheckFailed as failed:
                lines.append(f"  ✗ {title}\n      {failed.message}\n      hint: "
                             f"{localize(failed.hint, 'en')}")
                continue
            passed += 1
            lines.append(f"  ✓ {title}" + (f": {detail}" if detail else ""))
        lines.append(f"{passed} of {len(verifications)} checks pass")
        return "\n".join(lines), passed == len(verifications)

    return run_exercise(transport, run, report, lambda e: failure_text(
        e, path, "01", _check_failed), "ring_mpi")


if __name__ == "__main__":
    sys.exit(main())
