"""One TF1 script run once per task on real TensorFlow: ``realdist tf1 SCRIPT --cluster
ps=1,worker=3``, the real half of ``simdist tf1`` (``simdist/training/tf1_script.py``).

Each task is a process of a localhost cluster behind a loopback-only network
(``realdist.runtime.localcluster.run_cluster``): it gets ``--job_name``, ``--task_index``
and ``TF_CONFIG`` as a TF1 guide's launcher would, ``DISTLAB_HALF=real`` (so that
``from distlab import tf`` is ``tensorflow.compat.v1``), and runs the script as
``__main__``. The ps tasks serve until every worker has ended. What each task reported with
``distlab.report`` comes back per task.
"""

from __future__ import annotations

from pathlib import Path

from realdist.runtime.localcluster import Task, run_cluster
from simdist.base.errors import InvalidArgumentError

_TASK = """
import runpy
job, index = TASK.split(":")
os.environ["DISTLAB_HALF"] = "real"
os.environ["TF_CONFIG"] = json.dumps({{"cluster": CLUSTER, "task": {{"type": job,
                                                                   "index": int(index)}}}})
sys.argv = [{script!r}, f"--job_name={{job}}", f"--task_index={{index}}", *{args!r}]
runpy.run_path({script!r}, run_name="__main__")
"""


def run_script(script, jobs: dict, script_args=(), timeout: float = 240,
               clients=None) -> dict:
    """Run ``script`` once per task of ``jobs`` ({job: tasks}) on real TF; returns
    {task: {key: value}} of what each task reported. ``clients``: the tasks (or jobs) that
    run a client and end (default: every task but the ps); the others serve in
    ``server.join()`` and are stopped once the clients have ended."""
    path = Path(script).resolve()
    if not path.is_file():
        raise InvalidArgumentError(f"script {str(script)!r} does not exist: expected a "
                                   "Python file")
    code = _TASK.format(script=str(path), args=list(script_args))
    names = [f"{job}:{i}" for job, n in jobs.items() for i in range(n)]
    chosen = [n for n in names if n.split(":")[0] != "ps"] if clients is None else [
        n for n in names if n in clients or n.split(":")[0] in clients]
    unknown = [c for c in clients or () if c not in names and c not in jobs]
    if unknown or not chosen:
        raise InvalidArgumentError(f"clients {list(clients or [])!r}: expected tasks or jobs "
                                   f"of the cluster ({', '.join(names)}), at least one")
    tasks = [Task(name, code, server=name not in chosen) for name in names]
    report = run_cluster(dict(jobs), tasks, timeout)
    return {name: report["outputs"].get(name, {}) for name in (t.name for t in tasks)}
