"""The custom training loop every realdist runner uses: simdist's math on a real tf.distribute
strategy.

Per step: the next global batch from ``simdist.training.data.global_batches`` arrives through
``strategy.experimental_distribute_dataset`` (TF cuts it into replica batches itself); each
replica computes ``tf.nn.compute_average_loss(per_example, global_batch_size=b)`` and its
gradients (``strategy.run``); the gradients are summed into the variables' devices with
``strategy.extended.batch_reduce_to(SUM, ...)`` (MirroredStrategy: an all-reduce with its
cross-device ops; CentralStorageStrategy: a reduce onto the parameter device;
MultiWorkerMirroredStrategy: a collective all-reduce between the workers) and applied as plain
SGD with ``strategy.extended.update`` -- what a Keras optimizer does inside, without its state.

The two halves of a step are separate ``tf.function``s, so the trace shows each one's wall
time: "compute" (forward, backward, loss) and "all-reduce + update".
"""

from __future__ import annotations

import time

import numpy as np

from simdist.training.data import global_batches
from simdist.base.errors import DeadlineExceededError

from realdist.training.models import make_variables, per_example_loss_fn
from realdist.runtime.tfenv import tf

SUM = tf.distribute.ReduceOp.SUM


def step_batches(exercise) -> list[tuple[np.ndarray, np.ndarray]]:
    """The exercise's global batches, step by step (the same ones simdist uses)."""
    _, data = exercise.build()
    return list(global_batches(data, exercise.global_batch, exercise.steps, exercise.seed))


def batch_dataset(batches) -> tf.data.Dataset:
    """``Dataset.from_generator`` over the global batches, batch dimension None, sharded by
    DATA between workers (there are no files to shard)."""
    x0, y0 = batches[0]
    spec = (tf.TensorSpec((None,) + x0.shape[1:], tf.as_dtype(x0.dtype)),
            tf.TensorSpec((None,) + y0.shape[1:], tf.as_dtype(y0.dtype)))
    dataset = tf.data.Dataset.from_generator(lambda: iter(batches), output_signature=spec)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def train(strategy, exercise, on_step=None, before_step=None, deadline=None) -> dict:
    """Run the exercise's steps on ``strategy``; returns losses, final weights and timings.

    ``on_step(k, loss, step_ns)`` is called after every step, ``before_step(k)`` before it
    (fault injection in tests); ``deadline`` (``time.monotonic()``) ends the run with
    DeadlineExceededError between steps.
    """
    model, _ = exercise.build()
    batches = step_batches(exercise)
    loss_of = per_example_loss_fn(exercise.model)
    with strategy.scope():
        weights = make_variables(model.init(exercise.seed))
    names = list(weights)
    lr = tf.constant(exercise.learning_rate, tf.float32)

    def replica_step(x, y, b):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_of(weights, x, y), global_batch_size=b)
        grads = tape.gradient(loss, [weights[n] for n in names])
        # the embedding's gradient is IndexedSlices; sum it densely like the other weights
        return loss, [tf.convert_to_tensor(g) for g in grads]

    @tf.function
    def compute(inputs, b):
        losses, grads = strategy.run(replica_step, args=(*inputs, b))
        return strategy.reduce(SUM, losses, axis=None), grads

    @tf.function
    def reduce_and_update(grads):
        summed = strategy.extended.batch_reduce_to(
            SUM, [(g, weights[n]) for g, n in zip(grads, names)])
        for n, g in zip(names, summed):
            strategy.extended.update(weights[n], lambda v, d: v.assign_sub(lr * d), args=(g,))

    losses, spans = [], []
    iterator = iter(strategy.experimental_distribute_dataset(batch_dataset(batches)))
    for k, (x, _) in enumerate(batches):
        if deadline is not None and time.monotonic() > deadline:
            raise DeadlineExceededError(
                f"the run passed its timeout after {k} of {exercise.steps} steps")
        if before_step is not None:
            before_step(k)
        t0 = time.monotonic_ns()
        inputs = next(iterator)
        t1 = time.monotonic_ns()
        loss, grads = compute(inputs, tf.constant(len(x), tf.int64))
        loss = float(loss)
        t2 = time.monotonic_ns()
        reduce_and_update(grads)
        t3 = time.monotonic_ns()
        losses.append(loss)
        spans.append({"step": k, "start": t0, "input": t1 - t0, "compute": t2 - t1,
                      "update": t3 - t2, "batch": len(x)})
        if on_step is not None:
            on_step(k, loss, t3 - t0)
    return {"losses": losses, "spans": spans,
            "weights": {n: strategy.experimental_local_results(v)[0].numpy()
                        for n, v in weights.items()}}
