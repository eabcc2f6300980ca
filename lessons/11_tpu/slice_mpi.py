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

from course.lessons import load_module, tr
from course.mpi import MPIExercise, main, task_ranks, verdict

X, Y = 4, 4  # a v3-32: 16 chips, 32 cores, 4 hosts


def run(ex: MPIExercise):
    exercise = ex.checks.tpu_mlp(X, Y)
    mine = load_module(ex.path)  # every rank, before simulating: a stub stops them all
    mine.ici_bytes_per_chip(X, Y, 1024)
    hosts = exercise.devices_per_worker // 8
    return mine, hosts, ex.checks.simulate_exercise(exercise, transport=ex.transport)


def report(ex: MPIExercise, result):
    mine, hosts, run = result
    checks, size = ex.checks, ex.transport.size
    where = task_ranks({"worker": hosts}, size, ex.lang)
    lines = [ex.say(f"slice_mpi: ici_bytes_per_chip from {ex.path.name}; a v3-32 ({X}x{Y} "
                    f"chips, {hosts} hosts of 8 cores) over {size} MPI rank(s) ({where})",
                    f"slice_mpi：来自 {ex.path.name} 的 ici_bytes_per_chip；一个 v3-32（{X}x{Y} "
                    f"个芯片，{hosts} 台各有 8 个核心的主机）分布在 {size} 个 MPI rank 上"
                    f"（{where}）")]
    sent = {f"worker:{h}": checks.ici_of(run, f"worker:{h}") for h in range(hosts)}
    for host, ici in sent.items():
        lines.append(ex.say(f"  {host}: core 0 all-reduced " + ", ".join(
            f"{nbytes:,} B ({per_chip:,} B over ICI per chip)" for nbytes, per_chip in ici),
                            f"  {host}：核心 0 all-reduce 了 " + "，".join(
            f"{nbytes:,} B（每个芯片经 ICI 传 {per_chip:,} B）" for nbytes, per_chip in ici)))

    def verify():
        if len(set(sent.values())) != 1:
            raise checks.CheckFailed(tr("the hosts' cores sent different ICI bytes",
                                        "各主机的核心经 ICI 发送的字节数不同"),
                                     tr("every core of a slice takes part in one all-reduce",
                                        "切片里的每个核心都参与同一次 all-reduce"))
        checks.verify_ici(mine, X, Y, sent["worker:0"])
        return tr(f"right to the byte on every host of the {X}x{Y} torus",
                  f"在 {X}x{Y} 环面的每台主机上都精确到字节")

    return verdict(lines, verify, tr("each chip's ICI bytes in the slice's all-reduce",
                                     "切片的 all-reduce 中每个芯片的 ICI 字节数"), ex.lang)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "ici_bytes_per_chip", run, report))
