"""In-graph replication (TF1's guide): ONE client builds ONE graph with a tower per worker
task (``tf.device("/job:worker/task:k")``), the variables on the ps. Synchronous: the
towers' gradients are averaged on the ps and applied by one train op, one ``Session.run``
per step. Asynchronous: each tower has its own train op, run by its own thread of that one
client (TF1 programs used Python threads on one session)."""

from __future__ import annotations

import contextlib

from dataclasses import dataclass

import numpy as np

import simdist.graph as tf
from simdist.base.errors import InvalidArgumentError, check_ints
from simdist.graph._sim.clients import simulate_clients
from simdist.graph._sim.world import over_ranks
from simdist.graph.server import Server, stop_all_servers
from simdist.training.ps_spec import FEATURES, shard


@dataclass
class InGraphRun:
    """What ``in_graph_training`` gives: the trace, the client threads that called
    ``Session.run`` (one client either way), the losses of tower 0, the final global step,
    and the ops that averaged the gradients (with their devices)."""

    trace: object
    mode: str
    threads: list
    losses: list
    global_step: int
    averaging: dict


def in_graph_training(workers: int = 3, mode: str = "sync", steps: int = 5,
                      learning_rate: float = 0.05, seed: int = 0,
                      transport=None) -> InGraphRun | None:
    """In-graph replication on a simulated cluster {ps: 1, worker: workers}; see the module
    docstring. ``transport`` (an ``MPITransport``, under mpiexec): the tasks spread over its
    ranks, the one client on worker 0's; rank 0 gets the run (the same as in one process),
    the others None."""
    with over_ranks(transport) if transport is not None else contextlib.nullcontext():
        return _in_graph_training(workers, mode, steps, learning_rate, seed)


def _in_graph_training(workers, mode, steps, learning_rate, seed):
    check_ints("in_graph_training", workers=workers, steps=steps)
    if mode not in ("sync", "async"):
        raise InvalidArgumentError(f"in_graph_training: mode={mode!r}, expected 'sync' or "
                                   "'async'")
    stop_all_servers()
    cluster = tf.train.ClusterSpec({
        "ps": ["localhost:2222"], "worker": [f"localhost:{2223 + k}" for k in range(workers)]})
    ps = Server(cluster, "ps", 0)
    servers = [Server(cluster, "worker", k) for k in range(workers)]
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            global_step = tf.train.get_or_create_global_step()
            w = tf.get_variable("w", initializer=np.zeros(FEATURES, np.float32))
        optimizer = tf.train.GradientDescentOptimizer(learning_rate)
        losses, grads = [], []
        for k in range(workers):
            x_data, y_data, _ = shard(k, seed)
            with tf.device(f"/job:worker/task:{k}"), tf.name_scope(f"tower_{k}"):
                error = tf.reduce_sum(tf.constant(x_data) * w, axis=1) - tf.constant(y_data)
                losses.append(tf.reduce_mean(tf.square(error)))
                grads.append(optimizer.compute_gradients(losses[-1], [w])[0][0])
        if mode == "sync":
            with tf.device("/job:ps/task:0"), tf.name_scope("average"):
                mean = tf.add_n(grads) / float(workers)
            train_ops = [optimizer.apply_gradients([(mean, w)], global_step)]
            averaging = {mean.op.name: mean.op.device}
        else:
            train_ops = [optimizer.apply_gradients([(g, w)], global_step) for g in grads]
            averaging = {}
        init = tf.global_variables_initializer()
    session = tf.Session(servers[0].target, graph=graph)
    tower_losses: list = []

    def thread(k):  # each thread of the one client runs its own train op
        def body():
            for _ in range(steps):
                _, loss = session.run([train_ops[k], losses[k]])
                if k == 0:
                    tower_losses.append(float(loss))
            return tower_losses
        return body

    def setup():
        session.run(init)

    def read():
        return int(session.run(global_step))

    names = [f"client thread {k}" for k in range(len(train_ops))]
    tasks = {**{name: "worker:0" for name in names}, "client": "worker:0", "ps": "ps:0"}
    try:  # the client runs on worker 0, its session's target
        simulate_clients({"client": setup, "ps": ps.join}, tasks=tasks)
        result = simulate_clients({**{name: thread(k) for k, name in enumerate(names)},
                                   "ps": ps.join}, tasks=tasks)
        final = simulate_clients({"client": read, "ps": ps.join}, tasks=tasks).returns
    finally:
        session.close()
        stop_all_servers()
    if result.trace is None:  # an MPI rank other than 0
        return None
    return InGraphRun(result.trace, mode, names, result.returns[names[0]], final["client"],
                      averaging)
