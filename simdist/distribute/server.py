"""The tasks of a TF2 parameter-server cluster: ``tf.distribute.Server`` on every worker and
ps task, and the ``SimpleClusterResolver`` the coordinator connects with.

In TF2's parameter-server training only the coordinator (the chief) runs a program; the worker
and ps tasks start a server and ``join()`` it. Here each is a simulated task whose main serves
requests: a ps holds variables and answers reads, updates and embedding lookups (each a real
message whose bytes the network model prices); a worker runs the functions the coordinator
sends it. ``InProcessCluster`` is the address book that ties them together, as
``create_in_process_cluster`` does in TF's tutorial: build one per simulation and give every
task the same one; a server task's main returns ``cluster.server(ctx).join()`` (so that the
server is up when the simulation has built the tasks, before the coordinator runs). It lives in one Python process (the in-process transport):
a scheduled function is Python code, which cannot travel between MPI ranks.

Failures (``schedule_failure``) are TF's: a worker that fails loses the function it runs
(the coordinator runs it again elsewhere) and comes back ``down_ns`` later; a ps that fails
loses its variables, and every request to it fails with ``UnavailableError`` until it is
back and they are restored.
"""

from __future__ import annotations

import numpy as np

from simdist.hardware.cluster import ClusterSpec
from simdist.sim.context import HOST
from simdist.base.errors import FailedPreconditionError, InvalidArgumentError, UnavailableError
from simdist.sim.payloads import Phantom

#: the bytes of a request's header (a function call's RPC, without its tensors)
RPC_BYTES = 64


class SimpleClusterResolver:
    """``tf.distribute.cluster_resolver.SimpleClusterResolver``: the cluster spec and this
    task's role; ``cluster`` is the in-process cluster whose servers answer (TF's addresses)."""

    def __init__(self, cluster_spec, task_type: str = "chief", task_id: int = 0,
                 cluster: InProcessCluster | None = None):
        self._spec = cluster_spec if isinstance(cluster_spec, ClusterSpec) \
            else ClusterSpec(cluster_spec)
        self.task_type, self.task_id, self.cluster = task_type, task_id, cluster

    def cluster_spec(self) -> ClusterSpec:
        return self._spec


class TaskState:
    """Whether a server task is up; events for its next failure and its next restart."""

    def __init__(self, env, name: str):
        self.name, self.up = name, True
        self.failed = env.event(desc=f"{name} fails")
        self.restarted = env.event(desc=f"{name} restarts")
        self.running = None  # the process running a function (workers)
        self.incarnation = 0


class InProcessCluster:
    """The servers of one simulated cluster, their variables and their failures."""

    def __init__(self):
        self.states: dict[str, TaskState] = {}
        self.contexts: dict = {}
        self.variables: list = []  # every ps variable, by key
        self.stored: dict[str, int] = {}  # bytes of variables on each ps
        self.calls: dict = {}  # request number -> (Python payload, error) handed over in-process
        self._requests = 0
        self._failures: dict[str, list] = {}  # failures of tasks whose server is not up yet

    def resolver(self, ctx) -> SimpleClusterResolver:
        return SimpleClusterResolver(ctx.cluster, ctx.task_type, ctx.task_id, cluster=self)

    def server(self, ctx):
        """``tf.distribute.Server(...)`` of this task; ``yield from`` its ``join()``."""
        if ctx.task_type not in ("worker", "ps"):
            raise InvalidArgumentError(f"{ctx.name}: only worker and ps tasks run a server in "
                                       "parameter-server training; the chief coordinates")
        self.contexts[ctx.name] = ctx
        self.states[ctx.name] = TaskState(ctx.env, ctx.name)
        for failure in self._failures.pop(ctx.name, []):
            ctx.process(failure, name=f"failure of {ctx.name}", daemon=True)
        return _Server(self, ctx)

    def state(self, task: str) -> TaskState:
        if task not in self.states:
            raise InvalidArgumentError(
                f"task {task!r} runs no server in this cluster: its servers are "
                f"{sorted(self.states)} (every worker and ps task's main must start "
                "cluster.server(ctx), in this one process: not over MPI ranks)")
        return self.states[task]

    # -- requests to a ps -----------------------------------------------------------------------

    def call(self, ctx, ps: str, kind: str, payload, handover=None):
        """A request from ``ctx``'s task to ps task ``ps`` (``yield from``): returns its reply
        payload. ``UnavailableError`` when the ps is down or fails before it answers."""
        state = self.state(ps)
        if not state.up:
            raise UnavailableError(f"{ps} is unavailable (it failed); {ctx.name}'s {kind} "
                                   "request cannot reach it")
        self._requests += 1
        request = self._requests
        self.calls[request] = (handover, None)
        ctx.send(ps, ("ps", kind, request), payload)
        reply = ctx.recv(ps, ("reply", request))
        yield ctx.env.any_of([reply, state.failed])
        _, error = self.calls.pop(request)
        if not reply.triggered:
            raise UnavailableError(f"{ps} failed while serving {ctx.name}'s {kind} request")
        if error is not None:
            raise error
        return reply.value.payload

    # -- failures -------------------------------------------------------------------------------

    def schedule_failure(self, task: str, at_ns: int, down_ns: int | None = None):
        """Server task ``task`` fails at ``at_ns`` and restarts ``down_ns`` later (never with
        None); instants on its "faults" lane mark both."""
        job, _, index = str(task).partition(":")
        if job not in ("worker", "ps") or not index.isdigit():
            raise InvalidArgumentError(f"schedule_failure: task {task!r}: expected worker:N "
                                       "or ps:N")

        def failure():
            ctx = self.contexts[task]
            state = self.state(task)
            yield ctx.timeout(max(0, at_ns - ctx.now))
            ctx.instant("faults", "task failed", "fault", at_ns=at_ns)
            state.up = False
            state.incarnation += 1
            failed, state.failed = state.failed, ctx.env.event(desc=f"{task} fails")
            if state.running is not None and state.running.is_alive:
                state.running.interrupt("task failed")
            for v in self.variables:
                if v.task == task:
                    v.lost = True
            failed.succeed(task)
            if down_ns is None:
                return
            yield ctx.env.timeout(down_ns)
            state.up = True
            ctx.instant("faults", "task restarted", "fault")
            restarted, state.restarted = state.restarted, ctx.env.event(desc=f"{task} restarts")
            restarted.succeed(task)
        if task in self.contexts:
            self.contexts[task].process(failure(), name=f"failure of {task}", daemon=True)
        else:  # starts with the task's server
            self._failures.setdefault(task, []).append(failure())


class _Server:
    """One task's ``tf.distribute.Server``."""

    def __init__(self, cluster: InProcessCluster, ctx):
        self.cluster, self.ctx = cluster, ctx

    def join(self):
        """``server.join()``: serve until the run ends (a daemon: the run may end with it
        waiting). A worker runs what the coordinator starts on it; a ps answers requests."""
        if self.ctx.task_type == "ps":
            self.ctx.process(self._serve_ps(), name="ps server", daemon=True)
        return None
        yield  # a generator, as every task's main

    def _serve_ps(self):
        ctx, cluster = self.ctx, self.cluster
        state = cluster.states[ctx.name]
        while True:
            msg = yield ctx.recv(tag=None)
            if not state.up or msg.tag[0] != "ps" or msg.tag[2] not in cluster.calls:
                continue  # sent to a task that was down, or its caller gave up: lost
            ctx.process(self._answer(msg), name=f"{msg.tag[1]} {msg.tag[2]}", daemon=True)

    def _answer(self, msg):
        """Answer one request: read (the values), update (apply a function to each variable
        and its value), scatter (to some rows of each), lookup (rows of one shard); the ps
        host runs one at a time."""
        ctx, cluster = self.ctx, self.cluster
        _, kind, request = msg.tag
        handover, _ = cluster.calls.get(request, (None, None))
        payload = msg.payload
        keys = [int(k) for k in np.asarray(payload[0]).reshape(-1)]
        variables = [cluster.variables[k] for k in keys]
        reply, error, flops, nbytes = [], None, 0, 0
        lost = [v.name for v in variables if v.lost]
        if lost:
            error = FailedPreconditionError(
                f"variable(s) {', '.join(lost)} on {ctx.name} were lost when {ctx.name} "
                "failed: restore them from a checkpoint before using them")
        elif kind == "read":
            reply = [v.numpy() for v in variables]
            nbytes = sum(v.nbytes for v in variables)
        elif kind == "update":  # handover: the update function; payload: keys, values
            for v, value in zip(variables, payload[1:]):
                v.assign(handover(v.numpy(), value))
                flops += 2 * v.numpy().size
                nbytes += 3 * v.nbytes
        elif kind == "scatter":  # payload: keys, then (rows, values) per variable
            for i, v in enumerate(variables):
                rows, value = np.asarray(payload[1 + 2 * i]), payload[2 + 2 * i]
                table = v.numpy()
                table[rows] = handover(table[rows], value)
                v.assign(table)
                flops += 2 * np.asarray(value).size
                nbytes += 3 * np.asarray(value).nbytes
        elif kind == "lookup":
            rows = np.asarray(payload[1])
            reply = [variables[0].numpy()[rows]]
            nbytes = reply[0].nbytes
        duration = ctx.hardware.device.compute_time_ns(flops, nbytes)
        start = ctx.occupy(HOST, duration)
        names = ", ".join(v.name.rsplit(":", 1)[0] for v in variables)
        moved = msg.nbytes + sum(np.asarray(r).nbytes for r in reply)
        ctx.span(HOST, f"{kind} {names}", "ps", start, duration, bytes=moved, client=msg.src,
                 variables=names)
        counts = self._served(variables, moved)
        ctx.counter("variable reads", **counts)
        yield ctx.timeout(start + duration - ctx.now)
        if request in cluster.calls:  # else its caller gave up (this ps failed meanwhile)
            cluster.calls[request] = (None, error)
        if cluster.states[ctx.name].up:
            ctx.send(msg.src, ("reply", request), reply if reply else Phantom(RPC_BYTES))

    def _served(self, variables, moved: int) -> dict:
        """Count reads of each variable of this ps and the bytes it moved (trace counters)."""
        stats = getattr(self, "_stats", None)
        if stats is None:
            stats = self._stats = {"bytes moved": 0}
        stats["bytes moved"] += moved
        for v in variables:
            key = v.name.rsplit(":", 1)[0]
            stats[key] = stats.get(key, 0) + 1
        self.ctx.counter("ps load", bytes_stored=self.cluster.stored.get(self.ctx.name, 0),
                         bytes_moved=stats["bytes moved"])
        return {k: n for k, n in stats.items() if k != "bytes moved"}


__all__ = ["InProcessCluster", "SimpleClusterResolver", "TaskState"]
