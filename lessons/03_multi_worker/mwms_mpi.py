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

import argparse
import sys
from pathlib import Path

from course.mpi import failure_text, run_exercise
from course.lessons import CheckFailed, load_module, localize, solution_path
from simdist.sim.transports import MPITransport
from course.workspace import exercise_file

HERE = Path(__file__).resolve().parent


def _check_failed(error: CheckFailed) -> str:
    return f"{error.message}\nhint: {localize(error.hint, 'en')}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solution", dest="file", action="store_const",
                        const=str(solution_path(HERE)), help="use the reference solution")
    parser.add_argument("--file", metavar="PATH",
                        help="use tf_configs from this file (default: your my_exercises/ copy)")
    parser.set_defaults(file=str(exercise_file(HERE)))
    path = Path(parser.parse_args(argv).file)
    checks = load_module(HERE / "checks.py")
    transport = MPITransport()
    tf_configs = []

    def run():
        tf_configs.append(load_module(path).tf_configs)
        return checks.run_training_check(tf_configs[0], checks.ADDRESSES, transport)

    def report(result):
        workers = len(checks.ADDRESSES)
        lines = [f"mwms_mpi: tf_configs from {path.name}; {workers} workers "
                 f"({', '.join(checks.ADDRESSES)}) over {transport.size} MPI rank(s)"]
        lines += [f"  worker {w}: TF_CONFIG={text}"
                  for w, text in enumerate(tf_configs[0](list(checks.ADDRESSES)))]
        try:
            detail = checks.verify_training(result, workers)
        except CheckFailed as failed:
            lines.append(f"  ✗ {failed.message}\n      hint: {localize(failed.hint, 'en')}")
            return "\n".join(lines), False
        lines.append("  ✓ every worker created MultiWorkerMirroredStrategy from its TF_CONFIG: "
                     + detail)
        return "\n".join(lines), True

    return run_exercise(transport, run, report, lambda e: failure_text(
        e, path, "03", _check_failed), "mwms_mpi")


if __name__ == "__main__":
    sys.exit(main())
