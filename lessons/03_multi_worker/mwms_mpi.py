"""Lesson 03, exercise 1 under MPI: three workers, each on its own MPI rank, each creating
MultiWorkerMirroredStrategy from the TF_CONFIG your ``tf_configs`` wrote for it.

    mpiexec -n 3 --mca btl ^tcp python -m mpi4py lessons/03_multi_worker/mwms_mpi.py  # yours
    mpiexec -n 3 --mca btl ^tcp python -m mpi4py lessons/03_multi_worker/mwms_mpi.py --solution  # reference

(as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``). This is how a real MultiWorkerMirroredStrategy job
starts: the same program on every machine, each process told by TF_CONFIG which task it is.
Here the three simulated workers are spread over the MPI ranks (one per rank with -n 3; any
-n works) and their gradients travel as real MPI messages, while the cost model decides when
they arrive. Rank 0 checks that every worker ends with one device's weights; the exit code is
1 when a check fails (the job ends normally, without MPI_Abort).
"""

import sys

from course.lang import word
from course.lessons import CheckFailed, load_module, localize, tr
from course.mpi import MPIExercise, main


def check_failed(error: CheckFailed, lang: str) -> str:
    return f"{localize(error.message, lang)}\n{word('hint', lang)}: {localize(error.hint, lang)}"


def run(ex: MPIExercise):
    tf_configs = load_module(ex.path).tf_configs
    return tf_configs, ex.checks.run_training_check(tf_configs, ex.checks.ADDRESSES,
                                                    ex.transport)


def report(ex: MPIExercise, result):
    tf_configs, training = result
    addresses, size = ex.checks.ADDRESSES, ex.transport.size
    workers = len(addresses)
    lines = [ex.say(f"mwms_mpi: tf_configs from {ex.path.name}; {workers} workers "
                    f"({', '.join(addresses)}) over {size} MPI rank(s)",
                    f"mwms_mpi：来自 {ex.path.name} 的 tf_configs；{workers} 个工作器"
                    f"（{', '.join(addresses)}）分布在 {size} 个 MPI rank 上")]
    lines += [ex.say(f"  worker {w}: TF_CONFIG={text}", f"  工作器 {w}：TF_CONFIG={text}")
              for w, text in enumerate(tf_configs(list(addresses)))]
    try:
        detail = ex.checks.verify_training(training, workers)
    except CheckFailed as failed:
        lines.append("  ✗ " + check_failed(failed, ex.lang).replace("\n", "\n      "))
        return "\n".join(lines), False
    lines.append("  ✓ " + localize(tr("every worker created MultiWorkerMirroredStrategy from "
                                      "its TF_CONFIG: ", "每个工作器都按自己的 TF_CONFIG 创建了 "
                                      "MultiWorkerMirroredStrategy："), ex.lang)
                 + localize(detail, ex.lang))
    return "\n".join(lines), True


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "tf_configs", run, report, check_failed=check_failed))
