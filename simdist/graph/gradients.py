"""Models tf.gradients: reverse-mode differentiation that adds gradient ops to the graph.

Walks back from ``ys`` to ``xs`` through the ops between them, calls each op type's gradient
function (registered here) and sums the gradients that reach a tensor from several consumers.
A ``gather`` gives an IndexedSlices (sparse); several IndexedSlices of one tensor are
concatenated, so duplicate indices stay and are summed when applied.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from . import ops
from .graph import Tensor, get_default_graph
from .indexed_slices import IndexedSlices
from .registry import OP_DEFS, OpDef, gradient_function

# -- gradient functions: (op, grads of its outputs) -> grads of its inputs -----------------------


def _grad(op_type):
    def wrap(fn):
        old = OP_DEFS[op_type]
        OP_DEFS[op_type] = OpDef(old.name, old.compute, old.flops, old.gpu, fn, old.stateful)
        return fn
    return wrap


@_grad("Identity")
def _identity_grad(op, g):
    return [g[0]]


@_grad("AddV2")
def _add_grad(op, g):
    x, y = op.inputs
    return [ops.unbroadcast(g[0], x), ops.unbroadcast(g[0], y)]


@_grad("AddN")
def _add_n_grad(op, g):
    return [g[0]] * len(op.inputs)


@_grad("Sub")
def _sub_grad(op, g):
    x, y = op.inputs
    return [ops.unbroadcast(g[0], x), ops.unbroadcast(ops.negative(g[0]), y)]


@_grad("Mul")
def _mul_grad(op, g):
    x, y = op.inputs
    return [ops.unbroadcast(g[0] * y, x), ops.unbroadcast(g[0] * x, y)]


@_grad("RealDiv")
def _div_grad(op, g):
    x, y = op.inputs
    return [ops.unbroadcast(g[0] / y, x),
            ops.unbroadcast(ops.negative(g[0]) * x / ops.square(y), y)]


@_grad("Neg")
def _neg_grad(op, g):
    return [ops.negative(g[0])]


@_grad("Square")
def _square_grad(op, g):
    return [g[0] * (op.inputs[0] * 2.0)]


@_grad("Sqrt")
def _sqrt_grad(op, g):
    return [g[0] / (op.outputs[0] * 2.0)]


@_grad("Relu")
def _relu_grad(op, g):
    return [ops._make("ReluGrad", [g[0], op.outputs[0]], [(g[0].dtype, g[0].shape)]).outputs[0]]


@_grad("Sigmoid")
def _sigmoid_grad(op, g):
    y = op.outputs[0]
    return [ops._make("SigmoidGrad", [y, g[0]], [(y.dtype, y.shape)]).outputs[0]]


@_grad("MatMul")
def _matmul_grad(op, g):
    a, b = op.inputs
    ta, tb = op.attrs["transpose_a"], op.attrs["transpose_b"]
    if not ta and not tb:
        return [ops.matmul(g[0], b, transpose_b=True), ops.matmul(a, g[0], transpose_a=True)]
    if ta and not tb:
        return [ops.matmul(b, g[0], transpose_b=True), ops.matmul(a, g[0])]
    if not ta and tb:
        return [ops.matmul(g[0], b), ops.matmul(g[0], a, transpose_a=True)]
    return [ops.matmul(b, g[0], transpose_a=True, transpose_b=True),
            ops.matmul(g[0], a, transpose_a=True, transpose_b=True)]


@_grad("Sum")
def _sum_grad(op, g):
    return [ops.reduce_grad(g[0], op, mean=False)]


@_grad("Mean")
def _mean_grad(op, g):
    return [ops.reduce_grad(g[0], op, mean=True)]


@_grad("SoftmaxCrossEntropyWithLogits")
def _xent_grad(op, g):
    per_example = ops._make("ExpandDims", [g[0]], [(g[0].dtype, None)]).outputs[0]
    return [per_example * op.outputs[1], None]


_grad("SparseSoftmaxCrossEntropyWithLogits")(_xent_grad)


@_grad("GatherV2")
def _gather_grad(op, g):
    params, indices = op.inputs
    return [IndexedSlices(g[0], indices, ops.dense_shape_of(params)), None]


@_grad("Cast")
def _cast_grad(op, g):
    return [ops.cast(g[0], op.inputs[0].dtype)] if op.inputs[0].dtype.is_floating else [None]


_NOT_DIFFERENTIABLE = {"ArgMax", "ZerosLike", "OnesLike", "Const", "Placeholder"}

ops.register("ExpandDims", lambda op, args, rt: [args[0][..., None]], flops=lambda *a: 0)

# -- the algorithm --------------------------------------------------------------------------------


def _aggregate(grads: list):
    """Sum the gradients reaching one tensor (TF's AddN; IndexedSlices concatenated)."""
    grads = [g for g in grads if g is not None]
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    if all(isinstance(g, IndexedSlices) for g in grads):
        values = ops._make("ConcatV2", [g.values for g in grads],
                           [(grads[0].values.dtype, None)]).outputs[0]
        indices = ops._make("ConcatV2", [g.indices for g in grads],
                            [(grads[0].indices.dtype, None)]).outputs[0]
        return IndexedSlices(values, indices, grads[0].dense_shape)
    return ops.add_n([ops.convert_to_tensor(g) for g in grads])


ops.register("ConcatV2", lambda op, args, rt: [__import__("numpy").concatenate(args)],
             flops=lambda *a: 0)


def gradients(ys, xs, grad_ys=None, name="gradients"):
    """tf.gradients: d(sum of ys)/d(x) for every x in ``xs`` (None where x does not matter)."""
    ys = [ops.convert_to_tensor(y) for y in (ys if isinstance(ys, (list, tuple)) else [ys])]
    single = not isinstance(xs, (list, tuple))
    xs = [ops.convert_to_tensor(x) for x in ([xs] if single else xs)]
    graph = get_default_graph()
    # the ops on a path from some x to some y
    reach_back = set()
    stack = [y.op for y in ys]
    while stack:
        op = stack.pop()
        if op in reach_back:
            continue
        reach_back.add(op)
        stack.extend(t.op for t in op.inputs)
    reach_fwd = set()
    stack = [x.op for x in xs]
    while stack:
        op = stack.pop()
        if op in reach_fwd or op not in reach_back:
            continue
        reach_fwd.add(op)
        stack.extend(c for t in op.outputs for c in t.consumers_list)
    between = reach_back & reach_fwd
    pending: dict[Tensor, list] = {}
    with graph.name_scope(name), graph.control_dependencies(None):
        for i, y in enumerate(ys):
            seed = (ops.ones_like(y) if grad_ys is None or grad_ys[i] is None
                    else ops.convert_to_tensor(grad_ys[i]))
            pending.setdefault(y, []).append(seed)
        for op in sorted(between, key=lambda o: o._id, reverse=True):
            out_grads = [_aggregate(pending.get(t, [])) for t in op.outputs]
            for t, g in zip(op.outputs, out_grads):
                pending[t] = [g]
            if op.type in _NOT_DIFFERENTIABLE or all(g is None for g in out_grads) \
                    or not op.inputs or not any(t.op in between for t in op.inputs):
                continue
            out_grads = [ops.zeros_like(t) if g is None else g
                         for t, g in zip(op.outputs, out_grads)]
            if op.type == "VariableV2" or op.type == "Placeholder":
                continue
            in_grads = gradient_function(op)(op, out_grads)
            for t, g in zip(op.inputs, in_grads):
                if g is not None and t.op in between:
                    pending.setdefault(t, []).append(g)
        result = [_aggregate(pending.get(x, [])) for x in xs]
    for x, g in zip(xs, result):
        if g is not None and not isinstance(g, IndexedSlices) and g.dtype != x.dtype:
            raise InvalidArgumentError(f"gradient of {x.name!r} has dtype {g.dtype.name}")
    return result
