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
from pathlib import Path

from course.mpi import exercise_path, failure_text, run_exercise, verdict
from course.lessons import load_module
from simdist.sim.transports import MPITransport

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    path = exercise_path(argv, HERE, __doc__, "choose_ps_for_float16")
    checks = load_module(HERE / "checks.py")
    transport = MPITransport()

    def run():
        mine = checks.float16_answer(load_module(path))  # every rank, before simulating
        return mine, {ps: checks.run_float16(ps, transport) for ps in checks.float16_cases(mine)}

    def report(result):
        mine, runs = result
        ranks = transport.size
        lines = [f"ps_nic_mpi: choose_ps_for_float16 from {path.name} returned {mine}; 4 "
                 f"workers with float16 gradients over {ranks} MPI rank(s)"]
        loads = {}
        for ps, run in runs.items():
            loads[ps] = checks.busiest_ps(run)
            lines.append(f"  {ps} ps ({checks.task_ranks(ps, ranks)}): the busiest ps NIC "
                         f"busy {loads[ps].busy_out:.0%} out, {loads[ps].busy_in:.0%} in")
        return verdict(lines, lambda: checks.verify_float16(mine, loads.get),
                       "the fewest ps tasks that keep every ps NIC at most "
                       f"{checks.FLOAT16_AT_MOST:.0%} busy")

    return run_exercise(transport, run, report, lambda e: failure_text(e, path, "09"),
                        "ps_nic_mpi")


if __name__ == "__main__":
    sys.exit(main())
