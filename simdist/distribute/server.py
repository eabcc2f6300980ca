"""The tasks of a TF2 parameter-server cluster: ``tf.distribute.Server`` on every worker and
ps task, and the ``SimpleClusterResolver`` the coordinator connects with.

In TF2's parameter-server training only the coordinator (the chief) runs a program; the worker
and ps tasks start a server and ``join()`` it. Here each is a simulated task whose main serves
requests: a ps holds its variables' values and answers reads, updates, embedding lookups and
the coordinator's checkpoints (save, restore); a worker runs the functions the coordinator
names in its "run" messages (``simdist/distribute/worker.py``). Everything between tasks
is a message whose bytes the network model prices, so the tasks may sit on different MPI
ranks.

``InProcessCluster`` is one rank's view of the cluster, as ``create_in_process_cluster`` is in
TF's tutorial: build one per simulation (one per rank: every rank runs the same program) and
give every task the same one; a server task's main returns ``cluster.server(ctx).join()``.
It holds this rank's servers, the variable handles (every rank creates the same ones, in the
same order), the functions and update rules the program registers by name
(``register``, ``register_rule``: what travels is a name, never code), and a mirror of every
server task's state: failures are known at start (``InProcessCluster(failures=...)``), so
every rank runs the same schedule and sees a task go down and up at the same simulated time.

Failures are TF's: a worker that fails loses the function it runs (the coordinator runs it
again elsewhere) and its datasets, and comes back ``down_ns`` later; a ps that fails loses its
variables, and every request to it fails with ``UnavailableError`` until it is back, then
with ``FailedPreconditionError`` until they are restored.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simdist.base.errors import FailedPreconditionError, InvalidArgumentError, UnavailableError
from simdist.distribute.failures import Failure
from simdist.distribute.rpc import UpdateRule
from simdist.distribute.sharded_variable import summed_rows
from simdist.distribute.worker import WorkerServer
from simdist.hardware.cluster import ClusterSpec
from simdist.sim.context import HOST
from simdist.sim.payloads import Phantom
from simdist.sim.wire import RPC_BYTES, decode_header, encode_header, error_fields, rebuild_error

SERVER_JOBS = ("worker", "ps")
#: requests of the coordinator's checkpoints, not of training
CHECKPOINTS = ("save", "restore")


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


#: the coordinator's notice to every rank that the job is over (``end_training``)
TRAINING_ENDED = "parameter server training ended"


class PendingFailure(NamedTuple):
    """A failure's wait: for its time (``restart`` False) or for its task to come back."""

    failure: Failure
    wait: object  # the simulated Timeout
    restart: bool
    due: int  # when the wait ends (ns)


class TaskState:
    """This rank's mirror of a server task: whether it is up, events for its next failure
    and restart (of the task's own order, so that they run in the same place on every
    rank), how often it failed and when it failed last."""

    def __init__(self, env, name: str, order: int):
        self.name, self.order, self.up = name, order, True
        self.failed = env.event(desc=f"{name} fails", order=order)
        self.restarted = env.event(desc=f"{name} restarts", order=order)
        self.incarnation = 0
        self.failed_at = -1


class InProcessCluster:
    """One rank's view of a simulated cluster: its servers, the variable handles, the
    registered functions and rules, and every server task's state."""

    def __init__(self, failures=()):
        self.failures = [Failure.parse(f) for f in failures]
        self.states: dict[str, TaskState] = {}
        self.contexts: dict = {}  # this rank's server tasks
        self.servers: dict = {}
        self.variables: list = []  # every ps variable's handle, by key
        self.stored: dict[str, int] = {}  # bytes of variables on each ps
        self.functions: dict = {}  # registered name -> function (scheduled, or a dataset's)
        self.rules: dict = {}  # registered name -> update function (v, value) -> new v
        self.strategies: list = []  # this rank's ParameterServerStrategy objects
        self._names: dict = {}  # id(function or rule) -> its registered name
        self._env = None
        self._waits: list[PendingFailure] = []  # every failure's waits, in order

    def resolver(self, ctx) -> SimpleClusterResolver:
        self._attach(ctx)
        return SimpleClusterResolver(ctx.cluster, ctx.task_type, ctx.task_id, cluster=self)

    def server(self, ctx):
        """``tf.distribute.Server(...)`` of this task; ``yield from`` its ``join()``."""
        if ctx.task_type not in SERVER_JOBS:
            raise InvalidArgumentError(f"{ctx.name}: only worker and ps tasks run a server in "
                                       "parameter-server training; the chief coordinates")
        self._attach(ctx)
        self.contexts[ctx.name] = ctx
        server = self.servers[ctx.name] = (PsServer if ctx.task_type == "ps"
                                           else WorkerServer)(self, ctx)
        return server

    def _attach(self, ctx) -> None:
        """The first task of this rank: mirror every server task, start the failures."""
        if self._env is not None:
            return
        self._env, spec = ctx.env, ctx.cluster
        for task in spec.tasks():
            if task.task_type in SERVER_JOBS:
                self.states[task.name] = TaskState(ctx.env, task.name, spec.task_order(task))
        for f in self.failures:
            self._start_failure(f)
        ctx.on_notice(TRAINING_ENDED, self._cancel_waits)

    def state(self, task: str) -> TaskState:
        if task not in self.states:
            raise InvalidArgumentError(f"task {task!r} runs no server in this cluster: its "
                                       f"worker and ps tasks are {sorted(self.states)}")
        return self.states[task]

    def all_local(self) -> bool:
        """Whether every server task runs on this rank (one process: the in-process
        transport, or mpiexec -n 1)."""
        return set(self.servers) == set(self.states)

    # -- what the program registers by name -----------------------------------------------------

    def register(self, fn, name: str | None = None) -> str:
        """Register a scheduled function or a dataset function under ``name`` (its
        ``__name__`` by default): every rank's program registers the same ones, so that a
        "run" message names it. Returns the name."""
        name = name or getattr(fn, "__name__", "function")
        if self.functions.get(name, fn) is not fn:
            raise InvalidArgumentError(f"register: the name {name!r} is taken by another "
                                       "function; give this one another name")
        self.functions[name], self._names[id(fn)] = fn, name
        return name

    def register_rule(self, fn, name: str | None = None) -> UpdateRule:
        """Register ``fn(variable value, value) -> new value`` as an update rule a ps can
        apply (the built-in ones, SGD(lr), ASSIGN_ADD, ASSIGN_SUB, need none)."""
        name = name or getattr(fn, "__name__", "rule")
        if self.rules.get(name, fn) is not fn:
            raise InvalidArgumentError(f"register_rule: the name {name!r} is taken by another "
                                       "rule; give this one another name")
        self.rules[name], self._names[id(fn)] = fn, name
        return UpdateRule(name)

    def name_of(self, fn, what: str) -> str:
        """The registered name of ``fn``; in one process, an unregistered one is registered
        now (under a name of its own), across MPI ranks it is an error."""
        name = self._names.get(id(fn))
        if name is not None:
            return name
        return self.register(fn, self._new_name(
            fn, self.functions, f"{what} {{!r}} is not registered: across MPI ranks a function "
            "travels by name, so register it with cluster.register(fn) in code every rank runs"))

    def rule_of(self, fn) -> UpdateRule:
        """``fn`` as an update rule: an ``UpdateRule`` as it is, a registered function by its
        name; in one process an unregistered function is registered now."""
        if isinstance(fn, UpdateRule):
            return fn
        if not callable(fn):
            raise InvalidArgumentError(f"update: fn must be an UpdateRule (SGD(lr), "
                                       f"ASSIGN_ADD...) or a registered rule, got {fn!r}")
        name = self._names.get(id(fn))
        if name is not None:
            return UpdateRule(name)
        return self.register_rule(fn, self._new_name(
            fn, self.rules, "update rule {!r} is Python code, which does not travel to a ps on "
            "another MPI rank: use SGD(lr), ASSIGN_ADD, ASSIGN_SUB, or "
            "cluster.register_rule(fn) in code every rank runs"))

    def _new_name(self, fn, taken: dict, refusal: str) -> str:
        """A name of its own for unregistered ``fn`` (in one process only: ``refusal``,
        formatted with its ``__name__``, is the error across ranks)."""
        base = getattr(fn, "__name__", "function")
        if not self.all_local():
            raise InvalidArgumentError(refusal.format(base))
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}@{n}"
        return name

    # -- variables ------------------------------------------------------------------------------

    def _created(self, variable, value) -> None:
        """A variable was created (on every rank): its ps, if on this rank, holds the value."""
        self.variables.append(variable)
        self.stored[variable.task] = self.stored.get(variable.task, 0) + variable.nbytes
        server = self.servers.get(variable.task)
        if server is not None:
            server.hold(variable, value)

    def home(self, task: str):
        """The ps server ``task`` if it runs on this rank, else None."""
        return self.servers.get(task)

    # -- requests to a ps -----------------------------------------------------------------------

    def call(self, ctx, ps: str, kind: str, payload):
        """A request from ``ctx``'s task to ps task ``ps`` (``yield from``): returns its reply
        payload. ``UnavailableError`` when the ps is down or fails before it answers."""
        state = self.state(ps)
        if not state.up:
            raise UnavailableError(f"{ps} is unavailable (it failed); {ctx.name}'s {kind} "
                                   "request cannot reach it")
        request = ctx.next_instance("ps request")
        ctx.send(ps, ("ps", kind, request), payload)
        reply = ctx.recv(ps, ("reply", request))
        yield ctx.env.any_of([reply, state.failed])
        if not reply.triggered:
            raise UnavailableError(f"{ps} failed while serving {ctx.name}'s {kind} request")
        answer = reply.value.payload
        if isinstance(answer, dict):
            raise self._status_error(ps, decode_header(answer["status"]))
        return answer

    def _status_error(self, ps: str, status: dict) -> Exception:
        if "lost" in status:
            lost = ", ".join(self.variables[k].name for k in status["lost"])
            return FailedPreconditionError(
                f"variable(s) {lost} on {ps} were lost when {ps} failed: restore them from a "
                "checkpoint before using them")
        if "missing" in status:
            return FailedPreconditionError(
                f"variable(s) {status['missing']} were never created on {ps}: create "
                "variables in code every rank runs (each ps holds what its rank created)")
        return rebuild_error(status["error"])

    # -- failures -------------------------------------------------------------------------------

    def schedule_failure(self, task: str, at_ns: int, down_ns: int | None = None):
        """Server task ``task`` fails at ``at_ns`` and restarts ``down_ns`` later (never with
        None). In one process only: across ranks, give the failures to
        ``InProcessCluster(failures=...)`` so that every rank knows them."""
        failure = Failure(str(task), at_ns, down_ns)
        job, _, index = failure.task.partition(":")
        if job not in SERVER_JOBS or not index.isdigit():
            raise InvalidArgumentError(f"schedule_failure: task {task!r}: expected worker:N "
                                       "or ps:N")
        if self._env is None:
            self.failures.append(failure)  # started with the first task of this rank
            return
        if not self.all_local():
            raise InvalidArgumentError(
                f"schedule_failure({task!r}) while running: across MPI ranks every rank must "
                "know the failures at start: give them to InProcessCluster(failures=...)")
        self._start_failure(failure)

    def end_training(self, ctx) -> list[PendingFailure]:
        """The coordinator's program (task ``ctx``) ended: TF's job is over. The failures
        that have not happened yet never will, and the tasks still down do not come back,
        so neither runs simulated time on. Every rank learns it at the end of this window
        (``ctx.post``, the same at any rank count): the waits due from then on are
        cancelled there, on every rank; returns them."""
        effective = ctx.post(TRAINING_ENDED)
        return [p for p in self._waits if not p.wait.processed and p.due >= effective]

    def _cancel_waits(self) -> None:
        for p in self._waits:
            if not p.wait.processed:
                p.wait.cancel()

    def _start_failure(self, f: Failure) -> None:
        state = self.state(f.task)
        self._env.process(self._failure(state, f), name=f"{f.task}/failure of {f.task}",
                          order=state.order, daemon=True)

    def _failure(self, state: TaskState, f: Failure):
        """The failure of ``f.task`` as this rank sees it: the mirror goes down and up; a
        server on this rank loses what it holds (its instants on its "faults" lane)."""
        env = self._env
        wait = env.timeout(max(0, f.at_ns - env.now))
        self._waits.append(PendingFailure(f, wait, False, env.now + wait.delay))
        yield wait
        server = self.servers.get(f.task)
        if server is not None:
            server.ctx.instant("faults", "task failed", "fault", at_ns=f.at_ns)
        state.up = False
        state.incarnation += 1
        state.failed_at = env.now
        failed, state.failed = state.failed, env.event(desc=f"{f.task} fails", order=state.order)
        if server is not None:
            server.lose()
        failed.succeed(f.task)
        if f.down_ns is None:
            return
        wait = env.timeout(f.down_ns)
        self._waits.append(PendingFailure(f, wait, True, env.now + f.down_ns))
        yield wait
        state.up = True
        if server is not None:
            server.ctx.instant("faults", "task restarted", "fault")
            server.restart()
        restarted, state.restarted = state.restarted, env.event(desc=f"{f.task} restarts",
                                                               order=state.order)
        restarted.succeed(f.task)


class PsServer:
    """One ps task's ``tf.distribute.Server``: the values of its variables."""

    def __init__(self, cluster: InProcessCluster, ctx):
        self.cluster, self.ctx = cluster, ctx
        self.values: dict[int, np.ndarray] = {}  # key -> value
        self.names: dict[int, str] = {}
        self.lost: set[int] = set()
        self._stats = {"bytes moved": 0}

    def hold(self, variable, value) -> None:
        self.values[variable.key] = np.array(value, copy=True)
        self.names[variable.key] = variable.name.rsplit(":", 1)[0]
        self.ctx.counter("ps load", bytes_stored=self.cluster.stored[self.ctx.name])

    def lose(self) -> None:
        self.lost.update(self.values)

    def restart(self) -> None:
        pass  # back without its variables: requests fail until they are assigned again

    def assign(self, key: int, value) -> None:
        old = self.values[key]
        value = np.asarray(value, dtype=old.dtype)
        if value.shape != old.shape:
            raise InvalidArgumentError(f"cannot assign a value of shape {value.shape} to "
                                       f"variable {self.names[key]!r} of shape {old.shape}")
        self.values[key] = value.copy()
        self.lost.discard(key)

    def join(self):
        """``server.join()``: serve until the run ends (a daemon: the run may end with it
        waiting)."""
        self.ctx.process(self._serve(), name="ps server", daemon=True)
        return None
        yield  # a generator, as every task's main

    def _serve(self):
        ctx = self.ctx
        state = self.cluster.states[ctx.name]
        while True:
            msg = yield ctx.recv(tag=None)
            if not state.up or msg.sent_at < state.failed_at or msg.tag[0] != "ps":
                continue  # sent to a task that was down, or before it failed: lost
            ctx.process(self._answer(msg, state.incarnation), name=f"{msg.tag[1]} {msg.tag[2]}",
                        daemon=True)

    def _answer(self, msg, incarnation: int):
        """Answer one request: read (the values), update (a rule applied to each variable
        and its value), scatter (to some rows of each), lookup (rows of one shard), save
        (a checkpoint's read), restore (its assignment); the ps host runs one at a time."""
        ctx = self.ctx
        _, kind, request = msg.tag
        payload = msg.payload
        keys = [int(k) for k in np.asarray(payload[0]).reshape(-1)]
        reply, status, flops, nbytes = [], None, 0, 0
        missing = [k for k in keys if k not in self.values]
        lost = [k for k in keys if k in self.lost]
        try:
            if missing:
                status = {"missing": missing}
            elif lost and kind != "restore":
                status = {"lost": lost}
            else:
                reply, flops, nbytes = self._apply(kind, keys, payload)
        except Exception as error:  # noqa: BLE001 -- the request's error, for its caller
            status = {"error": error_fields(error)}
        duration = ctx.hardware.device.compute_time_ns(flops, nbytes)
        start = ctx.occupy(HOST, duration)
        names = ", ".join(self.names.get(k, str(k)) for k in keys)
        moved = msg.nbytes + sum(np.asarray(r).nbytes for r in reply)
        ctx.span(HOST, f"{kind} {names}", "ps", start, duration, bytes=moved, client=msg.src,
                 variables=names)
        counts = self._served(keys, moved, kind not in CHECKPOINTS)
        if kind not in CHECKPOINTS:
            ctx.counter("variable reads", **counts)
        yield ctx.timeout(start + duration - ctx.now)
        state = self.cluster.states[ctx.name]
        if state.up and state.incarnation == incarnation:  # else its caller gave up
            answer = {"status": encode_header(status)} if status is not None else (
                reply if reply else Phantom(RPC_BYTES))
            ctx.send(msg.src, ("reply", request), answer)

    def _apply(self, kind: str, keys: list, payload):
        """(reply, flops, bytes) of a request that names only variables this ps holds."""
        values, reply, flops, nbytes = self.values, [], 0, 0
        if kind in ("read", "save"):
            reply = [values[k].copy() for k in keys]
            nbytes = sum(values[k].nbytes for k in keys)
        elif kind == "update":  # payload: keys, rule, values
            rule = UpdateRule(*decode_header(payload[1]))
            for k, value in zip(keys, payload[2:]):
                self.assign(k, rule.apply(values[k], value, self.cluster.rules))
                flops += 2 * values[k].size
                nbytes += 3 * values[k].nbytes
        elif kind == "scatter":  # payload: keys, rule, then (rows, values) per variable
            rule = UpdateRule(*decode_header(payload[1]))
            for i, k in enumerate(keys):
                value = np.asarray(payload[3 + 2 * i])  # repeated rows: summed, as TF adds
                rows, summed = summed_rows(np.asarray(payload[2 + 2 * i]), value)
                table = values[k].copy()
                table[rows] = rule.apply(table[rows], summed, self.cluster.rules)
                self.assign(k, table)
                flops += 2 * np.asarray(value).size
                nbytes += 3 * np.asarray(value).nbytes
        elif kind == "lookup":
            reply = [values[keys[0]][np.asarray(payload[1])]]
            nbytes = reply[0].nbytes
        elif kind == "restore":  # payload: keys, values
            for k, value in zip(keys, payload[1:]):
                self.assign(k, value)
                nbytes += values[k].nbytes
        else:
            raise InvalidArgumentError(f"{self.ctx.name}: unknown request {kind!r}")
        return reply, flops, nbytes

    def _served(self, keys, moved: int, count: bool) -> dict:
        """Count reads of each variable of this ps (those of training when ``count``) and
        the bytes it moved (trace counters)."""
        stats = self._stats
        stats["bytes moved"] += moved
        for k in keys if count else ():
            key = self.names.get(k, str(k))
            stats[key] = stats.get(key, 0) + 1
        self.ctx.counter("ps load", bytes_stored=self.cluster.stored.get(self.ctx.name, 0),
                         bytes_moved=stats["bytes moved"])
        return {k: n for k, n in stats.items() if k != "bytes moved"}


__all__ = ["InProcessCluster", "PsServer", "RPC_BYTES", "SimpleClusterResolver", "TaskState"]
