"""One TF1 script run once per task, every task a client of one simulated cluster:
``simdist tf1 SCRIPT --cluster ps=1,worker=3``.

As a between-graph job starts the same script on every machine, each with its task's role,
``run_script`` starts a server for every task (``launched_servers``: the script's own
``Server(cluster, job, index)`` stands for it) and runs the script as one client per task,
in one simulation (``simulate_clients``). Each client sees its own process: ``sys.argv``
with ``--job_name`` and ``--task_index`` (the TF1 guide's flags) and ``TF_CONFIG``, set
whenever its thread takes control; its ``print`` output is kept per task; its
``time.sleep`` waits in simulated time. ``from distlab import tf`` gives the script
``simdist.graph``; ``distlab.report`` collects its results per task.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import distlab
from simdist.base.errors import InvalidArgumentError, SimdistError, UnknownError
from simdist.base.files import write_atomic
from simdist.graph._sim.clients import current_client, simulate_clients
from simdist.graph._sim.world import over_ranks
from simdist.graph.graph import Graph
from simdist.graph.server import launched_servers
from simdist.hardware.cluster import ClusterSpec


@dataclass
class ScriptRun:
    """What ``run_script`` gives: each task's printed output and reported results, the
    trace, and the simulated time the job took (ns)."""

    outputs: dict  # task -> what it printed
    results: dict  # task -> {key: value} (distlab.report)
    trace: object
    end_time: int


def parse_cluster(text: str) -> dict:
    """"ps=1,worker=3" -> {"ps": 1, "worker": 3}."""
    jobs = {}
    for part in str(text).split(","):
        name, eq, count = part.strip().partition("=")
        if not eq or not name.isidentifier() or not count.isdigit() or int(count) < 1:
            raise InvalidArgumentError(f"--cluster {text!r}: expected JOB=COUNT[,JOB=COUNT...] "
                                       "such as ps=1,worker=3")
        jobs[name] = int(count)
    return jobs


def run_script(script, jobs: dict, script_args=(), transport=None) -> ScriptRun:
    """Run ``script`` once per task of the cluster ``jobs`` ({job: tasks}), in one
    simulation; with ``transport`` (an ``MPITransport``) its tasks are spread over the MPI
    ranks, each rank running its own tasks' clients, and rank 0 gets every task's output,
    results and the trace (the other ranks their own outputs and results, no trace)."""
    path = Path(script)
    if not path.is_file():
        raise InvalidArgumentError(f"script {str(script)!r} does not exist: expected a "
                                   "Python file")
    addresses = {job: [f"localhost:{2222 + 100 * j + i}" for i in range(n)]
                 for j, (job, n) in enumerate(jobs.items())}
    cluster = ClusterSpec(addresses)
    outputs = {f"{job}:{i}": io.StringIO() for job, n in jobs.items() for i in range(n)}
    results: dict = {}

    def client(task):
        job, index = task.split(":")
        argv = [str(path), f"--job_name={job}", f"--task_index={index}", *script_args]
        tf_config = json.dumps({"cluster": addresses, "task": {"type": job,
                                                               "index": int(index)}})

        def enter():  # this client's process: its argv, TF_CONFIG, stdout
            sys.argv[:] = argv
            os.environ["TF_CONFIG"] = tf_config
            distlab.CURRENT_TASK = task
            sys.stdout = outputs[task]

        def body():  # a process of its own: its own default graph
            with Graph().as_default():
                try:
                    runpy.run_path(str(path), run_name="__main__")
                except SimdistError:
                    raise
                except Exception as error:  # the script's own: one line, with its place
                    raise UnknownError(f"{task}'s script raised {type(error).__name__}: "
                                       f"{error}{_where(error, path)}") from error
        return body, enter

    saved = (list(sys.argv), os.environ.get("TF_CONFIG"), sys.stdout, time.sleep)
    distlab.RESULTS = results
    try:
        time.sleep = _simulated_sleep
        with launched_servers(cluster), (over_ranks(transport) if transport is not None
                                         else contextlib.nullcontext()):
            clients = {task: client(task) for task in outputs}
            run = simulate_clients({task: fn for task, (fn, _) in clients.items()},
                                   enters={task: enter for task, (_, enter) in clients.items()},
                                   tasks={task: task for task in clients})
    finally:
        sys.argv[:], sys.stdout, time.sleep = saved[0], saved[2], saved[3]
        if saved[1] is None:
            os.environ.pop("TF_CONFIG", None)
        else:
            os.environ["TF_CONFIG"] = saved[1]
        distlab.RESULTS = distlab.CURRENT_TASK = None
    texts = {task: out.getvalue() for task, out in outputs.items()}
    if transport is not None and transport.size > 1:  # each rank ran its own tasks' clients
        parts = transport.gather((texts, results))
        if transport.rank == 0:
            texts = {task: next((p[0][task] for p in parts if p[0][task]), "")
                     for task in texts}
            results = {task: r for _, part in parts for task, r in part.items()}
    results = {task: results[task] for task in texts if task in results}  # in task order
    return ScriptRun(texts, results, run.trace, run.end_time)


def _where(error: BaseException, path: Path) -> str:
    """" (script.py, line N)": the script's last line in the error's traceback."""
    lines = [f.lineno for f in traceback.extract_tb(error.__traceback__)
             if Path(f.filename).resolve() == path.resolve()]
    return f" ({path.name}, line {lines[-1]})" if lines else ""


_real_sleep = time.sleep


def _simulated_sleep(seconds):
    """``time.sleep`` of a simulated client: it waits in simulated time."""
    client = current_client()
    if client is None:
        return _real_sleep(seconds)
    with contextlib.suppress(TypeError):
        seconds = float(seconds)
    if not isinstance(seconds, float) or seconds < 0:
        raise ValueError(f"sleep length must be a number >= 0, got {seconds!r}")
    client.wait(client.env.timeout(int(round(seconds * 1e9))))


def describe(results: dict, outputs: dict | None = None) -> list[str]:
    """Lines for a run's report: each task's printed output, then what it reported."""
    lines = []
    for task, text in (outputs or {}).items():
        lines += [f"[{task}] {line}" for line in text.splitlines()]
    for task in sorted(results, key=_task_key):
        values = ", ".join(f"{key} {_brief(value)}" for key, value in results[task].items())
        lines.append(f"{task}: {values or 'reported nothing'}")
    return lines


def _task_key(task: str):
    job, _, index = task.partition(":")
    return job, int(index) if index.isdigit() else 0


def _brief(value) -> str:
    if isinstance(value, list) and len(value) > 4:
        shown = ", ".join(_brief(v) for v in value[-3:])
        return f"[... {shown}] ({len(value)})"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(_brief(v) for v in value) + "]"
    return str(value)


def write_results(path, half: str, cluster: str, results: dict) -> None:
    """Write what each task reported (``--results``), whole or not at all: the file that
    ``simdist compare`` reads."""
    write_atomic(path, json.dumps({"half": half, "cluster": cluster, "results": results},
                                  indent=1))


def is_results_file(data) -> bool:
    """Whether ``data`` (a loaded JSON) is what ``simdist tf1`` / ``realdist tf1
    --results`` write."""
    return isinstance(data, dict) and {"half", "results"} <= set(data)


def compare_results(first: dict, second: dict) -> tuple[list[str], bool]:
    """Two tf1 runs' results side by side, task by task and key by key; agreement means
    the same tasks reported and the same last global step (what the script reports as
    "global_step"; how many runs each worker makes is a race on real TF)."""
    a, b = ({t: r for t, r in run["results"].items() if r} for run in (first, second))
    lines = [f"{'task':10s} {'result':14s} {first['half']:>24s} {second['half']:>24s}"]
    for task in sorted(set(a) | set(b), key=_task_key):
        for key in sorted(set(a.get(task, {})) | set(b.get(task, {}))):
            left, right = a.get(task, {}).get(key, "-"), b.get(task, {}).get(key, "-")
            lines.append(f"{task:10s} {key:14s} {_brief(left):>24s} {_brief(right):>24s}")

    def step(results):
        steps = [r["global_step"] for r in results.values() if "global_step" in r]
        return max(steps) if steps else None
    agree = set(a) == set(b) and step(a) is not None and step(a) == step(b)
    lines.append(f"global step: {step(a)} and {step(b)}: "
                 + ("the same" if agree else "they differ (or a task reported nothing)"))
    return lines, agree
