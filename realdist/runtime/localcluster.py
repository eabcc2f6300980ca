"""A localhost TF cluster of several processes, reachable from this machine only (every
TF server runs in a ``realdist.runtime.private_network.PrivateNetwork``).

``run_cluster`` starts a launcher (this module's ``main``, forked by the caller's TF zygote,
``realdist.runtime.zygote``) in a private network; it picks a free port per task, imports
TensorFlow once (already imported in a forked launcher) and forks each task from itself
(``realdist.runtime.forkstart``; ``DISTLAB_FORK_TASKS=0``: each a fresh ``python -c``), to
run ``PRELUDE + code`` (``realdist.runtime.processes``; ``CLUSTER``, the cluster dict with
``127.0.0.1:PORT`` addresses, and ``TASK``, its name, are defined for it), watches them and
reports what they emitted. Server tasks serve until every client task has ended. A task that
fails (a client, or a server not ``survivable``) or stays stopped (SIGSTOP) ends the run
(UnavailableError naming the first to fail, with the end of its log:
``realdist.runtime.watch``), one that hangs ends it at the timeout (DeadlineExceededError),
and every process is killed in a ``finally`` (the launcher kills its tasks, the caller the
launcher) and every one dies with its parent.

Failures (``failures=[KillOrder(task, at_ms, down_ms)]``, the spec of simdist's
``train_on_ps``): the launcher kills the task's process (SIGKILL) ``at_ms`` after the start
line (the first ``start_line`` a task emits: its ``time.monotonic_ns``) and starts it again
``down_ms`` later, the same command on the same port, with ``DISTLAB_INCARNATION`` = 1, 2...
in its environment; a restarted task's output is ``outputs["TASK#1"]`` and so on, and
``report["failures"]`` says when (``time.monotonic_ns``) each task was killed, restarted,
and serving again (its port listening: a forked task serves within a second, a fresh
Python takes seconds to import TensorFlow).
A task may also order a failure of a server task at once: it appends ``{"task": "worker:1",
"down_ms": 1000}`` (null: never restarted) as a line to the file ``CONTROL`` (a path
defined for it), e.g. when it sees that worker inside a function.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from simdist.base import errors
from simdist.base.processes import die_with_parent

from realdist.runtime import forkstart
from realdist.runtime.private_network import PrivateNetwork
from realdist.runtime.processes import (IMPORTS, MARK, PRELUDE, child_env, free_ports,
                                        log_tail, read_back, read_outputs)
from realdist.runtime.tempdirs import owned_tempdir
from realdist.runtime.watch import ProcessWatch, check_failed, check_stopped
from realdist.runtime.zygote import start_program

# TF's __init__ imports Keras's optimizers (for the SavedModel registry, b/196254385):
# 2-3 s of each process's start-up that these programs, which use no Keras, do without.
#: the launcher's program (``start_program`` runs code): this module's ``main``
LAUNCHER = ("import runpy\nrunpy.run_module('realdist.runtime.localcluster', "
            "run_name='__main__')\n")
LEAN_IMPORT = ("import sys\nsys.modules['keras.src.optimizers'] = None\n"
               "sys.modules['tf_keras.src.optimizers'] = None\n")


# ----------------------------------------------------------------------- the cluster


@dataclass
class Task:
    """One process of the cluster: ``code`` runs after ``processes.PRELUDE``; a ``server``
    task is killed once every other task has ended."""

    name: str
    code: str
    server: bool = False
    keras: bool = False  # uses Keras: tf_keras (TF_USE_LEGACY_KERAS=1), its import not skipped
    survivable: bool = False  # a server whose death the clients ride out (a PSS worker)


class KillOrder(NamedTuple):
    """The launcher's order: kill ``task`` ("ps:0", "worker:1") ``at_ms`` after the start
    line, restart it ``down_ms`` later: a ``simdist.distribute.failures.Failure`` in the
    launcher's wall-clock milliseconds."""

    task: str
    at_ms: float
    down_ms: float


def kill_orders(failures, jobs: dict[str, int], caller: str) -> list[KillOrder]:
    """``failures`` as KillOrder records, each naming a task of ``jobs`` with times >= 0; one
    line naming the bad value otherwise."""
    tasks = [f"{job}:{i}" for job, n in jobs.items() for i in range(n)]
    checked = []
    for failure in failures:
        try:
            task, at_ms, down_ms = failure
        except (TypeError, ValueError):
            raise errors.InvalidArgumentError(
                f"{caller}: failure {failure!r}, expected (task, at_ms, down_ms)") from None
        if task not in tasks:
            raise errors.InvalidArgumentError(
                f"{caller}: failure of task {task!r}, which is not in this cluster: its "
                f"tasks are {', '.join(tasks)}")
        for label, value in (("at_ms", at_ms), ("down_ms", down_ms)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    0 <= value <= 600_000):
                raise errors.InvalidArgumentError(
                    f"{caller}: failure of {task}: {label}={value!r}, expected ms from 0 to "
                    "600000")
        checked.append(KillOrder(task, at_ms, down_ms))
    return checked


def run_cluster(jobs: dict[str, int], tasks: list[Task], timeout: float,
                failures=()) -> dict:
    """Run ``tasks`` on a localhost cluster with ``jobs`` ({job: number of tasks}); returns
    {"outputs": {task name: what it emitted}, "network": {...}, "cluster": {...},
    "failures": [...]}. ``failures``: see the module docstring."""
    failures = kill_orders(failures, jobs, "run_cluster")
    with PrivateNetwork() if jobs else nullcontext() as net, tempfile.TemporaryFile() as job, \
            tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        job.write(json.dumps({
            "jobs": jobs, "timeout": timeout, "namespace": bool(net and net.isolated),
            "tasks": [vars(t) for t in tasks],
            "failures": [f._asdict() for f in failures]}).encode())
        job.seek(0)
        # forked by this process's TF zygote (TensorFlow imported already, with Keras 2 where
        # a task uses Keras); the launcher's tasks die with it
        keras = {"TF_USE_LEGACY_KERAS": "1"} if any(t.keras for t in tasks) else {}
        proc = start_program(LAUNCHER, [], {**child_env(), **keras}, out_file.fileno(),
                             err_file.fileno(), "tf-cluster", stdin=job.fileno(), network=net,
                             filename="<realdist cluster launcher>")
        try:
            proc.wait(timeout=timeout + 30)
        except subprocess.TimeoutExpired:
            raise errors.DeadlineExceededError(
                f"the localhost cluster's launcher did not end {timeout + 30:g} s after it "
                "started; it and its tasks are killed") from None
        finally:
            proc.kill()
            proc.wait()
        out, err = read_back(out_file), read_back(err_file)
    report = [json.loads(line[len(MARK):]) for line in out.splitlines()
              if line.startswith(MARK)]
    if not report:
        raise errors.UnavailableError(f"the localhost cluster's launcher exited with "
                                      f"{proc.returncode} and no report:\n{err[-3000:]}")
    if "error" in report[-1]:
        error = report[-1]["error"]
        raise getattr(errors, error["class"])(error["message"])
    return report[-1]


def run_local(code: str, timeout: float) -> dict:
    """Run one TF program (no cluster) the same way; what it emitted."""
    return run_cluster({}, [Task("main", code)], timeout)["outputs"]["main"]


# ---------------------------------------------------------------------- the launcher


def listening(ports) -> set[str]:
    """The sockets of this network namespace listening on ``ports``, as "ADDRESS:PORT"
    (from /proc/net/tcp and tcp6: "0.0.0.0", "[::]", "127.0.0.1", ...)."""
    found = set()
    for path, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(path).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, port = fields[1].split(":")
            if fields[3] == "0A" and int(port, 16) in ports:  # 0A: LISTEN
                found.add(f"{_address(address, width)}:{int(port, 16)}")
    return found


def _address(hex_address: str, width: int) -> str:
    raw = bytes.fromhex(hex_address)
    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # host-order words
    if width == 8:
        return socket.inet_ntop(socket.AF_INET, raw)
    return f"[{socket.inet_ntop(socket.AF_INET6, raw)}]"


def launch(job: dict) -> dict:
    """Start the job's tasks here, watch them, return their outputs (the launcher's work)."""
    names = [(name, i) for name, n in job["jobs"].items() for i in range(n)]
    ports = free_ports(len(names))
    cluster = {name: [] for name in job["jobs"]}
    for (name, _), port in zip(names, ports):
        cluster[name].append(f"127.0.0.1:{port}")
    tasks = {t["name"]: Task(**t) for t in job["tasks"]}
    deadline = time.monotonic() + job["timeout"]
    seen: set[str] = set()
    keras = any(t.keras for t in tasks.values())
    keras_env = {"TF_USE_LEGACY_KERAS": "1"} if keras else {}
    fork = forkstart.enabled()
    with owned_tempdir("realdist-cluster-") as tmp:
        tmp = Path(tmp)
        procs, runs = {}, []  # runs: (output name, task name) of every process started
        # TensorFlow imported once, here (unless this launcher was forked by a zygote that
        # imported it); each task forked from this process
        if fork and "tensorflow" not in sys.modules:
            forkstart.preload(("" if keras else LEAN_IMPORT) + IMPORTS,
                              {**child_env(tmp), **keras_env})

        def start(name, incarnation=0):
            task = tasks[name]
            code = (("" if task.keras else LEAN_IMPORT) + PRELUDE
                    + "CLUSTER = json.loads(sys.argv[1])\n" + f"TASK = {task.name!r}\n"
                    + f"CONTROL = {str(schedule.control)!r}\n" + task.code)
            env = {**child_env(tmp), **keras_env, "DISTLAB_INCARNATION": str(incarnation)}
            label = name if incarnation == 0 else f"{name}#{incarnation}"
            with open(tmp / f"{label}.out", "wb") as out, \
                    open(tmp / f"{label}.log", "wb") as err:
                if fork:
                    procs[name] = forkstart.start(code, [json.dumps(cluster)], env, out, err,
                                                  label)
                else:
                    procs[name] = subprocess.Popen(
                        [sys.executable, "-c", code, json.dumps(cluster)], stdout=out,
                        stderr=err, env=env, preexec_fn=die_with_parent)
            runs.append((label, name))
            watch.add(label, name, procs[name])

        def log(name):  # the log of the task's latest process
            return tmp / (next(label for label, task in reversed(runs) if task == name)
                          + ".log")

        ports_of = {f"{name}:{i}": port for (name, i), port in zip(names, ports)}
        schedule, watch = _Schedule(job.get("failures", ()), tmp, ports_of), ProcessWatch()
        try:
            for name in tasks:
                start(name)
            clients = [name for name, t in tasks.items() if not t.server]
            survivable = {name for name, t in tasks.items() if t.survivable}
            while True:
                seen |= listening(set(ports))
                schedule.step(procs, start)
                codes = {name: procs[name].poll() for name in clients}
                check_failed(watch, schedule, procs, clients, tmp, survivable)
                if all(code == 0 for code in codes.values()):
                    break
                check_stopped(watch, tmp)
                if time.monotonic() > deadline:
                    running = [name for name, code in codes.items() if code is None]
                    raise errors.DeadlineExceededError(
                        f"the localhost cluster did not finish within {job['timeout']:g} s"
                        f"{schedule.describe()}; still running: {', '.join(running)}"
                        f"{watch.note(schedule.killed)} -- killed. Their logs end:\n"
                        + "\n".join(f"  {name}:\n{log_tail(log(name), 6)}"
                                     for name in running))
                time.sleep(0.02)
        finally:
            for proc in procs.values():
                _kill_group_member(proc)
        outputs = {label: read_outputs(tmp / f"{label}.out") for label, _ in runs}
    interfaces = sorted(name for _, name in socket.if_nameindex())
    network = {"namespace": job["namespace"], "interfaces": interfaces,
               "listening": sorted(seen)}
    return {"outputs": outputs, "network": network, "cluster": cluster,
            "failures": schedule.done}


class _Schedule:
    """The failures still to inject: each kills its task ``at_ms`` after the start line and
    restarts it ``down_ms`` later; ``done`` records when (time.monotonic_ns)."""

    def __init__(self, failures, tmp: Path, ports: dict):
        self.pending = sorted((KillOrder(**f) for f in failures), key=lambda f: f.at_ms)
        self.tmp, self.ports, self.start_line, self.done = tmp, ports, None, []
        self.restarts: list = []  # (when ns, task, its record in done)
        self.incarnations: dict = {}
        self.killed: list = []  # the processes it killed (subprocess.Popen)
        self.control, self.orders_read = tmp / "control", 0  # failures tasks order
        self.control.touch()

    def orders(self) -> list[dict]:
        """The failures tasks ordered since the last look (complete lines only)."""
        lines = self.control.read_text().split("\n")[:-1]
        new, self.orders_read = lines[self.orders_read:], len(lines)
        return [json.loads(line) for line in new]

    def down(self, name: str) -> bool:
        return any(task == name for _, task, _ in self.restarts)

    def step(self, procs, start) -> None:
        for record in self.done:  # a restarted task serves once its port listens again
            if record["restarted"] and record["serving"] is None and listening(
                    {self.ports[record["task"]]}):
                record["serving"] = time.monotonic_ns()
        orders = self.orders()
        if not (self.pending or self.restarts or orders):
            return
        if self.start_line is None:
            lines = [read_outputs(path).get("start_line") for path in self.tmp.glob("*.out")]
            self.start_line = min((t for t in lines if t is not None), default=None)
            if self.start_line is None and not orders:
                return
            self.start_line = self.start_line or time.monotonic_ns()
        now = time.monotonic_ns()
        for order in orders:  # due now
            if order.get("task") not in procs:
                raise errors.InvalidArgumentError(
                    f"a task ordered a failure of {order.get('task')!r}: expected one of "
                    f"{', '.join(procs)}")
            self.pending.insert(0, KillOrder(order["task"], (now - self.start_line) / 1e6,
                                           order.get("down_ms")))
        while self.pending and now >= self.start_line + self.pending[0].at_ms * 1e6:
            failure = self.pending.pop(0)
            if procs[failure.task].poll() is not None:
                continue  # it had ended: nothing to kill
            self.killed.append(procs[failure.task])
            _kill_group_member(procs[failure.task])
            record = {"task": failure.task, "at_ms": failure.at_ms,
                      "down_ms": failure.down_ms, "start_line": self.start_line,
                      "killed": time.monotonic_ns(), "restarted": None, "serving": None}
            self.done.append(record)
            if failure.down_ms is not None:  # None: never restarted
                self.restarts.append((record["killed"] + int(failure.down_ms * 1e6),
                                      failure.task, record))
        for when, name, record in [r for r in self.restarts if now >= r[0]]:
            self.restarts.remove((when, name, record))
            self.incarnations[name] = self.incarnations.get(name, 0) + 1
            start(name, self.incarnations[name])
            record["restarted"] = time.monotonic_ns()

    def describe(self) -> str:
        if not self.done:
            return ""
        return " (after " + ", ".join(
            f"{r['task']} was killed at {r['at_ms']:g} ms"
            + (" and restarted" if r["restarted"] else ", not restarted yet")
            for r in self.done) + ")"


def _kill_group_member(proc) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def main() -> None:
    try:
        report = launch(json.loads(sys.stdin.read()))
    except errors.SimdistError as error:
        report = {"error": {"class": type(error).__name__, "message": str(error)}}
    print(MARK + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
