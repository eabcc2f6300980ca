"""Lesson 11, exercise 1 under MPI: your ici_bytes_per_chip against a v3-32, a slice of 4
hosts (8 cores each, 4 x 4 chips), whose hosts are spread over the MPI ranks.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/11_tpu/slice_mpi.py

(yours; ``--solution`` runs the reference, ``--file PATH`` another file; any -n from 1 to 4
works; as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``). A pod slice of several hosts is one task per host, as
``TPUClusterResolver`` lists them: each host feeds and dispatches to its own cores, and the
all-reduce spans every core of the slice. Every rank simulates one step of the lesson's MLP
for its own hosts with ``simulate_exercise(exercise, MPITransport())``; the hosts' partial
sums cross ranks as real MPI messages, while the torus formula times the all-reduce. Rank 0
reads what every host's core 0 sent over ICI from the trace and checks your formula against
it; the exit code is 1 when a check fails (the job ends normally, without MPI_Abort).
"""

import sys
from pathlib import Path

from course.mpi import exercise_path, failure_text, run_exercise, task_ranks, verdict
from course.lessons import load_module
from simdist.sim.transports import MPITransport

HERE = Path(__file__).resolve().parent
X, Y = 4, 4  # a v3-32: 16 chips, 32 cores, 4 hosts


def main(argv=None) -> int:
    path = exercise_path(argv, HERE, __doc__, "ici_bytes_per_chip")
    checks = load_module(HERE / "checks.py")
    transport = MPITransport()
    exercise = checks.tpu_mlp(X, Y)
    hosts = exercise.devices_per_worker // 8

    def run():
        mine = load_module(path)  # every rank, before simulating: a stub stops them all
        mine.ici_bytes_per_chip(X, Y, 1024)
        return mine, checks.simulate_exercise(exercise, transport=transport)

    def report(result):
        mine, run = result
        lines = [f"slice_mpi: ici_bytes_per_chip from {path.name}; a v3-32 ({X}x{Y} chips, "
                 f"{hosts} hosts of 8 cores) over {transport.size} MPI rank(s) "
                 f"({task_ranks({'worker': hosts}, transport.size)})"]
        sent = {f"worker:{h}": checks.ici_of(run, f"worker:{h}") for h in range(hosts)}
        for host, ici in sent.items():
            lines.append(f"  {host}: core 0 all-reduced " + ", ".join(
                f"{nbytes:,} B ({per_chip:,} B over ICI per chip)" for nbytes, per_chip in ici))

        def verify():
            if len(set(sent.values())) != 1:
                raise checks.CheckFailed("the hosts' cores sent different ICI bytes",
                                         checks.tr("every core of a slice takes part in one "
                                                   "all-reduce", "切片里的每个核心都参与同一次 "
                                                   "all-reduce"))
            checks.verify_ici(mine, X, Y, sent["worker:0"])
            return f"right to the byte on every host of the {X}x{Y} torus"

        return verdict(lines, verify, "each chip's ICI bytes in the slice's all-reduce")

    return run_exercise(transport, run, report, lambda e: failure_text(e, path, "11"),
                        "slice_mpi")


if __name__ == "__main__":
    sys.exit(main())
