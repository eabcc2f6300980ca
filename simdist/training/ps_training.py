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
  accumulator's "gradient applied" / "gradient dropped" instants in the trace).

A worker's step takes ``step_us[k]`` of simulated time (a ``timed_py_func`` before its
gradient), so stragglers are a parameter. Every worker stops once the global step reaches
``steps`` (``StopAtStepHook``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from simdist.base.errors import InvalidArgumentError, check_ints
from simdist.graph._sim.clients import simulate_clients
from simdist.graph.server import Server, stop_all_servers

FEATURES = 8


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

    @property
    def trained_ns(self) -> int:
        """When the last run of any worker ended: the training, without the shutdown."""
        return max((t for runs in self.worker_runs.values() for t, _, _ in runs), default=0)

    @property
    def worker_steps(self) -> dict:
        return {k: len(runs) for k, runs in self.worker_runs.items()}

    def gradients_by_worker(self) -> dict:
        """{worker: (applied, dropped)}: sync from the accumulators' instants (one variable's,
        as every step sends one gradient per variable), async every run applies one."""
        if self.mode == "async":
            return {k: (len(runs) - self.async_dropped.get(k, 0), self.async_dropped.get(k, 0))
                    for k, runs in self.worker_runs.items()}
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
        sends to the ps once are left out), read from the NIC lanes of the trace: a NIC's
        ingress span "worker:0 → ps:0" is a message ps:0 received, its egress span one the
        sender sent. A message cut by the window counts its bytes once and its time inside
        the window. Empty for a run with no NIC lanes (realdist's)."""
        begin, end = self.started_ns, self.trained_ns
        totals: dict = {}
        for s in self.trace.spans:
            if not s.pid.endswith(" NIC") or s.start >= end or s.end <= begin:
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
        if self.mode == "sync" and self.end_time > trained + 1_000_000:
            lines.append(f"  then the chief waited {(self.end_time - trained) / 1e9:.2f} s "
                         "(its stop_grace_period_secs) for its queue runner, which waits for "
                         "gradients that never come: TF's shutdown wait, 120 s by default")
        for k, (applied, dropped) in self.gradients_by_worker().items():
            losses = [loss for _, _, loss in self.worker_runs[k]]
            lines.append(f"  worker {k}: {len(losses)} steps, {applied} gradients applied, "
                         f"{dropped} dropped, loss {losses[0]:.3f} -> {losses[-1]:.3f}"
                         if losses else f"  worker {k}: no step")
        faults = [e for e in self.trace.instants if e.cat == "fault"]
        for event in faults:
            lines.append(f"  {event.pid}: {event.name} at {event.t / 1e6:.2f} ms")
        if self.restored_from:
            lines.append(f"  the chief restored {self.restored_from}")
        if any(self.recoveries.values()):
            lines.append("  sessions made again after a failure: " + ", ".join(
                f"worker {k}: {n}" for k, n in self.recoveries.items()))
        for k, ended in self.ended_by.items():
            if ended != "stopped":
                lines.append(f"  worker {k} {ended} (operation_timeout_in_ms): the chief had "
                             "stopped handing out tokens")
        if self.staleness:
            histogram = {s: self.staleness.count(s) for s in sorted(set(self.staleness))}
            lines.append("  staleness (updates between a gradient's read and its apply): "
                         + ", ".join(f"{s}: {n}x" for s, n in histogram.items()))
        return lines


def _check(workers, ps, steps, step_us, replicas_to_aggregate):
    check_ints("train_on_ps", workers=workers, ps=ps, steps=steps)
    if len(step_us) != workers or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0
            for t in step_us):
        raise InvalidArgumentError(f"train_on_ps: step_us={list(step_us)!r}, expected "
                                   f"{workers} step times in us (numbers >= 0), one per worker")
    if replicas_to_aggregate is not None:
        check_ints("train_on_ps", replicas_to_aggregate=replicas_to_aggregate)


NONZEROS = 8  # features per example in the sparse model


def _shard(worker: int, seed: int, features: int = FEATURES, examples: int = 32,
           model: str = "dense"):
    """Worker ``worker``'s examples of one regression problem (the true weights are
    shared): (x, y, ids). Dense: x is [examples, features] and ids None; sparse: each
    example has NONZEROS feature ``ids`` (seeded) with the values x [examples, NONZEROS]."""
    truth = np.random.default_rng(seed).normal(size=features).astype(np.float32)
    if model == "sparse":
        rng = np.random.default_rng(seed + 1000 + worker)
        ids = rng.integers(0, features, size=(examples, NONZEROS)).astype(np.int32)
        x = rng.normal(size=(examples, NONZEROS)).astype(np.float32)
        return x, (truth[ids] * x).sum(axis=1).astype(np.float32), ids
    x = (np.random.default_rng(seed + 1 + worker).normal(size=(examples, features))
         / np.sqrt(features / FEATURES)).astype(np.float32)
    return x, (x @ truth).astype(np.float32), None


def train_on_ps(workers: int = 3, ps: int = 1, mode: str = "sync", steps: int = 10,
                step_us=None, replicas_to_aggregate: int | None = None,
                learning_rate: float = 0.05, seed: int = 0,
                stop_grace_period_secs: float = 1.0, stall_us: float = 0.0,
                stall_probability: float = 0.0, max_staleness: int | None = None,
                staleness_weighting: bool = False, warmup_steps: int = 0,
                worker_timeout_ms: int = 1000, failures=(), checkpoint_dir=None,
                save_checkpoint_steps: int | None = None, features: int = FEATURES,
                examples: int = 32, gradient_dtype: str = "float32",
                model: str = "dense") -> PSTrainingRun:
    """Simulate the between-graph program; see the module docstring. ``step_us`` (one per
    worker, default 1 ms each) is each worker's compute time per step; with
    ``stall_probability`` a step takes ``stall_us`` instead (seeded per worker: random
    stragglers).

    The remedies for stale gradients, asynchronous mode only: ``max_staleness`` drops a
    gradient staler than that, ``staleness_weighting`` scales it by 1 / (1 + staleness),
    ``warmup_steps`` lets worker 0 train alone until the global step reaches it. With the
    first two a worker computes its gradient in one run, reads the global step, decides,
    and applies the (scaled) gradient in a second run, as a TF1 program has to.

    A non-chief worker runs with ``operation_timeout_in_ms=worker_timeout_ms``: a backup
    worker left waiting for a token after the chief stopped gives up (``ended_by``).

    ``failures``: [(task, at_us, down_us)], e.g. ("ps:0", 5000, 2000): the task fails at
    that simulated time and restarts ``down_us`` later; every MonitoredTrainingSession
    recovers as TF's does (a lost ps: the chief restores the latest checkpoint of
    ``checkpoint_dir``, saved every ``save_checkpoint_steps``, or starts over without one)."""
    import simdist.graph as tf
    from simdist.graph.script_ops import timed_py_func

    if mode not in ("sync", "async"):
        raise InvalidArgumentError(f"train_on_ps: mode={mode!r}, expected 'sync' or 'async'")
    step_us = list(step_us) if step_us is not None else [1000.0] * (
        workers if isinstance(workers, int) else 0)
    _check(workers, ps, steps, step_us, replicas_to_aggregate)
    aggregate = replicas_to_aggregate or workers
    if mode == "sync" and aggregate > workers:
        raise InvalidArgumentError(
            f"train_on_ps: replicas_to_aggregate={aggregate} is more than the {workers} "
            "workers: TF (and simdist's SyncReplicasOptimizer) would accept it and fill each "
            "step with several gradients of one worker, which is not what the program studies")
    if mode == "sync" and (max_staleness is not None or staleness_weighting or warmup_steps):
        raise InvalidArgumentError("train_on_ps: max_staleness, staleness_weighting and "
                                   "warmup_steps are remedies for asynchronous training: "
                                   "use them with mode='async'")
    if max_staleness is not None and (isinstance(max_staleness, bool) or not isinstance(
            max_staleness, int) or max_staleness < 0):
        raise InvalidArgumentError(f"train_on_ps: max_staleness={max_staleness!r}, expected "
                                   "an int >= 0 or None")
    two_phase = max_staleness is not None or staleness_weighting
    check_ints("train_on_ps", features=features, examples=examples)
    if gradient_dtype not in ("float32", "float16"):
        raise InvalidArgumentError(f"train_on_ps: gradient_dtype={gradient_dtype!r}, expected "
                                   "'float32' or 'float16'")
    if model not in ("dense", "sparse"):
        raise InvalidArgumentError(f"train_on_ps: model={model!r}, expected 'dense' or "
                                   "'sparse'")
    if model == "sparse" and (two_phase or ps > 1 or gradient_dtype != "float32"):
        raise InvalidArgumentError(
            "train_on_ps: the sparse model is built for one ps with float32 gradients and "
            "no staleness remedy (sharding it would need a partitioned embedding, which "
            "simdist does not have yet)")
    if gradient_dtype == "float16" and two_phase:
        raise InvalidArgumentError("train_on_ps: float16 gradients with max_staleness or "
                                   "staleness_weighting are not built: choose one")
    stop_all_servers()
    cluster = tf.train.ClusterSpec({
        "ps": [f"localhost:{2222 + i}" for i in range(ps)],
        "worker": [f"localhost:{2222 + ps + i}" for i in range(workers)]})
    ps_servers = [Server(cluster, "ps", i) for i in range(ps)]
    servers = [Server(cluster, "worker", i) for i in range(workers)]

    # per worker: (runs, staleness, async drops), its MonitoredSessions (one more after
    # each restart), how it ended, when its first training run began
    record: dict = {}
    sessions: dict = {}
    ended_by: dict = {}
    first_run: dict = {}

    def worker(k):
        x_data, y_data, ids = _shard(k, seed, features, examples, model)
        graph = tf.Graph()
        with graph.as_default():
            # with several ps tasks the weights are cut in one part per ps, placed by size
            strategy = tf.contrib.training.GreedyLoadBalancingStrategy(
                ps, tf.contrib.training.byte_size_load_fn) if ps > 1 else None
            setter = tf.train.replica_device_setter(
                worker_device=f"/job:worker/task:{k}", cluster=cluster, ps_strategy=strategy)
            with tf.device(setter):
                global_step = tf.train.get_or_create_global_step()
                columns = np.array_split(np.arange(features), ps)
                parts = [tf.get_variable("w" if ps == 1 else f"w_part_{i}",
                                         initializer=np.zeros(len(c), np.float32))
                         for i, c in enumerate(columns)]
                b = tf.get_variable("b", initializer=np.zeros((), np.float32))
                variables = parts + [b]
                read_step = global_step.read_value()
                # the worker's compute: step_us[k] of simulated time before its gradient
                compute = timed_py_func([], step_us[k], name="compute", stall_us=stall_us,
                                        stall_probability=stall_probability, seed=seed + k)
                predicted = b - tf.constant(y_data) + 0.0 * compute
                if model == "sparse":  # each example uses NONZEROS of the weights: a lookup
                    rows = tf.nn.embedding_lookup(parts[0], tf.constant(ids))
                    predicted = predicted + tf.reduce_sum(rows * tf.constant(x_data), axis=1)
                for part, c in zip(parts if model == "dense" else [], columns):
                    predicted = predicted + tf.reduce_sum(tf.constant(x_data[:, c]) * part,
                                                          axis=1)
                loss = tf.reduce_mean(tf.square(predicted))
                optimizer = tf.train.GradientDescentOptimizer(learning_rate)
                hooks = [tf.train.StopAtStepHook(last_step=steps)]
                if mode == "sync":
                    optimizer = tf.train.SyncReplicasOptimizer(
                        optimizer, replicas_to_aggregate=aggregate, total_num_replicas=workers)
                    hooks.append(optimizer.make_session_run_hook(k == 0))
                grads = [g for g, _ in optimizer.compute_gradients(loss, variables)]
                if two_phase:  # the gradient in one run, fed to the update in another
                    fed = [tf.placeholder(tf.float32, v.shape) for v in variables]
                    train_op = optimizer.apply_gradients(list(zip(fed, variables)),
                                                         global_step)
                else:
                    if gradient_dtype == "float16":  # half the bytes cross the network
                        halves = [tf.cast(g, tf.float16) for g in grads]
                        grads = []
                        for half, v in zip(halves, variables):
                            with tf.device(v.device):
                                grads.append(tf.cast(half, tf.float32))
                    train_op = optimizer.apply_gradients(list(zip(grads, variables)),
                                                         global_step)
                with tf.control_dependencies([train_op]):
                    step_after = global_step.read_value()
            pause = timed_py_func([], 1000, name="wait_for_warmup")
            # a restarted worker (after a failure) goes on with the same records
            runs, stale, dropped = (record.setdefault(k, ([], [], []))[i] for i in range(3))
            # a backup worker can be left waiting for a token once the chief has stopped
            # (on TF too): a non-chief gives up after operation_timeout_in_ms
            config = tf.ConfigProto(operation_timeout_in_ms=0 if k == 0 else worker_timeout_ms)
            try:
                with tf.train.MonitoredTrainingSession(
                        master=servers[k].target, is_chief=k == 0, hooks=hooks, config=config,
                        stop_grace_period_secs=stop_grace_period_secs,
                        recovery_wait_secs=0.001, checkpoint_dir=checkpoint_dir,
                        save_checkpoint_steps=save_checkpoint_steps) as sess:
                    sessions.setdefault(k, []).append(sess)
                    while k > 0 and int(sess.run(read_step)) < min(warmup_steps, steps):
                        sess.run(pause)  # poll every ms until worker 0 has warmed up
                    while not sess.should_stop():
                        if two_phase:
                            values, seen, value = sess.run([grads, read_step, loss])
                            first_run.setdefault(k, sess.last_run.start_time)
                            staleness = int(sess.run(read_step)) - int(seen)
                            if max_staleness is not None and staleness > max_staleness:
                                dropped.append(staleness)
                                runs.append((sess.last_run.end_time, int(seen) + staleness,
                                             float(value)))
                                continue
                            scale = np.float32(1 / (1 + staleness) if staleness_weighting
                                               else 1)
                            after = sess.run(step_after, {f: v * scale
                                                          for f, v in zip(fed, values)})
                        else:
                            after, seen, value = sess.run([step_after, read_step, loss])
                            first_run.setdefault(k, sess.last_run.start_time)
                        if mode == "async":  # updates by others between its read and its own
                            stale.append(int(after) - 1 - int(seen))
                        runs.append((sess.last_run.end_time, int(after), float(value)))
            except tf.errors.DeadlineExceededError:
                ended_by[k] = "timed out waiting for a token"
                return
        ended_by[k] = "stopped"

    clients = {f"worker:{k}": (lambda k=k: worker(k)) for k in range(workers)}
    clients.update({f"ps:{i}": server.join for i, server in enumerate(ps_servers)})
    try:
        if failures:
            from simdist.graph.server import cluster_of_running_servers
            from simdist.graph._sim.world import world_of

            _, runtimes = cluster_of_running_servers()
            world = world_of(runtimes, next(iter(runtimes.values())).machine.hardware)
            for task, at_us, down_us in failures:
                restart = None
                if task.startswith("worker:") and task[7:].isdigit():
                    restart = lambda k=int(task[7:]): worker(k)  # noqa: E731
                world.schedule_failure(task, world.env.now + int(at_us * 1000),
                                       None if down_us is None else int(down_us * 1000),
                                       restart)
        result = simulate_clients(clients)
    finally:
        stop_all_servers()
    worker_runs = {k: record[k][0] for k in range(workers)}
    staleness = [s for k in range(workers) for s in record[k][1]]
    final = max((step for runs in worker_runs.values() for _, step, _ in runs), default=0)
    run = PSTrainingRun(result.trace, mode, worker_runs, final, 0, 0, staleness,
                        result.end_time - result.start_time,
                        {k: len(record[k][2]) for k in range(workers)},
                        {k: ended_by.get(k, "killed") for k in range(workers)})
    run.recoveries = {k: sum(sess.recoveries for sess in sessions.get(k, []))
                      + len(sessions.get(k, [])) - 1 for k in range(workers)}
    run.started_ns = min(first_run.values(), default=0)
    run.restored_from = next((sess.restored_from for sess in reversed(sessions.get(0, []))
                              if sess.restored_from), None)
    counts = run.gradients_by_worker().values()
    run.applied, run.dropped = sum(a for a, _ in counts), sum(d for _, d in counts)
    return run


def plot_ps_training(run: PSTrainingRun, path=None):
    """Each worker's loss against simulated time, the global step over time, and the
    gradients: applied and dropped per worker (sync) or the staleness histogram (async).
    Saved as a PNG if ``path``."""
    from matplotlib.figure import Figure

    from simdist.hardware.units import time_unit

    fig = Figure(figsize=(12, 3.8), layout="constrained")
    loss_ax, step_ax, grad_ax = fig.subplots(1, 3)
    unit, scale = time_unit(max(run.trained_ns, 1))
    for k, runs in run.worker_runs.items():
        times = [t / scale for t, _, _ in runs]
        loss_ax.plot(times, [loss for _, _, loss in runs], marker=".", label=f"worker {k}")
        step_ax.step(times, [step for _, step, _ in runs], where="post", label=f"worker {k}")
    for event in (e for e in run.trace.instants if e.cat == "fault"):
        for ax in (loss_ax, step_ax):
            ax.axvline(event.t / scale, color="tab:red" if "failed" in event.name else
                       "tab:gray", linestyle="--", linewidth=1)
        step_ax.annotate(f"{event.pid} {event.name.split()[-1]}", (event.t / scale, 0),
                         rotation=90, fontsize=7, va="bottom", ha="right")
    loss_ax.set(title="loss seen by each worker", xlabel=f"simulated time ({unit})",
                ylabel="loss (its own shard)")
    step_ax.set(title="global step after each run", xlabel=f"simulated time ({unit})",
                ylabel="global step")
    for ax in (loss_ax, step_ax):
        ax.grid(color="0.9", linewidth=0.6)
        ax.legend(fontsize=8)
    if run.mode == "async":
        values = sorted(set(run.staleness))
        grad_ax.bar(values, [run.staleness.count(v) for v in values], color="tab:orange")
        grad_ax.set(title="staleness of applied gradients", xlabel="updates in between",
                    ylabel="gradients")
    else:
        counts = run.gradients_by_worker()
        workers = list(counts)
        grad_ax.bar(workers, [counts[k][0] for k in workers], label="applied",
                    color="tab:green")
        grad_ax.bar(workers, [counts[k][1] for k in workers],
                    bottom=[counts[k][0] for k in workers], label="dropped (stale)",
                    color="tab:red")
        grad_ax.set(title="gradients per worker", xlabel="worker", ylabel="gradients",
                    xticks=workers)
        grad_ax.legend(fontsize=8)
    fig.suptitle(f"between-graph {run.mode} training on parameter servers")
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def backup_worker_sweep(workers: int = 5, backups=(0, 1, 2), steps: int = 20,
                        **options) -> list[dict]:
    """Synchronous training with ``b`` of ``workers`` as backup workers (each step takes the
    first ``workers - b`` gradients), for each ``b``: [{"backups", "us_per_step", "applied",
    "dropped"}]. With random stragglers (``stall_probability``) backups shorten the steps."""
    rows = []
    for b in backups:
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < workers:
            raise InvalidArgumentError(f"backup_worker_sweep: backups {b!r}, expected ints "
                                       f"0..{workers - 1}")
        run = train_on_ps(workers=workers, mode="sync", steps=steps,
                          replicas_to_aggregate=workers - b, **options)
        rows.append({"backups": b, "us_per_step": run.trained_ns / 1000 / run.global_step,
                     "applied": run.applied, "dropped": run.dropped})
    return rows


def ps_bandwidth_sweep(configs=({"workers": 1}, {"workers": 2}, {"workers": 4},
                                {"workers": 4, "ps": 2}, {"workers": 4, "ps": 4},
                                {"workers": 4, "gradient_dtype": "float16"}),
                       features: int = 1_000_000, steps: int = 8, **options) -> list[dict]:
    """Asynchronous training of a large model (``features`` float32 weights: 4 MB at one
    million) in each configuration: [{**config, "updates_per_s", "ps_received_bytes",
    "global_step"}]. As
    workers are added the ps NIC saturates (every update pushes a gradient and pulls the
    weights through it); more ps shards share the load; float16 gradients halve the push."""
    rows = []
    for config in configs:
        run = train_on_ps(mode="async", steps=steps, features=features, examples=2,
                          **{**options, **config})
        received = sum(s.args.get("bytes", 0) for s in run.trace.spans  # the ops' Recvs
                       if s.pid.startswith("ps:") and s.name.startswith("Recv "))
        rows.append({**config, "updates_per_s": run.global_step / (run.trained_ns / 1e9),
                     "ps_received_bytes": received, "global_step": run.global_step})
    return rows
