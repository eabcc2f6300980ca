"""An ensemble between graphs: predictor clients and an aggregator sharing queues on a ps.

``ensemble`` is the between-graph program that TF1's queues allow beside an input pipeline:
an aggregator client puts each input in every predictor's queue and collects the predictions
from one queue, averaging those that arrive within a timeout (``RunOptions.timeout_in_ms``),
so one slow predictor does not hold up the rest.
"""

from __future__ import annotations

import contextlib

from dataclasses import dataclass

from simdist.base.errors import InvalidArgumentError, check_ints
from simdist.graph._sim.clients import simulate_clients
from simdist.graph._sim.world import over_ranks
from simdist.graph.data_flow_ops import FIFOQueue
from simdist.graph.graph import Graph
from simdist.graph.server import Server, stop_all_servers
from simdist.graph.session import Session
from simdist.training.input_pipeline import compute_op


@dataclass
class EnsembleRun:
    """What ``ensemble`` gives: for each input, the predictions the aggregator received and
    their mean; how many of its waits timed out; the trace."""

    received: list  # [{predictor index: prediction}] per input
    means: list
    timeouts: int
    trace: object


def ensemble(predictors: int = 3, inputs: int = 4, slow: int | None = None,
             slowdown: float = 20.0, timeout_ms: int = 1, predict_flops: float = 2e7,
             transport=None) -> EnsembleRun | None:
    """The between-graph ensemble: an aggregator client (``worker:0``) puts each input in
    every predictor's input queue (on ``ps:0``), the predictor clients (``worker:1..``)
    each apply their own model (prediction = input x (k + 1), ``predict_flops`` of work,
    ``slowdown`` times more for the ``slow`` one) and put (input id, prediction) in the
    prediction queue, and the aggregator takes predictions for each input with
    ``operation_timeout_in_ms`` = ``timeout_ms``, so that a slow predictor cannot stall it:
    it averages what came in time and drops late predictions of earlier inputs.
    ``transport`` (an ``MPITransport``, under mpiexec): the tasks spread over its ranks;
    rank 0 gets the run (the same as in one process), the others None."""
    with over_ranks(transport) if transport is not None else contextlib.nullcontext():
        return _ensemble(predictors, inputs, slow, slowdown, timeout_ms, predict_flops)


def _ensemble(predictors, inputs, slow, slowdown, timeout_ms, predict_flops):
    import simdist.graph as tf

    check_ints("ensemble", predictors=predictors, inputs=inputs, timeout_ms=timeout_ms)
    if slow is not None and not 0 <= slow < predictors:
        raise InvalidArgumentError(f"ensemble: slow={slow!r}, expected a predictor index "
                                   f"0..{predictors - 1} or None")
    stop_all_servers()
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"],
                                    "worker": [f"localhost:{2223 + i}"
                                               for i in range(predictors + 1)]})
    servers = [Server(cluster, "ps", 0)] + [Server(cluster, "worker", i)
                                            for i in range(predictors + 1)]

    def queues():
        with tf.device("/job:ps/task:0"):
            ins = [FIFOQueue(inputs, tf.float32, shapes=[()], shared_name=f"inputs_{k}",
                             name=f"inputs_{k}") for k in range(predictors)]
            out = FIFOQueue(inputs * predictors, [tf.int32, tf.int32, tf.float32],
                            shapes=[(), (), ()], shared_name="predictions",
                            name="predictions")
        return ins, out

    def predictor(k):
        def run():
            graph = Graph()
            with graph.as_default():
                ins, out = queues()
                index = tf.placeholder(tf.int32, [])
                value = ins[k].dequeue()
                with tf.device(f"/job:worker/task:{k + 1}"):
                    flops = predict_flops * (slowdown if k == slow else 1.0)
                    prediction = value * float(k + 1) + compute_op(tf, flops) * 0.0
                put = out.enqueue([index, k, prediction])
            with Session(servers[k + 2].target, graph=graph) as sess:
                for i in range(inputs):
                    sess.run(put, {index: i})
        return run

    def aggregator():
        graph = Graph()
        with graph.as_default():
            ins, out = queues()
            value = tf.placeholder(tf.float32, [])
            feeds = [q.enqueue(value) for q in ins]
            take = out.dequeue()
        early: dict = {}  # predictions of later inputs, taken while waiting for this one
        received, timeouts = [], 0
        config = tf.ConfigProto(operation_timeout_in_ms=timeout_ms)
        with Session(servers[1].target, graph=graph, config=config) as sess:
            for i in range(inputs):
                for feed in feeds:
                    sess.run(feed, {value: float(i + 1)})
            for i in range(inputs):
                got = early.pop(i, {})
                while len(got) < predictors:
                    try:
                        index, k, prediction = sess.run(take)
                    except tf.errors.DeadlineExceededError:
                        timeouts += 1
                        break
                    if int(index) == i:
                        got[int(k)] = float(prediction)
                    elif int(index) > i:  # a late one (of an earlier input) is dropped
                        early.setdefault(int(index), {})[int(k)] = float(prediction)
                received.append(got)
        return received, timeouts

    clients = {"aggregator": aggregator, "ps": servers[0].join}
    clients.update({f"predictor {k}": predictor(k) for k in range(predictors)})
    tasks = {"aggregator": "worker:0", "ps": "ps:0",
             **{f"predictor {k}": f"worker:{k + 1}" for k in range(predictors)}}
    try:
        result = simulate_clients(clients, tasks=tasks)
    finally:
        stop_all_servers()
    if result.trace is None:  # an MPI rank other than 0
        return None
    received, timeouts = result.returns["aggregator"]
    means = [sum(got.values()) / len(got) if got else None for got in received]
    return EnsembleRun(received, means, timeouts, result.trace)
