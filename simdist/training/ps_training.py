"""Between-graph training on parameter servers, synchronous or asynchronous (TF1's way).

``train_on_ps`` runs the program TF1's distributed guide describes, unchanged, as concurrent
clients of one simulated cluster {ps: P, worker: N}: every worker builds its own graph with
``replica_device_setter`` (the variables on the ps tasks, the compute on itself) and trains
a linear model on its own shard of a synthetic regression problem; the ps tasks sit in
``server.join()``.

- ``mode="async"``: each worker reads the variables, computes its gradient and applies it
  at once (``GradientDescentOptimizer.minimize``); the staleness of a gradient is how many
  updates other workers applied between its read of the global step and its own update;
- ``mode="sync"``: the same optimizer wrapped in ``SyncReplicasOptimizer(opt,
  replicas_to_aggregate, total_num_replicas=N)`` with ``MonitoredTrainingSession`` and the
  optimizer's hook; with N above ``replicas_to_aggregate`` the extra workers are backup
  workers, and every gradient that arrives after its step was taken is dropped (each
  accumulator's "gradient applied" / "gradient dropped" instants in the trace; the counts
  come from the accumulators' own tally, whole however much of the trace its cap keeps).
  A chief whose last run waits for a token no step will bring (the others stopped or gave
  up) hangs on TF; simdist ends the run there and says so (``CHIEF_HANGS``).

A worker's step takes ``step_us[k]`` of simulated time (a ``timed_py_func`` before its
gradient; stragglers stretch it). Every worker stops at global step ``steps``
(``StopAtStepHook``). Its options are one record (``ps_spec.PSTrainingSpec``), a worker's
graph is ``ps_graph.build_worker_graph``, the figure and the sweeps are in ``ps_sweeps``.
"""

from __future__ import annotations

import contextlib
import inspect
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

import simdist.graph as tf
from simdist.graph._sim.clients import ClientsResult, simulate_clients
from simdist.graph._sim.world import over_ranks, world_of
from simdist.graph.accumulator import gradient_tally
from simdist.graph.server import Server, cluster_of_running_servers, stop_all_servers
from simdist.sim.core import SimulationDeadlock
from simdist.training.ps_graph import WorkerGraph, build_worker_graph
from simdist.training.ps_spec import PSTrainingSpec

#: how the chief ended when its last run waited for a token no step would bring (describe())
CHIEF_HANGS = "waits forever for a token"
#: how a non-chief ended when its wait for a token ran past its operation_timeout_in_ms
GAVE_UP = "timed out waiting for a token"


class NicLoad(NamedTuple):
    """What one task's network card carried while the workers trained (``nic_loads``):
    the bytes it received and sent across the network, and the share of the training time
    each direction was busy putting them on the wire (bytes / link bandwidth); ``queued_ns``
    is how long, in all, arriving messages waited behind others at its ingress."""

    received_bytes: int
    sent_bytes: int
    busy_in: float
    busy_out: float
    queued_ns: int

    @property
    def busy(self) -> float:
        """The busier direction's share: the NIC's load."""
        return max(self.busy_in, self.busy_out)


@dataclass
class PSTrainingRun:
    """What ``train_on_ps`` gives: the trace; per worker the steps it ran and, for each
    run, (end time ns, global step after it, loss); the final global step; the accumulators'
    applied and dropped gradient counts (sync) and the staleness of every applied gradient
    (async: updates in between; sync: 0, since stale ones are dropped)."""

    trace: object
    mode: str
    worker_runs: dict
    global_step: int
    applied: int
    dropped: int
    staleness: list = field(default_factory=list)
    end_time: int = 0
    async_dropped: dict = field(default_factory=dict)  # per worker: too stale (max_staleness)
    ended_by: dict = field(default_factory=dict)  # per worker: "stopped" or why it gave up
    recoveries: dict = field(default_factory=dict)  # per worker: sessions remade or restarts
    restored_from: str | None = None  # the last checkpoint the chief restored
    clock: str = "simulated"  # realdist's runs: "wall-clock"
    started_ns: int = 0  # when the first training run began (the initialization is over)
    gradient_counts: dict | None = None  # {worker: (applied, dropped)}, else from the trace
    failures_never_happened: list = field(default_factory=list)  # after the workers ended
    stragglers: str = ""  # how each step's compute time was drawn, when it was

    @property
    def trained_ns(self) -> int:
        """When the last run of any worker ended: the training, without the shutdown."""
        return max((t for runs in self.worker_runs.values() for t, _, _ in runs), default=0)

    @property
    def worker_steps(self) -> dict:
        return {k: len(runs) for k, runs in self.worker_runs.items()}

    def gradients_by_worker(self) -> dict:
        """{worker: (applied, dropped)}: sync from the accumulators' tally
        (``gradient_counts``; a run without one, realdist's, from the accumulators' instants
        in its trace), one variable's, as every step sends one gradient per variable; async
        every run applies one."""
        if self.mode == "async":
            return {k: (len(runs) - self.async_dropped.get(k, 0), self.async_dropped.get(k, 0))
                    for k, runs in self.worker_runs.items()}
        if self.gradient_counts is not None:
            return dict(self.gradient_counts)
        counts = {k: [0, 0] for k in self.worker_runs}
        events = [e for e in self.trace.instants
                  if e.name in ("gradient applied", "gradient dropped")]
        first = min((e.args["accumulator"] for e in events), default=None)
        for event in events:
            if event.args["accumulator"] == first:
                worker = int(event.args["source"].rsplit(":", 1)[1])
                counts[worker][event.name == "gradient dropped"] += 1
        return {k: tuple(v) for k, v in counts.items()}

    def nic_loads(self) -> dict[str, NicLoad]:
        """{task: NicLoad} for every task whose messages crossed the network during the
        training steps (from ``started_ns`` to ``trained_ns``: the initial values the chief
        sends to the ps once are left out, as are the partition graphs each session
        registers once, TF's RegisterGraph), read from the NIC lanes of the trace: a NIC's
        ingress span "worker:0 → ps:0" is a message ps:0 received, its egress span one the
        sender sent. A message cut by the window counts its bytes once and its time inside
        the window. Empty for a run with no NIC lanes (realdist's)."""
        begin, end = self.started_ns, self.trained_ns
        totals: dict = {}
        for s in self.trace.spans:
            if not s.pid.endswith(" NIC") or s.start >= end or s.end <= begin or \
                    str(s.args.get("tag", "")).startswith("RegisterGraph"):
                continue
            src, dst = s.name.split(" → ")
            incoming = s.lane == "ingress"
            row = totals.setdefault(dst if incoming else src, [0, 0, 0, 0, 0])
            row[0 if incoming else 1] += s.args["bytes"]
            row[2 if incoming else 3] += min(s.end, end) - max(s.start, begin)
            row[4] += s.args.get("queued_ns", 0) if incoming else 0
        window = max(end - begin, 1)
        return {task: NicLoad(r[0], r[1], r[2] / window, r[3] / window, r[4])
                for task, r in sorted(totals.items())}

    def describe(self) -> list[str]:
        """A few lines for the command line."""
        trained = self.trained_ns
        lines = [f"{self.mode} training: global step {self.global_step} after "
                 f"{trained / 1e6:.2f} ms of {self.clock} time"]
        if self.ended_by.get(0) == CHIEF_HANGS:
            lines.append(
                "  then the chief (worker 0) waits forever for a token: the other workers took "
                f"the last ones and stopped (or gave up) at global step {self.global_step}, "
                "so no step "
                "puts tokens in sync_token_q again; TF's chief hangs here too (its "
                "operation_timeout_in_ms is 0): simdist ends the run")
        elif self.mode == "sync" and self.end_time > trained + 1_000_000:
            lines.append(f"  then the chief waited {(self.end_time - trained) / 1e9:.2f} s "
                         "(its stop_grace_period_secs) for its queue runner, which waits for "
                         "gradients that never come: TF's shutdown wait, 120 s by default; "
                         "closing the session then cancels that thread's run"
                         + (" (the 'Exception in thread' line on stderr, as TF's thread "
                            "prints it)" if self.clock == "simulated" else ""))
        lines += [f"  each step's time drawn from {self.stragglers}"] if self.stragglers else []
        for k, (applied, dropped) in self.gradients_by_worker().items():
            losses = [loss for _, _, loss in self.worker_runs[k]]
            lines.append(f"  worker {k}: {len(losses)} steps, {applied} gradients applied, "
                         f"{dropped} dropped, loss {losses[0]:.3f} -> {losses[-1]:.3f}"
                         if losses else f"  worker {k}: no step")
        faults = [e for e in self.trace.instants if e.cat == "fault"]
        for event in faults:
            lines.append(f"  {event.pid}: {event.name} at {event.t / 1e6:.2f} ms")
        for failure in self.failures_never_happened:
            lines.append(f"  failure {failure} never happened: every worker had ended")
        if self.restored_from:
            lines.append(f"  the chief restored {self.restored_from}")
        if any(self.recoveries.values()):
            lines.append("  sessions made again after a failure: " + ", ".join(
                f"worker {k}: {n}" for k, n in self.recoveries.items()))
        for k, ended in self.ended_by.items():
            if ended not in ("stopped", CHIEF_HANGS):
                lines.append(f"  worker {k} {ended} (operation_timeout_in_ms): the chief had "
                             "stopped handing out tokens")
        cut = self.trace.metadata.get("truncated")
        if cut:
            lines.append(f"  the trace keeps the first {cut['before_ns'] / 1e6:.2f} ms of the "
                         f"run only: {', '.join(cut.get('full', ['a task']))} filled its share "
                         f"of the {cut['trace_max_mb']:g} MB trace cap; the counts above are "
                         "whole (the accumulators' own tally)")
        if self.staleness:
            histogram = {s: self.staleness.count(s) for s in sorted(set(self.staleness))}
            lines.append("  staleness (updates between a gradient's read and its apply): "
                         + ", ".join(f"{s}: {n}x" for s, n in histogram.items()))
        return lines



def train_on_ps(**options) -> PSTrainingRun:
    """Simulate the between-graph program (see the module docstring) with ``options``, the
    fields of ``PSTrainingSpec`` (workers, ps, mode, steps, step_us, ...), e.g.
    ``train_on_ps(workers=3, mode="sync", failures=["ps:0@8ms+2ms"])``.

    ``failures``: the task fails at that simulated time and restarts that long after;
    every MonitoredTrainingSession recovers as TF's does (a lost ps: the chief restores the
    latest checkpoint of ``checkpoint_dir``, saved every ``save_checkpoint_steps``, or
    starts over without one).

    ``limits`` (``RunLimits``; by default ``simdist ps``'s: 10 million events, a simulated
    day) ends a run that goes on too long with a ``RunLimitError``; sizes that promise more
    events are refused before it starts."""
    return run_ps_training(PSTrainingSpec(**options))


train_on_ps.__signature__ = inspect.signature(PSTrainingSpec).replace(
    return_annotation=PSTrainingRun)


@dataclass
class _WorkerRecord:
    """What one worker leaves behind (a restarted worker goes on with the same record):
    its runs (end time ns, global step after, loss), the staleness of its async updates,
    the staleness of the gradients it dropped, its MonitoredSessions (one more after each
    restart), how it ended and when its first training run began."""

    runs: list = field(default_factory=list)
    staleness: list = field(default_factory=list)
    dropped: list = field(default_factory=list)
    sessions: list = field(default_factory=list)
    ended_by: str = "killed"
    first_run: int | None = None
    recoveries: int = 0  # sessions made again (summarize)
    restored_from: str | None = None  # the last checkpoint a session restored (summarize)

    def summarize(self) -> _WorkerRecord:
        """The record without its sessions (what crosses MPI ranks): how often they
        recovered and the last checkpoint one restored."""
        self.recoveries = sum(s.recoveries for s in self.sessions) + len(self.sessions) - 1
        self.restored_from = next((s.restored_from for s in reversed(self.sessions)
                                   if s.restored_from), None)
        self.sessions = []
        return self


def run_ps_training(spec: PSTrainingSpec, transport=None) -> PSTrainingRun | None:
    """Run ``spec``'s program on one simulated cluster {ps, worker}: each worker's client
    (``run_worker``) and each ps's ``server.join()`` at once, with the spec's failures.
    With ``transport`` (an ``MPITransport``) the tasks are spread over its ranks, each
    running its own tasks' clients; rank 0 gets the run (the same as in one process), the
    others None."""
    with over_ranks(transport) if transport is not None else contextlib.nullcontext():
        return _run_ps_training(spec)


def _run_ps_training(spec: PSTrainingSpec) -> PSTrainingRun | None:
    stop_all_servers()
    cluster = tf.train.ClusterSpec({
        "ps": [f"localhost:{2222 + i}" for i in range(spec.ps)],
        "worker": [f"localhost:{2222 + spec.ps + i}" for i in range(spec.workers)]})
    ps_servers = [Server(cluster, "ps", i) for i in range(spec.ps)]
    servers = [Server(cluster, "worker", i) for i in range(spec.workers)]
    records = {k: _WorkerRecord() for k in range(spec.workers)}
    waits, ended, never = [], set(), []

    def worker(k):
        run_worker(spec, k, cluster, servers[k].target, records[k])
        ended.add(k)
        if len(ended) == spec.workers:  # training is over: later failures never happen
            never.extend(_cancel_failures(waits))

    clients = {f"worker:{k}": (lambda k=k: worker(k)) for k in range(spec.workers)}
    clients.update({f"ps:{i}": server.join for i, server in enumerate(ps_servers)})
    world = _world()
    world.simulation.limits = spec.limits  # a new world: its events and time start at 0
    marks, start = world.stream_marks(), world.env.now
    tally = gradient_tally(world.env)
    before = tally.copy()
    try:
        if spec.failures:
            waits.extend(_schedule_failures(spec.failures, worker))
        try:
            simulate_clients(clients, tasks={name: name for name in clients})
            end = world.end_time()
        except SimulationDeadlock as deadlock:
            ended = {k: r.ended_by for k, r in _everyone(world, records).items()}
            if not _chief_hangs(spec, deadlock, ended):
                raise
            records[0].ended_by, end = CHIEF_HANGS, deadlock.now
        result = ClientsResult({}, world.trace_since(marks), start, end)
        records = _everyone(world, {k: r.summarize() for k, r in records.items()})
        tally = _summed(world, tally - before)
    finally:
        stop_all_servers()
    if result.trace is None:  # a rank other than 0
        return None
    run = _training_run(spec, result, records, tally)
    run.failures_never_happened = [str(f) for f in never]
    return run


def _everyone(world, records: dict) -> dict:
    """Every worker's record, from the rank that runs it (over MPI ranks; else as is)."""
    if not world.over_ranks:
        return records
    mine = {k: r for k, r in records.items() if world.is_local(f"worker:{k}")}
    return {k: r for part in world.transport.allgather(mine) for k, r in part.items()}


def _summed(world, tally):
    """The accumulators' tally of every rank (they count where their ps runs)."""
    if not world.over_ranks:
        return tally
    return sum(world.transport.allgather(tally), Counter())


def _world():
    """The world of the running servers' cluster (where the workers train)."""
    _, runtimes = cluster_of_running_servers()
    return world_of(runtimes, next(iter(runtimes.values())).machine.hardware)


def _chief_hangs(spec: PSTrainingSpec, deadlock: SimulationDeadlock, ended: dict) -> bool:
    """Is ``deadlock`` the chief's last run waiting for a token no step will bring, every
    other worker having stopped (TF's chief hangs there too: it has no operation timeout)?"""
    waits = dict(deadlock.blocked)
    clients = {who.split(" ", 1)[1] for who in waits if who.startswith("client ")}
    return (spec.mode == "sync" and clients == {"worker:0"}
            and "get 1 from sync_token_q" in waits.values()
            and all(how in ("stopped", GAVE_UP) for k, how in ended.items() if k))


def run_worker(spec: PSTrainingSpec, k: int, cluster, target: str,
               record: _WorkerRecord) -> None:
    """Worker ``k``'s client: it builds its graph and trains in a MonitoredTrainingSession
    until StopAtStepHook stops it. A backup worker can be left waiting for a token once
    the chief has stopped (on TF too): a non-chief gives up after
    ``operation_timeout_in_ms``."""
    g = build_worker_graph(spec, k, cluster)
    with g.graph.as_default():
        config = tf.ConfigProto(operation_timeout_in_ms=0 if k == 0 else
                                spec.worker_timeout_ms)
        try:
            with tf.train.MonitoredTrainingSession(
                    master=target, is_chief=k == 0, hooks=g.hooks, config=config,
                    stop_grace_period_secs=spec.stop_grace_period_secs,
                    recovery_wait_secs=0.001, checkpoint_dir=spec.checkpoint_dir,
                    save_checkpoint_steps=spec.save_checkpoint_steps) as sess:
                record.sessions.append(sess)
                while k > 0 and int(sess.run(g.read_step)) < min(spec.warmup_steps,
                                                                 spec.steps):
                    sess.run(g.pause)  # poll every ms until worker 0 has warmed up
                while not sess.should_stop():
                    _train_step(spec, sess, g, record)
        except tf.errors.DeadlineExceededError:
            record.ended_by = GAVE_UP
            return
    record.ended_by = "stopped"


def _train_step(spec: PSTrainingSpec, sess, g: WorkerGraph, record: _WorkerRecord) -> None:
    """One training step of a worker: one run, or with a staleness remedy two (the
    gradient and the global step, then the update with the gradient fed back, scaled by
    1 / (1 + staleness) or dropped as too stale)."""
    if spec.two_phase:
        values, seen, value = sess.run([g.grads, g.read_step, g.loss])
        _first_run(record, sess)
        staleness = int(sess.run(g.read_step)) - int(seen)
        if spec.max_staleness is not None and staleness > spec.max_staleness:
            record.dropped.append(staleness)
            record.runs.append((sess.last_run.end_time, int(seen) + staleness, float(value)))
            return
        scale = np.float32(1 / (1 + staleness) if spec.staleness_weighting else 1)
        after = sess.run(g.step_after, {f: v * scale for f, v in zip(g.fed, values)})
    else:
        after, seen, value = sess.run([g.step_after, g.read_step, g.loss])
        _first_run(record, sess)
    if spec.mode == "async":  # updates by others between its read and its own
        record.staleness.append(int(after) - 1 - int(seen))
    record.runs.append((sess.last_run.end_time, int(after), float(value)))


def _first_run(record: _WorkerRecord, sess) -> None:
    if record.first_run is None:
        record.first_run = sess.last_run.start_time


def _schedule_failures(failures, worker) -> list:
    """Each failure on the simulated cluster of the running servers; a failed worker
    restarts by running its client ``worker(k)`` again. Returns (failure, its time, the
    process that waits for it) of each."""
    world = _world()
    waits = []
    for f in failures:
        job, _, index = f.task.partition(":")
        restart = (lambda k=int(index): worker(k)) if job == "worker" else None
        at = world.env.now + f.at_ns
        world.schedule_failure(f.task, at, f.down_ns, restart)
        process = next(reversed(world.env._live))  # the one it just started
        waits.append((f, at, process if process.name == f"failure of {f.task}" else None))
    return waits


def _cancel_failures(waits) -> list:
    """The failures of ``waits`` that have not happened yet, after every worker has ended
    (TF's job is over): they never will, and do not run simulated time on to theirs, nor
    fail a task's abandoned threads (in one process: across ranks the others cannot know)."""
    world = _world()
    never = [(f, process) for f, at, process in waits if world.env.now < at]
    if not world.over_ranks:
        for _, process in never:
            if process is not None and process.target is not None:
                process.target.cancel()  # its timeout until the failure
    return [f for f, _ in never]


def _training_run(spec: PSTrainingSpec, result, records: dict, tally) -> PSTrainingRun:
    """The run's PSTrainingRun from the simulation's result, the workers' records and the
    accumulators' ``tally`` of the run (``gradient_tally``)."""
    worker_runs = {k: r.runs for k, r in records.items()}
    staleness = [s for r in records.values() for s in r.staleness]
    final = max((step for runs in worker_runs.values() for _, step, _ in runs), default=0)
    run = PSTrainingRun(result.trace, spec.mode, worker_runs, final, 0, 0, staleness,
                        result.end_time - result.start_time,
                        {k: len(r.dropped) for k, r in records.items()},
                        {k: r.ended_by for k, r in records.items()})
    run.recoveries = {k: r.recoveries for k, r in records.items()}
    run.started_ns = min((r.first_run for r in records.values() if r.first_run is not None),
                         default=0)
    run.restored_from = records[0].restored_from
    if spec.stragglers.active:
        run.stragglers = spec.stragglers.describe()
    if spec.mode == "sync":
        run.gradient_counts = _gradient_counts(tally, spec.workers)
    counts = run.gradients_by_worker().values()
    run.applied, run.dropped = sum(a for a, _ in counts), sum(d for _, d in counts)
    return run


def _gradient_counts(tally, workers: int) -> dict:
    """{worker: (applied, dropped)} from the accumulators' tally of one run: one
    accumulator's (the first by name), as every step sends one gradient per variable."""
    counts = {k: [0, 0] for k in range(workers)}
    first = min((name for name, _, _ in tally), default=None)
    for (name, sender, added), n in tally.items():
        if name == first:
            counts[int(sender.rsplit(":", 1)[1])][not added] += n
    return {k: tuple(v) for k, v in counts.items()}
