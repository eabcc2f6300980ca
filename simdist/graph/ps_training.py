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

import numpy as np

from ..errors import InvalidArgumentError
from .clients import simulate_clients
from .server import Server, stop_all_servers

FEATURES = 8


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
    clock: str = "simulated"  # realdist's runs: "wall-clock"

    @property
    def worker_steps(self) -> dict:
        return {k: len(runs) for k, runs in self.worker_runs.items()}

    def gradients_by_worker(self) -> dict:
        """{worker: (applied, dropped)}: sync from the accumulators' instants (one variable's,
        as every step sends one gradient per variable), async every run applies one."""
        if self.mode == "async":
            return {k: (len(runs), 0) for k, runs in self.worker_runs.items()}
        counts = {k: [0, 0] for k in self.worker_runs}
        events = [e for e in self.trace.instants
                  if e.name in ("gradient applied", "gradient dropped")]
        first = min((e.args["accumulator"] for e in events), default=None)
        for event in events:
            if event.args["accumulator"] == first:
                worker = int(event.args["source"].rsplit(":", 1)[1])
                counts[worker][event.name == "gradient dropped"] += 1
        return {k: tuple(v) for k, v in counts.items()}

    def describe(self) -> list[str]:
        """A few lines for the command line."""
        trained = max((t for runs in self.worker_runs.values() for t, _, _ in runs), default=0)
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
        if self.staleness:
            histogram = {s: self.staleness.count(s) for s in sorted(set(self.staleness))}
            lines.append("  staleness (updates between a gradient's read and its apply): "
                         + ", ".join(f"{s}: {n}x" for s, n in histogram.items()))
        return lines


def _check(workers, ps, steps, step_us, replicas_to_aggregate):
    for label, value in (("workers", workers), ("ps", ps), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"train_on_ps: {label}={value!r}, expected an int >= 1")
    if len(step_us) != workers or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0
            for t in step_us):
        raise InvalidArgumentError(f"train_on_ps: step_us={list(step_us)!r}, expected "
                                   f"{workers} step times in us (numbers >= 0), one per worker")
    if replicas_to_aggregate is not None and (
            isinstance(replicas_to_aggregate, bool) or not isinstance(replicas_to_aggregate, int)
            or replicas_to_aggregate < 1):
        raise InvalidArgumentError(f"train_on_ps: replicas_to_aggregate="
                                   f"{replicas_to_aggregate!r}, expected an int >= 1")


def _shard(worker: int, seed: int):
    """Worker ``worker``'s examples of one regression problem (the true weights are shared)."""
    truth = np.random.default_rng(seed).normal(size=FEATURES).astype(np.float32)
    x = np.random.default_rng(seed + 1 + worker).normal(size=(32, FEATURES)).astype(np.float32)
    return x, (x @ truth).astype(np.float32)


def train_on_ps(workers: int = 3, ps: int = 1, mode: str = "sync", steps: int = 10,
                step_us=None, replicas_to_aggregate: int | None = None,
                learning_rate: float = 0.05, seed: int = 0,
                stop_grace_period_secs: float = 1.0) -> PSTrainingRun:
    """Simulate the between-graph program; see the module docstring. ``step_us`` (one per
    worker, default 1 ms each) is each worker's compute time per step."""
    import simdist.graph as tf
    from .script_ops import timed_py_func

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
    stop_all_servers()
    cluster = tf.train.ClusterSpec({
        "ps": [f"localhost:{2222 + i}" for i in range(ps)],
        "worker": [f"localhost:{2222 + ps + i}" for i in range(workers)]})
    ps_servers = [Server(cluster, "ps", i) for i in range(ps)]
    servers = [Server(cluster, "worker", i) for i in range(workers)]

    def worker(k):
        x_data, y_data = _shard(k, seed)
        graph = tf.Graph()
        with graph.as_default():
            setter = tf.train.replica_device_setter(
                worker_device=f"/job:worker/task:{k}", cluster=cluster)
            with tf.device(setter):
                global_step = tf.train.get_or_create_global_step()
                w = tf.get_variable("w", initializer=np.zeros(FEATURES, np.float32))
                b = tf.get_variable("b", initializer=np.zeros((), np.float32))
                read_step = global_step.read_value()
                # the worker's compute: step_us[k] of simulated time before its gradient
                x = tf.constant(x_data) + 0.0 * timed_py_func([], step_us[k], name="compute")
                error = tf.reduce_sum(x * w, axis=1) + b - tf.constant(y_data)
                loss = tf.reduce_mean(tf.square(error))
                optimizer = tf.train.GradientDescentOptimizer(learning_rate)
                hooks = [tf.train.StopAtStepHook(last_step=steps)]
                if mode == "sync":
                    optimizer = tf.train.SyncReplicasOptimizer(
                        optimizer, replicas_to_aggregate=aggregate, total_num_replicas=workers)
                    hooks.append(optimizer.make_session_run_hook(k == 0))
                train_op = optimizer.minimize(loss, global_step=global_step)
                with tf.control_dependencies([train_op]):
                    step_after = global_step.read_value()
            runs, stale = [], []
            with tf.train.MonitoredTrainingSession(
                    master=servers[k].target, is_chief=k == 0, hooks=hooks,
                    stop_grace_period_secs=stop_grace_period_secs,
                    recovery_wait_secs=0.001) as sess:
                while not sess.should_stop():
                    after, seen, value = sess.run([step_after, read_step, loss])
                    if mode == "async":  # updates by others between its read and its own
                        stale.append(int(after) - 1 - int(seen))
                    runs.append((sess.last_run.end_time, int(after), float(value)))
        return runs, stale

    clients = {f"worker:{k}": (lambda k=k: worker(k)) for k in range(workers)}
    clients.update({f"ps:{i}": server.join for i, server in enumerate(ps_servers)})
    try:
        result = simulate_clients(clients)
    finally:
        stop_all_servers()
    worker_runs = {k: result.returns[f"worker:{k}"][0] for k in range(workers)}
    staleness = [s for k in range(workers) for s in result.returns[f"worker:{k}"][1]]
    final = max((step for runs in worker_runs.values() for _, step, _ in runs), default=0)
    run = PSTrainingRun(result.trace, mode, worker_runs, final, 0, 0, staleness,
                        result.end_time - result.start_time)
    counts = run.gradients_by_worker().values()
    run.applied, run.dropped = sum(a for a, _ in counts), sum(d for _, d in counts)
    return run


def plot_ps_training(run: PSTrainingRun, path=None):
    """Each worker's loss against simulated time, the global step over time, and the
    gradients: applied and dropped per worker (sync) or the staleness histogram (async).
    Saved as a PNG if ``path``."""
    from matplotlib.figure import Figure

    from ..units import time_unit

    fig = Figure(figsize=(12, 3.8), layout="constrained")
    loss_ax, step_ax, grad_ax = fig.subplots(1, 3)
    trained = max((t for runs in run.worker_runs.values() for t, _, _ in runs), default=1)
    unit, scale = time_unit(max(trained, 1))
    for k, runs in run.worker_runs.items():
        times = [t / scale for t, _, _ in runs]
        loss_ax.plot(times, [loss for _, _, loss in runs], marker=".", label=f"worker {k}")
        step_ax.step(times, [step for _, step, _ in runs], where="post", label=f"worker {k}")
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
