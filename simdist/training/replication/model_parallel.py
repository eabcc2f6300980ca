"""Model parallelism (TF1's guide): one network split across two GPUs. A dense stack of
layers is a chain, so the second GPU waits for the first and the activations cross the
link: slower than one GPU. Two independent branches (a two-tower model) run at once on the
two GPUs and merge at the end: faster."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import simdist.graph as tf
from simdist.base.errors import InvalidArgumentError, check_ints


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
