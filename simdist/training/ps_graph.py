"""One worker's graph of TF1's between-graph program (``train_on_ps``): built by the worker's
own client with ``replica_device_setter``, the variables on the ps tasks (cut in one part
per ps by ``GreedyLoadBalancingStrategy`` when there are several), the compute on itself."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import simdist.graph as tf
from simdist.graph.script_ops import timed_py_func
from simdist.training.ps_spec import PSTrainingSpec, shard


@dataclass
class WorkerGraph:
    """What a worker's training loop runs: the global step read before and after its
    update, the loss, the gradients (fed back through ``fed`` in a second run when the
    spec is ``two_phase``, else None), the hooks of its MonitoredTrainingSession and a 1 ms
    pause (polling while worker 0 warms up)."""

    graph: object
    read_step: object
    step_after: object
    loss: object
    grads: list
    fed: list | None
    hooks: list
    pause: object


def build_worker_graph(spec: PSTrainingSpec, k: int, cluster) -> WorkerGraph:
    """Worker ``k``'s graph: a linear model of its shard, trained by
    GradientDescentOptimizer (wrapped in SyncReplicasOptimizer in sync mode), stopped at
    ``spec.steps`` by StopAtStepHook."""
    x_data, y_data, ids = shard(k, spec.seed, spec.features, spec.examples, spec.model)
    ps, fed = spec.ps, None
    graph = tf.Graph()
    with graph.as_default():
        # with several ps tasks the weights are cut in one part per ps, placed by size
        strategy = tf.contrib.training.GreedyLoadBalancingStrategy(
            ps, tf.contrib.training.byte_size_load_fn) if ps > 1 else None
        setter = tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{k}", cluster=cluster, ps_strategy=strategy)
        with tf.device(setter):
            global_step = tf.train.get_or_create_global_step()
            columns = np.array_split(np.arange(spec.features), ps)
            parts = [tf.get_variable("w" if ps == 1 else f"w_part_{i}",
                                     initializer=np.zeros(len(c), np.float32))
                     for i, c in enumerate(columns)]
            b = tf.get_variable("b", initializer=np.zeros((), np.float32))
            variables = parts + [b]
            read_step = global_step.read_value()
            # the worker's compute: step_us[k] of simulated time before its gradient
            compute = timed_py_func([], spec.step_us[k], name="compute", stall_us=spec.stall_us,
                                    stall_probability=spec.stall_probability,
                                    seed=spec.seed + k, stragglers=spec.stragglers, worker=k)
            predicted = b - tf.constant(y_data) + 0.0 * compute
            if spec.model == "sparse":  # each example uses NONZEROS of the weights: a lookup
                rows = tf.nn.embedding_lookup(parts[0], tf.constant(ids))
                predicted = predicted + tf.reduce_sum(rows * tf.constant(x_data), axis=1)
            for part, c in zip(parts if spec.model == "dense" else [], columns):
                predicted = predicted + tf.reduce_sum(tf.constant(x_data[:, c]) * part,
                                                      axis=1)
            loss = tf.reduce_mean(tf.square(predicted))
            optimizer = tf.train.GradientDescentOptimizer(spec.learning_rate)
            hooks = [tf.train.StopAtStepHook(last_step=spec.steps)]
            if spec.mode == "sync":
                optimizer = tf.train.SyncReplicasOptimizer(
                    optimizer, replicas_to_aggregate=spec.aggregate,
                    total_num_replicas=spec.workers)
                hooks.append(optimizer.make_session_run_hook(k == 0))
            grads = [g for g, _ in optimizer.compute_gradients(loss, variables)]
            if spec.two_phase:  # the gradient in one run, fed to the update in another
                fed = [tf.placeholder(tf.float32, v.shape) for v in variables]
                train_op = optimizer.apply_gradients(list(zip(fed, variables)), global_step)
            else:
                if spec.gradient_dtype == "float16":  # half the bytes cross the network
                    grads = _through_float16(grads, variables)
                train_op = optimizer.apply_gradients(list(zip(grads, variables)), global_step)
            with tf.control_dependencies([train_op]):
                step_after = global_step.read_value()
        pause = timed_py_func([], 1000, name="wait_for_warmup")
    return WorkerGraph(graph, read_step, step_after, loss, grads, fed, hooks, pause)


def _through_float16(grads, variables) -> list:
    """The gradients cast to float16 on the worker and back to float32 on each variable's
    ps: half the bytes cross the network."""
    halves = [tf.cast(g, tf.float16) for g in grads]
    out = []
    for half, v in zip(halves, variables):
        with tf.device(v.device):
            out.append(tf.cast(half, tf.float32))
    return out
