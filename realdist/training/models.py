"""The four exercise models in TensorFlow, doing exactly simdist's math
(simdist/training/models.py).

Weights are plain ``tf.Variable``s made from the numpy initial weights ``model.init(seed)``,
keyed by simdist's names (``kernel``, ``hidden/kernel``, ...), so both halves start from the
same point. Created under ``strategy.scope()`` they become the strategy's distributed variables
(MirroredVariable, or one copy on the parameter device for CentralStorageStrategy).
``per_example_loss`` is the loss of every example, before ``tf.nn.compute_average_loss``.
"""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError

from realdist.runtime.tfenv import tf


def make_variables(init: dict) -> dict:
    """``tf.Variable``s (float32) from numpy weights, in the current strategy's scope."""
    return {name: tf.Variable(value, dtype=tf.float32, name=name.replace("/", "_"))
            for name, value in init.items()}


def _linear(w, x, y):
    """Dense + mean squared error over the outputs (Keras' MSE)."""
    pred = tf.matmul(x, w["kernel"]) + w["bias"]
    err = pred - tf.reshape(y, tf.shape(pred))
    return tf.reduce_mean(tf.square(err), axis=1)


def _softmax(w, x, y):
    """Dense logits + sparse softmax cross-entropy."""
    logits = tf.matmul(x, w["kernel"]) + w["bias"]
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)


def _mlp(w, x, y):
    """Dense(hidden, relu) + Dense logits + sparse softmax cross-entropy."""
    h = tf.nn.relu(tf.matmul(x, w["hidden/kernel"]) + w["hidden/bias"])
    logits = tf.matmul(h, w["output/kernel"]) + w["output/bias"]
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)


def _embedding(w, x, y):
    """Embedding lookup, mean over the tokens, Dense(1), sigmoid cross-entropy with logits."""
    mean = tf.reduce_mean(tf.gather(w["embedding"], x), axis=1)
    z = tf.matmul(mean, w["dense/kernel"])[:, 0] + w["dense/bias"]
    return tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z)


LOSSES = {"linear": _linear, "softmax": _softmax, "mlp": _mlp, "embedding": _embedding}


def per_example_loss_fn(model_name: str):
    """The TF per-example loss ``f(weights, x, y)`` of a simdist model name."""
    if model_name not in LOSSES:
        raise InvalidArgumentError(f"unknown model {model_name!r}: expected one of "
                                   f"{', '.join(LOSSES)}")
    return LOSSES[model_name]
