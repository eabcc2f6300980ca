"""Lesson 05, exercise 3 under MPI: your server_from_tf_config starting every task's server of
a {ps: 1, worker: 3} job from its TF_CONFIG, one task per MPI rank.

    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/05_clusters_sessions/tf_config_mpi.py

(yours; ``--solution`` runs the reference, ``--file PATH`` another file; any -n from 1 to 4
works; as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root
--oversubscribe`` after ``mpiexec``). Every rank runs ``tf_config_job.py`` for its own tasks
(``simdist.training.tf1_script.run_script`` with an ``MPITransport``), as a real job starts
the same script in every process with that process's ``TF_CONFIG``: each task starts its
server with your function, the ps serves a counter, and each worker adds 1 to it five times
through its own server's target, the sessions' requests crossing ranks as MPI messages.
Rank 0 checks every task's server and the counter; the exit code is 1 when a check fails
(the job ends normally, without MPI_Abort).
"""

import json
import sys
from pathlib import Path

from course.mpi import exercise_path, failure_text, run_exercise, task_ranks, verdict
from course.lessons import load_module
from simdist.sim.transports import MPITransport

HERE = Path(__file__).resolve().parent
JOBS = {"ps": 1, "worker": 3}
ADDS = 5


def main(argv=None) -> int:
    path = exercise_path(argv, HERE, __doc__, "server_from_tf_config")
    checks = load_module(HERE / "checks.py")
    transport = MPITransport()

    def run():
        import simdist.graph as sim
        from simdist.training.tf1_script import run_script

        mine = load_module(path)  # every rank, before the job: a stub stops them all
        mine.server_from_tf_config(sim, json.dumps(
            {"cluster": {"worker": ["localhost:2222"]}, "task": {"type": "worker",
                                                                  "index": 0}}))
        sim.stop_all_servers()
        return run_script(HERE / "tf_config_job.py", JOBS, ["--exercises", str(path),
                                                            "--adds", str(ADDS)], transport)

    def report(job):
        lines = [f"tf_config_mpi: server_from_tf_config from {path.name}; ps:0 and 3 workers "
                 f"over {transport.size} MPI rank(s) ({task_ranks(JOBS, transport.size)})"]
        for task, results in job.results.items():
            server = results.get("server", {})
            lines.append(f"  {task}: started {server.get('job')}:{server.get('index')} at "
                         f"{server.get('target')}" + (f", last saw counter {results['last']}"
                                                      if "last" in results else ""))

        def verify():
            return checks.verify_tf_config_job(job.results, JOBS, ADDS)

        return verdict(lines, verify, "every task started its own server from its TF_CONFIG")

    return run_exercise(transport, run, report, lambda e: failure_text(e, path, "05"),
                        "tf_config_mpi")


if __name__ == "__main__":
    sys.exit(main())
