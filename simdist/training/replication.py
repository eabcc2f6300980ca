"""The other ways to use several devices that TF1's guide names, beside between-graph
training (``ps_training``):

- ``in_graph_training``: **in-graph replication**: ONE client builds ONE graph with a tower
  per worker task (``tf.device("/job:worker/task:k")``), the variables on the ps. Synchronous:
  the towers' gradients are averaged on the ps and applied by one train op, one
  ``Session.run`` per step. Asynchronous: each tower has its own train op, run by its own
  thread of that one client (TF1 programs used Python threads on one session).
- ``one_model_per_device``: **independent replicas**: each device trains a model of its own
  (a hyper-parameter search: one learning rate per device), with no communication at all.
- ``model_parallel``: **model parallelism**: one network split across two GPUs. A dense
  stack of layers is a chain, so the second GPU waits for the first and the activations
  cross the link: slower than one GPU. Two independent branches (a two-tower model) run at
  once on the two GPUs and merge at the end: faster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simdist.base.errors import InvalidArgumentError, check_ints
from simdist.graph._sim.clients import simulate_clients
from simdist.graph.server import Server, stop_all_servers

FEATURES = 8


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
                      learning_rate: float = 0.05, seed: int = 0) -> InGraphRun:
    """In-graph replication on a simulated cluster {ps: 1, worker: workers}; see the module
    docstring."""
    import simdist.graph as tf
    from simdist.training.ps_training import _shard

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
            x_data, y_data, _ = _shard(k, seed)
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
        return body

    def setup():
        session.run(init)

    try:
        simulate_clients({"client": setup, "ps": ps.join})
        names = [f"client thread {k}" for k in range(len(train_ops))]
        result = simulate_clients({**{name: thread(k) for k, name in enumerate(names)},
                                   "ps": ps.join})
        final = _read_step(session, global_step, ps)
    finally:
        session.close()
        stop_all_servers()
    return InGraphRun(result.trace, mode, names, tower_losses, final, averaging)


def _read_step(session, global_step, ps) -> int:
    out = {}

    def read():
        out["step"] = int(session.run(global_step))
    simulate_clients({"client": read, "ps": ps.join})
    return out["step"]


@dataclass
class ModelParallelRun:
    """``model_parallel``'s result: the architecture, the forward pass's time on one GPU and
    split over two, each GPU's busy share of the split pass, and the split run's trace."""

    architecture: str
    one_gpu_ns: int
    split_ns: int
    busy: dict
    trace: object

    @property
    def speedup(self) -> float:
        return self.one_gpu_ns / self.split_ns


def model_parallel(architecture: str = "dense", width: int = 2048, layers: int = 4,
                   batch: int = 128) -> ModelParallelRun:
    """One forward step of ``architecture`` ("dense": ``layers`` layers of ``width`` units
    in a chain; "branches": two independent branches of ``layers // 2`` layers each, summed
    at the end) on one GPU, then split over two GPUs of one machine; see the docstring."""
    import simdist.graph as tf

    check_ints("model_parallel", width=width, layers=layers, batch=batch)
    if architecture not in ("dense", "branches"):
        raise InvalidArgumentError(f"model_parallel: architecture={architecture!r}, expected "
                                   "'dense' or 'branches'")
    if layers < 2:
        raise InvalidArgumentError(f"model_parallel: layers={layers}, expected at least 2 "
                                   "(one part per GPU)")

    def build(split: bool):
        graph = tf.Graph()
        with graph.as_default():
            half = layers // 2

            def device(i):  # layer i's GPU: the first half on GPU 0, the rest on GPU 1
                return "/gpu:1" if split and i >= half else "/gpu:0"
            weights = []
            for i in range(layers):  # each layer's weights live on its GPU
                with tf.device(device(i)):
                    weights.append(tf.Variable(np.full((width, width), 1e-3, np.float32),
                                               name=f"layer_{i}"))
            with tf.device("/gpu:0"):
                x = tf.ones([batch, width])
            if architecture == "dense":
                h = x
                for i, weight in enumerate(weights):
                    with tf.device(device(i)):
                        h = tf.nn.relu(tf.matmul(h, weight))
                out = h
            else:
                branches = []
                for part in (range(half), range(half, layers)):
                    h = x
                    for i in part:
                        with tf.device(device(i)):
                            h = tf.nn.relu(tf.matmul(h, weights[i]))
                    branches.append(h)
                with tf.device("/gpu:0"):
                    out = branches[0] + branches[1]
            with tf.device("/gpu:0"):
                loss = tf.reduce_sum(out)
            init = tf.global_variables_initializer()
        return graph, loss, init

    times, windows, traces = {}, {}, {}
    for split in (False, True):
        graph, loss, init = build(split)
        with tf.Session(graph=graph, machine=tf.Machine(gpus=2)) as sess:
            sess.run(init)
            sess.run(loss)
            windows[split] = _forward_pass(sess.last_run.trace, loss.op.name)
            times[split] = windows[split][1] - windows[split][0]
            traces[split] = sess.last_run.trace
    trace, (start, end) = traces[True], windows[True]
    busy = {}
    for gpu in ("GPU:0", "GPU:1"):
        busy[gpu] = sum(min(s.start + s.dur, end) - max(s.start, start) for s in trace.spans
                        if s.lane == gpu and s.cat == "compute" and s.start < end
                        and s.start + s.dur > start) / times[True]
    return ModelParallelRun(architecture, times[False], times[True], busy, trace)


def _forward_pass(trace, loss_name) -> tuple[int, int]:
    """(start, end) of the forward pass: from the first MatMul to the end of the loss. The
    variables' reads before it are left out: in TF a ``VariableV2`` and its ``read``
    Identity are host-side and launch no GPU kernel, but simdist prices every op as one,
    which would let a split model win just by reading half its weights on each GPU."""
    start = min(s.start for s in trace.spans if s.name.startswith("MatMul"))
    end = max(s.start + s.dur for s in trace.spans if s.name == loss_name)
    return start, end


@dataclass
class IndependentRun:
    """``one_model_per_device``: each device's learning rate and final loss, the run's
    trace and how many bytes crossed between devices (none: no communication)."""

    losses: dict
    trace: object
    bytes_between_devices: int


def one_model_per_device(learning_rates=(0.01, 0.05, 0.2, 0.5), steps: int = 20,
                         seed: int = 0) -> IndependentRun:
    """A hyper-parameter search: one copy of the model per GPU, each with its own learning
    rate, trained in one session on one machine; no tensor crosses between the GPUs."""
    import simdist.graph as tf
    from simdist.training.ps_training import _shard

    check_ints("one_model_per_device", steps=steps)
    if not learning_rates:
        raise InvalidArgumentError("one_model_per_device: learning_rates is empty")
    x_data, y_data, _ = _shard(0, seed)
    graph = tf.Graph()
    with graph.as_default():
        train_ops, losses = [], []
        for k, rate in enumerate(learning_rates):
            with tf.device(f"/gpu:{k}"), tf.name_scope(f"model_{k}"):
                w = tf.Variable(np.zeros(FEATURES, np.float32), name="w")
                error = tf.reduce_sum(tf.constant(x_data) * w, axis=1) - tf.constant(y_data)
                losses.append(tf.reduce_mean(tf.square(error)))
                train_ops.append(tf.train.GradientDescentOptimizer(rate).minimize(losses[-1]))
        init = tf.global_variables_initializer()
    with tf.Session(graph=graph, machine=tf.Machine(gpus=len(learning_rates))) as sess:
        sess.run(init)
        for _ in range(steps):
            _, values = sess.run([train_ops, losses])
        trace = sess.last_run.trace
    crossing = sum(s.args.get("bytes", 0) for s in trace.spans if s.name.startswith("Recv "))
    return IndependentRun({rate: float(v) for rate, v in zip(learning_rates, values)}, trace,
                          crossing)
