"""Models TF's nn ops: tf.nn.relu and the softmax cross-entropy losses.

Each op type is declared once: its builder, then its kernel, FLOPs, device kernels and gradient
(``register``), with the gradient-only op it needs (ReluGrad).
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.graph.array_ops import convert_to_tensor, expand_last_dim, unary_op
from simdist.graph.graph import Tensor, create_op, format_shape
from simdist.graph.math_ops import broadcast_shape
from simdist.graph.registry import NO_GRADIENT, numpy_kernel, register

# -- Relu -----------------------------------------------------------------------------------------


def relu(x, name=None):
    return unary_op("Relu", x, name)


def _relu_grad(op, g):
    return [create_op("ReluGrad", [g[0], op.outputs[0]], [(g[0].dtype, g[0].shape)]).outputs[0]]


register("Relu", numpy_kernel(lambda x: np.maximum(x, 0)), grad=_relu_grad)
register("ReluGrad", numpy_kernel(lambda g, y: g * (y > 0)), grad=NO_GRADIENT)


# -- SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits ---------------------------


def softmax_cross_entropy_with_logits(labels, logits, name=None) -> Tensor:
    """Per-example cross-entropy of softmax(logits) against probability ``labels``."""
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels, dtype=logits.dtype)
    broadcast_shape("SoftmaxCrossEntropyWithLogits", name, logits, labels)
    if logits.shape is not None and labels.shape is not None and logits.shape != labels.shape:
        raise InvalidArgumentError(
            f"logits and labels must have the same shape, got logits shape "
            f"{format_shape(logits.shape)} and labels shape {format_shape(labels.shape)}")
    return _xent_op("SoftmaxCrossEntropyWithLogits", logits, labels, name)


softmax_cross_entropy_with_logits_v2 = softmax_cross_entropy_with_logits


def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None) -> Tensor:
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels)
    return _xent_op("SparseSoftmaxCrossEntropyWithLogits", logits, labels, name)


def _xent_op(op_type, logits, labels, name) -> Tensor:
    """Outputs: the per-example loss and its gradient with respect to the logits."""
    batch = None if logits.shape is None else logits.shape[:1]
    op = create_op(op_type, [logits, labels],
                   [(logits.dtype, batch), (logits.dtype, logits.shape)], name=name)
    return op.outputs[0]


def _softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _xent_kernel(op, args, rt):
    logits, labels = args
    p = _softmax(logits)
    loss = -(labels * np.log(np.maximum(p, np.finfo(p.dtype).tiny))).sum(axis=-1)
    return [loss.astype(logits.dtype), (p - labels).astype(logits.dtype)]


def _sparse_xent_kernel(op, args, rt):
    logits, labels = args
    n = logits.shape[-1]
    if np.any((labels < 0) | (labels >= n)):
        bad = labels[(labels < 0) | (labels >= n)][0]
        raise InvalidArgumentError(f"{op.name}: received a label value of {bad} which is "
                                   f"outside the valid range of [0, {n})")
    onehot = np.eye(n, dtype=logits.dtype)[labels]
    return _xent_kernel(op, [logits, onehot], rt)


def _xent_grad(op, g):
    return [expand_last_dim(g[0]) * op.outputs[1], None]


def _xent_flops(op, args, outs):
    return 5 * args[0].size


register("SoftmaxCrossEntropyWithLogits", _xent_kernel, flops=_xent_flops, grad=_xent_grad)
register("SparseSoftmaxCrossEntropyWithLogits", _sparse_xent_kernel, flops=_xent_flops,
         grad=_xent_grad)
