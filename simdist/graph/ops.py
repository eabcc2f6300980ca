"""The ops the course needs, under tf.compat.v1's names, with numpy kernels and FLOP counts.

Each public function adds one op to the default graph and checks static shapes the way TF
does at graph-construction time (a shape mismatch names the op and both shapes).
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .dtypes import as_dtype, dtype_of, float32, int64
from .graph import Operation, Tensor, format_shape, get_default_graph
from .indexed_slices import IndexedSlices
from .registry import ANY_TYPE, register

# -- converting Python values ----------------------------------------------------------------


def convert_to_tensor(value, dtype=None, name=None) -> Tensor:
    """A Tensor from a Tensor, a Variable (its read value) or a Python / numpy value."""
    if isinstance(value, Tensor):
        if dtype is not None and as_dtype(dtype) != value.dtype:
            raise InvalidArgumentError(
                f"tensor {value.name!r} has dtype {value.dtype.name}, expected "
                f"{as_dtype(dtype).name}")
        return value
    if hasattr(value, "_as_tensor"):
        return value._as_tensor()
    if isinstance(value, IndexedSlices):
        return _dense(value)
    if isinstance(value, Operation):
        raise InvalidArgumentError(f"op {value.name!r} ({value.type}) has no output value: "
                                   "pass one of its tensors (op.outputs[0]) instead")
    return constant(value, dtype=dtype, name=name or "Const")


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


def _make(op_type, inputs, outputs, attrs=None, name=None) -> Operation:
    return get_default_graph().create_op(op_type, inputs, outputs, attrs, name)


def _broadcast(op_type, name, x: Tensor, y: Tensor):
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


def _binary(op_type, fn, x, y, name):
    x, y = _pair(x, y)
    shape = _broadcast(op_type, name, x, y)
    return _make(op_type, [x, y], [(x.dtype, shape)], name=name).outputs[0]


def _unary(op_type, x, name, dtype=None):
    x = convert_to_tensor(x)
    return _make(op_type, [x], [(dtype or x.dtype, x.shape)], name=name).outputs[0]


# -- constants, placeholders, identity ----------------------------------------------------------


def constant(value, dtype=None, shape=None, name="Const") -> Tensor:
    """tf.constant: a Const op holding a numpy copy of ``value``."""
    if dtype is None:
        array = np.asarray(value)
        if array.dtype == np.float64 and not isinstance(value, np.ndarray):
            array = array.astype(np.float32)  # Python floats become float32, like TF
        elif array.dtype == np.int64 and not isinstance(value, np.ndarray):
            array = array.astype(np.int32)
        dtype = dtype_of(array)
    dtype = as_dtype(dtype)
    array = np.array(value, dtype=dtype.as_numpy_dtype)
    if shape is not None:
        shape = tuple(shape)
        if array.size == 1:
            array = np.full(shape, array.reshape(()), dtype.as_numpy_dtype)
        elif array.size == int(np.prod(shape)):
            array = array.reshape(shape)
        else:
            raise InvalidArgumentError(f"constant {name!r}: cannot reshape a value of "
                                       f"{array.size} elements to shape {shape}")
    op = _make("Const", [], [(dtype, array.shape)], {"value": array, "dtype": dtype}, name)
    return op.outputs[0]


def placeholder(dtype, shape=None, name=None) -> Tensor:
    """tf.compat.v1.placeholder: a value the caller must feed to every run that needs it."""
    dtype = as_dtype(dtype)
    shape = None if shape is None else tuple(shape)
    op = _make("Placeholder", [], [(dtype, shape)], {"dtype": dtype, "shape": shape},
               name or "Placeholder")
    return op.outputs[0]


def identity(x, name=None) -> Tensor:
    return _unary("Identity", x, name)


def no_op(name=None) -> Operation:
    return _make("NoOp", [], [], name=name)


def group(*inputs, name=None) -> Operation:
    """tf.group: a NoOp that runs after every input (control edges only)."""
    ops = []
    for item in inputs:
        for x in (item if isinstance(item, (list, tuple)) else [item]):
            x = x.op if isinstance(x, Tensor) or hasattr(x, "_as_tensor") else x
            if not isinstance(x, Operation):
                raise InvalidArgumentError(f"tf.group takes ops and tensors, got {x!r}")
            ops.append(x)
    with get_default_graph().control_dependencies(ops):
        return no_op(name=name or "NoOp")


def zeros(shape, dtype=float32, name="zeros") -> Tensor:
    return constant(0, dtype=dtype, shape=shape, name=name)


def ones(shape, dtype=float32, name="ones") -> Tensor:
    return constant(1, dtype=dtype, shape=shape, name=name)


def zeros_like(x, name=None) -> Tensor:
    return _unary("ZerosLike", x, name)


def ones_like(x, name=None) -> Tensor:
    return _unary("OnesLike", x, name)


def cast(x, dtype, name=None) -> Tensor:
    return _unary("Cast", x, name, dtype=as_dtype(dtype))


# -- math ----------------------------------------------------------------------------------------


def add(x, y, name=None):
    return _binary("AddV2", np.add, x, y, name)


def subtract(x, y, name=None):
    return _binary("Sub", np.subtract, x, y, name)


def multiply(x, y, name=None):
    return _binary("Mul", np.multiply, x, y, name)


def divide(x, y, name=None):
    return _binary("RealDiv", np.divide, x, y, name)


def negative(x, name=None):
    return _unary("Neg", x, name)


def square(x, name=None):
    return _unary("Square", x, name)


def sqrt(x, name=None):
    return _unary("Sqrt", x, name)


def relu(x, name=None):
    return _unary("Relu", x, name)


def sigmoid(x, name=None):
    return _unary("Sigmoid", x, name)


def add_n(inputs, name=None):
    inputs = [convert_to_tensor(x) for x in inputs]
    return _make("AddN", inputs, [(inputs[0].dtype, inputs[0].shape)], name=name).outputs[0]


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
    return _make("MatMul", [a, b], [(a.dtype, (sa[0], sb[1]))], attrs, name).outputs[0]


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
    return _make(op_type, [x], [(x.dtype, _reduced_shape(x.shape, axis, keepdims))], attrs,
                 name).outputs[0]


def reduce_sum(x, axis=None, keepdims=False, name=None):
    return _reduce("Sum", x, axis, keepdims, name)


def reduce_mean(x, axis=None, keepdims=False, name=None):
    return _reduce("Mean", x, axis, keepdims, name)


def argmax(x, axis=None, output_type=int64, name=None):
    x = convert_to_tensor(x)
    axis = 0 if axis is None else axis
    shape = _reduced_shape(x.shape, axis, False)
    return _make("ArgMax", [x], [(as_dtype(output_type), shape)], {"axis": axis},
                 name).outputs[0]


def gather(params, indices, name=None) -> Tensor:
    """tf.gather along axis 0 (an embedding lookup); its gradient is an IndexedSlices."""
    params = convert_to_tensor(params)
    indices = convert_to_tensor(indices)
    if not indices.dtype.is_integer:
        raise InvalidArgumentError(f"gather '{name or 'GatherV2'}': indices {indices.name!r} "
                                   f"have dtype {indices.dtype.name}: expected int32 or int64")
    shape = None
    if params.shape is not None and indices.shape is not None:
        shape = indices.shape + params.shape[1:]
    return _make("GatherV2", [params, indices], [(params.dtype, shape)], name=name).outputs[0]


def embedding_lookup(params, ids, name=None) -> Tensor:
    return gather(params, ids, name=name or "embedding_lookup")


def softmax_cross_entropy_with_logits(labels, logits, name=None) -> Tensor:
    """Per-example cross-entropy of softmax(logits) against probability ``labels``."""
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels, dtype=logits.dtype)
    _broadcast("SoftmaxCrossEntropyWithLogits", name, logits, labels)
    if logits.shape is not None and labels.shape is not None and logits.shape != labels.shape:
        raise InvalidArgumentError(
            f"logits and labels must have the same shape, got logits shape "
            f"{format_shape(logits.shape)} and labels shape {format_shape(labels.shape)}")
    batch = None if logits.shape is None else logits.shape[:1]
    op = _make("SoftmaxCrossEntropyWithLogits", [logits, labels],
               [(logits.dtype, batch), (logits.dtype, logits.shape)], name=name)
    return op.outputs[0]


softmax_cross_entropy_with_logits_v2 = softmax_cross_entropy_with_logits


def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None) -> Tensor:
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels)
    batch = None if logits.shape is None else logits.shape[:1]
    op = _make("SparseSoftmaxCrossEntropyWithLogits", [logits, labels],
               [(logits.dtype, batch), (logits.dtype, logits.shape)], name=name)
    return op.outputs[0]


def _dense(slices: IndexedSlices) -> Tensor:
    """An IndexedSlices as a dense tensor (duplicate rows summed), like tf.convert_to_tensor."""
    values = slices.values
    return _make("IndexedSlicesToDense", [values, slices.indices, slices.dense_shape],
                 [(values.dtype, None)], name="IndexedSlicesToDense").outputs[0]


# -- kernels -------------------------------------------------------------------------------------


def _softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _xent(op, args, rt):
    logits, labels = args
    p = _softmax(logits)
    loss = -(labels * np.log(np.maximum(p, np.finfo(p.dtype).tiny))).sum(axis=-1)
    return [loss.astype(logits.dtype), (p - labels).astype(logits.dtype)]


def _sparse_xent(op, args, rt):
    logits, labels = args
    n = logits.shape[-1]
    if np.any((labels < 0) | (labels >= n)):
        bad = labels[(labels < 0) | (labels >= n)][0]
        raise InvalidArgumentError(f"{op.name}: received a label value of {bad} which is "
                                   f"outside the valid range of [0, {n})")
    onehot = np.eye(n, dtype=logits.dtype)[labels]
    return _xent(op, [logits, onehot], rt)


def _gather(op, args, rt):
    params, indices = args
    if indices.size and (indices.min() < 0 or indices.max() >= params.shape[0]):
        bad = indices[(indices < 0) | (indices >= params.shape[0])].flat[0]
        raise InvalidArgumentError(f"{op.name}: indices = {bad} is not in [0, "
                                   f"{params.shape[0]}) (params of {op.inputs[0].name!r})")
    return [params[indices]]


def _matmul(op, args, rt):
    a, b = args
    a = a.T if op.attrs["transpose_a"] else a
    b = b.T if op.attrs["transpose_b"] else b
    if a.shape[1] != b.shape[0]:
        raise InvalidArgumentError(
            f"Matrix size-incompatible: In[0]: {list(args[0].shape)}, In[1]: "
            f"{list(args[1].shape)} [[{{{{node {op.name}}}}}]]")
    return [a @ b]


def _reduce_kernel(fn):
    def compute(op, args, rt):
        axis = op.attrs["axis"]
        axis = tuple(axis) if isinstance(axis, list) else axis
        return [np.asarray(fn(args[0], axis=axis, keepdims=op.attrs["keepdims"]),
                           args[0].dtype)]
    return compute


def _checked_binary(fn):
    def compute(op, args, rt):
        try:
            np.broadcast_shapes(args[0].shape, args[1].shape)
        except ValueError:
            raise InvalidArgumentError(
                f"Incompatible shapes: {list(args[0].shape)} vs. {list(args[1].shape)} "
                f"[[{{{{node {op.name}}}}}]]") from None
        return [np.asarray(fn(args[0], args[1]), args[0].dtype)]
    return compute


def _flops_matmul(op, args, outs):
    a = args[0].T if op.attrs["transpose_a"] else args[0]
    return 2 * a.shape[0] * a.shape[1] * outs[0].shape[1]


def _to_dense(op, args, rt):
    values, indices, shape = args
    dense = np.zeros(tuple(int(d) for d in shape), values.dtype)
    np.add.at(dense, indices, values)
    return [dense]


def _unbroadcast_kernel(op, args, rt):
    grad, like = args
    while grad.ndim > like.ndim:
        grad = grad.sum(axis=0)
    for i, d in enumerate(like.shape):
        if d == 1 and grad.shape[i] != 1:
            grad = grad.sum(axis=i, keepdims=True)
    return [grad]


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


def _one(fn):
    return lambda op, args, rt: [np.asarray(fn(*args), op.outputs[0].dtype.as_numpy_dtype)]


register("Const", lambda op, args, rt: [op.attrs["value"]], flops=lambda *a: 0, gpu=ANY_TYPE)
register("Identity", _one(lambda x: x), flops=lambda *a: 0, gpu=ANY_TYPE)
register("NoOp", lambda op, args, rt: [], flops=lambda *a: 0, gpu=ANY_TYPE)
register("ZerosLike", _one(np.zeros_like), flops=lambda *a: 0, gpu=ANY_TYPE)
register("OnesLike", _one(np.ones_like), flops=lambda *a: 0, gpu=ANY_TYPE)
register("Cast", lambda op, args, rt: [args[0].astype(op.outputs[0].dtype.as_numpy_dtype)],
         gpu=ANY_TYPE)
register("AddV2", _checked_binary(np.add))
register("Sub", _checked_binary(np.subtract))
register("Mul", _checked_binary(np.multiply))
register("RealDiv", _checked_binary(np.divide))
register("AddN", _one(lambda *xs: sum(xs[1:], xs[0])))
register("Neg", _one(np.negative))
register("Square", _one(np.square))
register("Sqrt", _one(np.sqrt))
register("Relu", _one(lambda x: np.maximum(x, 0)))
register("ReluGrad", _one(lambda g, y: g * (y > 0)))
register("Sigmoid", _one(lambda x: 1 / (1 + np.exp(-x))), flops=lambda o, a, outs: 4 * outs[0].size)
register("SigmoidGrad", _one(lambda y, g: g * y * (1 - y)))
register("MatMul", _matmul, flops=_flops_matmul)
register("Sum", _reduce_kernel(np.sum), flops=lambda op, args, outs: args[0].size)
register("Mean", _reduce_kernel(np.mean), flops=lambda op, args, outs: args[0].size)
register("ArgMax", lambda op, args, rt: [np.argmax(args[0], axis=op.attrs["axis"]).astype(
    op.outputs[0].dtype.as_numpy_dtype)], flops=lambda op, args, outs: args[0].size,
    gpu=lambda op: op.inputs[0].dtype.is_floating)
register("GatherV2", _gather, flops=lambda *a: 0, gpu=lambda op: op.inputs[0].dtype.is_floating)
register("SoftmaxCrossEntropyWithLogits", _xent, flops=lambda op, args, outs: 5 * args[0].size)
register("SparseSoftmaxCrossEntropyWithLogits", _sparse_xent,
         flops=lambda op, args, outs: 5 * args[0].size)
register("IndexedSlicesToDense", _to_dense, flops=lambda op, args, outs: args[0].size)
register("Unbroadcast", _unbroadcast_kernel, flops=lambda op, args, outs: args[0].size)
register("ReduceGrad", _reduce_grad_kernel)


def unbroadcast(grad: Tensor, like: Tensor) -> Tensor:
    """Sum ``grad`` down to the shape of ``like`` (the gradient of a broadcast)."""
    if grad.shape is not None and grad.shape == like.shape and None not in grad.shape:
        return grad
    return _make("Unbroadcast", [grad, like], [(grad.dtype, like.shape)]).outputs[0]


def reduce_grad(grad: Tensor, op: Operation, mean: bool) -> Tensor:
    x = op.inputs[0]
    attrs = {"axis": op.attrs["axis"], "keepdims": op.attrs["keepdims"], "mean": mean}
    return _make("ReduceGrad", [grad, x], [(x.dtype, x.shape)], attrs).outputs[0]


def dense_shape_of(params: Tensor) -> Tensor:
    if params.shape is not None and None not in params.shape:
        return constant(np.array(params.shape, np.int64), name="dense_shape")
    raise InvalidArgumentError(f"gather: params {params.name!r} need a fully known shape for "
                               f"a sparse gradient, got {format_shape(params.shape)}")


__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "np", "annotations", "register", "ANY_TYPE", "Operation", "Tensor", "as_dtype",
    "dtype_of", "format_shape", "get_default_graph", "InvalidArgumentError", "IndexedSlices",
    "float32", "int64")]
