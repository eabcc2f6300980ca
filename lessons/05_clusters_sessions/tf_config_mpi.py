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

from course.lessons import load_module, tr
from course.mpi import MPIExercise, main, task_ranks, verdict

HERE = Path(__file__).resolve().parent
JOBS = {"ps": 1, "worker": 3}
ADDS = 5


def run(ex: MPIExercise):
    import simdist.graph as sim
    from simdist.training.tf1_script import run_script

    mine = load_module(ex.path)  # every rank, before the job: a stub stops them all
    mine.server_from_tf_config(sim, json.dumps(
        {"cluster": {"worker": ["localhost:2222"]}, "task": {"type": "worker", "index": 0}}))
    sim.stop_all_servers()
    return run_script(HERE / "tf_config_job.py", JOBS, ["--exercises", str(ex.path),
                                                        "--adds", str(ADDS)], ex.transport)


def report(ex: MPIExercise, job):
    size, where = ex.transport.size, task_ranks(JOBS, ex.transport.size, ex.lang)
    lines = [ex.say(f"tf_config_mpi: server_from_tf_config from {ex.path.name}; ps:0 and 3 "
                    f"workers over {size} MPI rank(s) ({where})",
                    f"tf_config_mpi：来自 {ex.path.name} 的 server_from_tf_config；ps:0 和 3 个"
                    f"工作器分布在 {size} 个 MPI rank 上（{where}）")]
    for task, results in job.results.items():
        server = results.get("server", {})
        started, target = f"{server.get('job')}:{server.get('index')}", server.get("target")
        last = results.get("last")
        lines.append(ex.say(f"  {task}: started {started} at {target}"
                            + (f", last saw counter {last}" if "last" in results else ""),
                            f"  {task}：在 {target} 启动了 {started}"
                            + (f"，最后看到计数器为 {last}" if "last" in results else "")))
    return verdict(lines, lambda: ex.checks.verify_tf_config_job(job.results, JOBS, ADDS),
                   tr("every task started its own server from its TF_CONFIG",
                      "每个任务都按自己的 TF_CONFIG 启动了自己的服务器"), ex.lang)


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, "server_from_tf_config", run, report))
