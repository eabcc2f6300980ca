"""Independent replicas (TF1's guide): each device trains a model of its own (a
hyper-parameter search: one learning rate per device), with no communication at all."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import simdist.graph as tf
from simdist.base.errors import InvalidArgumentError, check_ints
from simdist.training.ps_spec import FEATURES, shard


@dataclass
class IndependentRun:
    """``one_model_per_device``: each device's learning rate and final loss, the run's
    trace and how many bytes crossed between devices (none: no communication)."""

    losses: dict
    trace: object
    bytes_between_devices: int  # received by one GPU from another


def one_model_per_device(learning_rates=(0.01, 0.05, 0.2, 0.5), steps: int = 20,
                         seed: int = 0) -> IndependentRun:
    """A hyper-parameter search: one copy of the model per GPU, each with its own learning
    rate, trained in one session on one machine; no tensor crosses between the GPUs."""
    check_ints("one_model_per_device", steps=steps)
    if not learning_rates:
        raise InvalidArgumentError("one_model_per_device: learning_rates is empty")
    x_data, y_data, _ = shard(0, seed)
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
    # between two GPUs (the fetched losses do go to the client's CPU, as in TF)
    crossing = sum(s.args.get("bytes", 0) for s in trace.spans if s.name.startswith("Recv ")
                   and s.lane.startswith("GPU") and "GPU" in s.args.get("src", ""))
    return IndependentRun({rate: float(v) for rate, v in zip(learning_rates, values)}, trace,
                          crossing)
