"""Models TF's math ops: tf.add, subtract, multiply, divide (broadcasting), negative, square,
sqrt, sigmoid, add_n, matmul, reduce_sum, reduce_mean, argmax and cast.

Each op type is declared once: its builder, which checks static shapes the way TF does at
graph-construction time (a shape mismatch names the op and both shapes), then its kernel,
FLOPs, device kernels and gradient (``register``), with the gradient-only ops it needs
(Unbroadcast, SigmoidGrad, ReduceGrad).
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.graph.array_ops import convert_to_tensor, unary_op
from simdist.graph.dtypes import as_dtype, int64
from simdist.graph.graph import Operation, Tensor, create_op, format_shape
from simdist.graph.registry import ANY_TYPE, NO_GRADIENT, NOT_DIFFERENTIABLE, numpy_kernel, register


def _pair(x, y):
    """Two operands: Python numbers take the dtype of the tensor beside them (TF's rule)."""
    if isinstance(x, Tensor) or hasattr(x, "_as_tensor"):
        x = convert_to_tensor(x)
        y = convert_to_tensor(y, dtype=None if isinstance(y, Tensor) or hasattr(
            y, "_as_tensor") else x.dtype)
    else:
        y = convert_to_tensor(y)
        x = convert_to_tensor(x, dtype=y.dtype)
    return x, y


def broadcast_shape(op_type, name, x: Tensor, y: Tensor):
    """The static shape of ``x`` and ``y`` broadcast together (None when a rank is unknown)."""
    if x.dtype != y.dtype:
        raise InvalidArgumentError(
            f"{op_type} '{name or op_type}': inputs {x.name!r} and {y.name!r} have dtypes "
            f"{x.dtype.name} and {y.dtype.name}: expected the same dtype (use tf.cast)")
    if x.shape is None or y.shape is None:
        return None
    a, b = list(x.shape), list(y.shape)
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    out = []
    for i, (p, q) in enumerate(zip(a, b)):
        if p is None or q is None:
            out.append(q if p == 1 else p if q == 1 else None)
        elif p == q or q == 1:
            out.append(p)
        elif p == 1:
            out.append(q)
        else:
            raise InvalidArgumentError(
                f"Dimensions must be equal, but are {p} and {q} for '{name or op_type}' "
                f"(op: {op_type}) with input shapes: {format_shape(x.shape)}, "
                f"{format_shape(y.shape)}")
    return tuple(out)


# -- AddV2, Sub, Mul, RealDiv (broadcasting) ------------------------------------------------------


def _binary(op_type, x, y, name):
    x, y = _pair(x, y)
    shape = broadcast_shape(op_type, name, x, y)
    return create_op(op_type, [x, y], [(x.dtype, shape)], name=name).outputs[0]


def _broadcasting_kernel(fn):
    def compute(op, args, rt):
        try:
            np.broadcast_shapes(args[0].shape, args[1].shape)
        except ValueError:
            raise InvalidArgumentError(
                f"Incompatible shapes: {list(args[0].shape)} vs. {list(args[1].shape)} "
                f"[[{{{{node {op.name}}}}}]]") from None
        return [np.asarray(fn(args[0], args[1]), args[0].dtype)]
    return compute


def _unbroadcast(grad: Tensor, like: Tensor) -> Tensor:
    """Sum ``grad`` down to the shape of ``like`` (the gradient of a broadcast)."""
    if grad.shape is not None and grad.shape == like.shape and None not in grad.shape:
        return grad
    return create_op("Unbroadcast", [grad, like], [(grad.dtype, like.shape)]).outputs[0]


def _unbroadcast_kernel(op, args, rt):
    grad, like = args
    while grad.ndim > like.ndim:
        grad = grad.sum(axis=0)
    for i, d in enumerate(like.shape):
        if d == 1 and grad.shape[i] != 1:
            grad = grad.sum(axis=i, keepdims=True)
    return [grad]


register("Unbroadcast", _unbroadcast_kernel, flops=lambda op, args, outs: args[0].size,
         grad=NO_GRADIENT)


def add(x, y, name=None):
    """tf.add: an AddV2 op that TF names "Add" (``a + b`` names it "add")."""
    return _binary("AddV2", x, y, name or "Add")


def _add_grad(op, g):
    x, y = op.inputs
    return [_unbroadcast(g[0], x), _unbroadcast(g[0], y)]


register("AddV2", _broadcasting_kernel(np.add), grad=_add_grad)


def subtract(x, y, name=None):
    return _binary("Sub", x, y, name)


def _sub_grad(op, g):
    x, y = op.inputs
    return [_unbroadcast(g[0], x), _unbroadcast(negative(g[0]), y)]


register("Sub", _broadcasting_kernel(np.subtract), grad=_sub_grad)


def multiply(x, y, name=None):
    return _binary("Mul", x, y, name)


def _mul_grad(op, g):
    x, y = op.inputs
    return [_unbroadcast(g[0] * y, x), _unbroadcast(g[0] * x, y)]


register("Mul", _broadcasting_kernel(np.multiply), grad=_mul_grad)


def divide(x, y, name=None):
    """tf.divide: a RealDiv op that TF names "truediv"."""
    return _binary("RealDiv", x, y, name or "truediv")


def _div_grad(op, g):
    x, y = op.inputs
    return [_unbroadcast(g[0] / y, x),
            _unbroadcast(negative(g[0]) * x / square(y), y)]


register("RealDiv", _broadcasting_kernel(np.divide), grad=_div_grad)


# -- AddN -----------------------------------------------------------------------------------------


def add_n(inputs, name=None):
    inputs = [convert_to_tensor(x) for x in inputs]
    return create_op("AddN", inputs, [(inputs[0].dtype, inputs[0].shape)],
                     name=name).outputs[0]


def _add_n_grad(op, g):
    return [g[0]] * len(op.inputs)


register("AddN", numpy_kernel(lambda *xs: sum(xs[1:], xs[0])), grad=_add_n_grad)


# -- Neg, Square, Sqrt ----------------------------------------------------------------------------


def negative(x, name=None):
    return unary_op("Neg", x, name)


def _neg_grad(op, g):
    return [negative(g[0])]


register("Neg", numpy_kernel(np.negative), grad=_neg_grad)


def square(x, name=None):
    return unary_op("Square", x, name)


def _square_grad(op, g):
    return [g[0] * (op.inputs[0] * 2.0)]


register("Square", numpy_kernel(np.square), grad=_square_grad)


def sqrt(x, name=None):
    return unary_op("Sqrt", x, name)


def _sqrt_grad(op, g):
    return [g[0] / (op.outputs[0] * 2.0)]


register("Sqrt", numpy_kernel(np.sqrt), grad=_sqrt_grad)


# -- Sigmoid --------------------------------------------------------------------------------------


def sigmoid(x, name=None):
    return unary_op("Sigmoid", x, name)


def _sigmoid_grad(op, g):
    y = op.outputs[0]
    return [create_op("SigmoidGrad", [y, g[0]], [(y.dtype, y.shape)]).outputs[0]]


register("Sigmoid", numpy_kernel(lambda x: 1 / (1 + np.exp(-x))),
         flops=lambda o, a, outs: 4 * outs[0].size, grad=_sigmoid_grad)
register("SigmoidGrad", numpy_kernel(lambda y, g: g * y * (1 - y)), grad=NO_GRADIENT)


# -- MatMul ---------------------------------------------------------------------------------------


def matmul(a, b, transpose_a=False, transpose_b=False, name=None) -> Tensor:
    """tf.matmul of two matrices; the inner dimensions must agree."""
    a, b = _pair(a, b)
    for t in (a, b):
        if t.shape is not None and len(t.shape) != 2:
            raise InvalidArgumentError(
                f"MatMul '{name or 'MatMul'}': input {t.name!r} has shape "
                f"{format_shape(t.shape)}: expected a matrix (rank 2)")
    sa = (a.shape[::-1] if transpose_a else a.shape) if a.shape else (None, None)
    sb = (b.shape[::-1] if transpose_b else b.shape) if b.shape else (None, None)
    if sa[1] is not None and sb[0] is not None and sa[1] != sb[0]:
        raise InvalidArgumentError(
            f"Dimensions must be equal, but are {sa[1]} and {sb[0]} for "
            f"'{name or 'MatMul'}' (op: MatMul) with input shapes: {format_shape(a.shape)}, "
            f"{format_shape(b.shape)}")
    attrs = {"transpose_a": transpose_a, "transpose_b": transpose_b}
    return create_op("MatMul", [a, b], [(a.dtype, (sa[0], sb[1]))], attrs, name).outputs[0]


def _matmul_kernel(op, args, rt):
    a, b = args
    a = a.T if op.attrs["transpose_a"] else a
    b = b.T if op.attrs["transpose_b"] else b
    if a.shape[1] != b.shape[0]:
        raise InvalidArgumentError(
            f"Matrix size-incompatible: In[0]: {list(args[0].shape)}, In[1]: "
            f"{list(args[1].shape)} [[{{{{node {op.name}}}}}]]")
    return [a @ b]


def _matmul_flops(op, args, outs):
    a = args[0].T if op.attrs["transpose_a"] else args[0]
    return 2 * a.shape[0] * a.shape[1] * outs[0].shape[1]


def _matmul_grad(op, g):
    a, b = op.inputs
    ta, tb = op.attrs["transpose_a"], op.attrs["transpose_b"]
    if not ta and not tb:
        return [matmul(g[0], b, transpose_b=True), matmul(a, g[0], transpose_a=True)]
    if ta and not tb:
        return [matmul(b, g[0], transpose_b=True), matmul(a, g[0])]
    if not ta and tb:
        return [matmul(g[0], b), matmul(g[0], a, transpose_a=True)]
    return [matmul(b, g[0], transpose_a=True, transpose_b=True),
            matmul(g[0], a, transpose_a=True, transpose_b=True)]


register("MatMul", _matmul_kernel, flops=_matmul_flops, grad=_matmul_grad)


# -- Sum, Mean, ArgMax (reductions) ---------------------------------------------------------------


def _reduced_shape(shape, axis, keepdims):
    if shape is None:
        return None
    if axis is None:
        return tuple(1 for _ in shape) if keepdims else ()
    axes = {a % len(shape) for a in (axis if isinstance(axis, (list, tuple)) else [axis])}
    return tuple(1 if i in axes else d for i, d in enumerate(shape)
                 if keepdims or i not in axes)


def _reduce(op_type, x, axis, keepdims, name):
    x = convert_to_tensor(x)
    if x.shape is not None and axis is not None:
        for a in (axis if isinstance(axis, (list, tuple)) else [axis]):
            if not -len(x.shape) <= a < len(x.shape):
                raise InvalidArgumentError(
                    f"{op_type} '{name or op_type}': axis {a} is out of range for input "
                    f"{x.name!r} of shape {format_shape(x.shape)}")
    attrs = {"axis": axis, "keepdims": keepdims}
    return create_op(op_type, [x], [(x.dtype, _reduced_shape(x.shape, axis, keepdims))],
                     attrs, name).outputs[0]


def _reduce_kernel(fn):
    def compute(op, args, rt):
        axis = op.attrs["axis"]
        axis = tuple(axis) if isinstance(axis, list) else axis
        return [np.asarray(fn(args[0], axis=axis, keepdims=op.attrs["keepdims"]),
                           args[0].dtype)]
    return compute


def _reduce_grad(grad: Tensor, op: Operation, mean: bool) -> Tensor:
    """The gradient of a Sum or Mean: ``grad`` broadcast back to the input's shape."""
    x = op.inputs[0]
    attrs = {"axis": op.attrs["axis"], "keepdims": op.attrs["keepdims"], "mean": mean}
    return create_op("ReduceGrad", [grad, x], [(x.dtype, x.shape)], attrs).outputs[0]


def _reduce_grad_kernel(op, args, rt):
    grad, like = args
    axis, keepdims = op.attrs["axis"], op.attrs["keepdims"]
    if axis is None:
        axes = tuple(range(like.ndim))
    else:
        axes = tuple(a % like.ndim for a in (axis if isinstance(axis, (list, tuple)) else [axis]))
    if not keepdims:
        grad = np.expand_dims(grad, axes)
    out = np.broadcast_to(grad, like.shape).astype(like.dtype)
    if op.attrs["mean"]:
        out = out / max(1, int(np.prod([like.shape[a] for a in axes])))
    return [out.astype(like.dtype)]


register("ReduceGrad", _reduce_grad_kernel, grad=NO_GRADIENT)


def reduce_sum(x, axis=None, keepdims=False, name=None):
    return _reduce("Sum", x, axis, keepdims, name)


register("Sum", _reduce_kernel(np.sum), flops=lambda op, args, outs: args[0].size,
         grad=lambda op, g: [_reduce_grad(g[0], op, mean=False)])


def reduce_mean(x, axis=None, keepdims=False, name=None):
    return _reduce("Mean", x, axis, keepdims, name)


register("Mean", _reduce_kernel(np.mean), flops=lambda op, args, outs: args[0].size,
         grad=lambda op, g: [_reduce_grad(g[0], op, mean=True)])


def argmax(x, axis=None, output_type=int64, name=None):
    x = convert_to_tensor(x)
    axis = 0 if axis is None else axis
    shape = _reduced_shape(x.shape, axis, False)
    return create_op("ArgMax", [x], [(as_dtype(output_type), shape)], {"axis": axis},
                     name).outputs[0]


register("ArgMax", lambda op, args, rt: [np.argmax(args[0], axis=op.attrs["axis"]).astype(
    op.outputs[0].dtype.as_numpy_dtype)], flops=lambda op, args, outs: args[0].size,
    gpu=lambda op: op.inputs[0].dtype.is_floating, grad=NOT_DIFFERENTIABLE)


# -- Cast -----------------------------------------------------------------------------------------


def cast(x, dtype, name=None) -> Tensor:
    """tf.cast: a Cast op, or ``x`` itself when it already has that dtype (as in TF)."""
    x = convert_to_tensor(x)
    if x.dtype == as_dtype(dtype):
        return x
    return unary_op("Cast", x, name, dtype=as_dtype(dtype))


def _cast_grad(op, g):
    return [cast(g[0], op.inputs[0].dtype)] if op.inputs[0].dtype.is_floating else [None]


register("Cast", lambda op, args, rt: [args[0].astype(op.outputs[0].dtype.as_numpy_dtype)],
         gpu=ANY_TYPE, grad=_cast_grad)
