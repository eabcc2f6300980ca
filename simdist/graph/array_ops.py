"""Models TF's array ops: tf.constant, placeholder, identity, zeros / ones (``_like``), gather
and embedding_lookup, and the ExpandDims, ConcatV2 and IndexedSlicesToDense ops gradients use.

Each op type is declared once: its builder, then its kernel, FLOPs, device kernels and gradient
(``register``). ``convert_to_tensor`` turns Python values, variables and IndexedSlices into
tensors for every op family.
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.graph.dtypes import as_dtype, dtype_of, float32
from simdist.graph.graph import Operation, Tensor, create_op, format_shape
from simdist.graph.indexed_slices import IndexedSlices
from simdist.graph.registry import (ANY_TYPE, NO_GRADIENT, NOT_DIFFERENTIABLE, no_flops,
                                    numpy_kernel, register)


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


def unary_op(op_type, x, name, dtype=None) -> Tensor:
    """An op of one input whose output has the input's shape (and dtype, unless given)."""
    x = convert_to_tensor(x)
    return create_op(op_type, [x], [(dtype or x.dtype, x.shape)], name=name).outputs[0]


# -- Const ----------------------------------------------------------------------------------------


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
    op = create_op("Const", [], [(dtype, array.shape)], {"value": array, "dtype": dtype}, name)
    return op.outputs[0]


def zeros(shape, dtype=float32, name="zeros") -> Tensor:
    return constant(0, dtype=dtype, shape=shape, name=name)


def ones(shape, dtype=float32, name="ones") -> Tensor:
    return constant(1, dtype=dtype, shape=shape, name=name)


register("Const", lambda op, args, rt: [op.attrs["value"]], flops=no_flops, gpu=ANY_TYPE,
         grad=NOT_DIFFERENTIABLE)


# -- Placeholder ----------------------------------------------------------------------------------


def placeholder(dtype, shape=None, name=None) -> Tensor:
    """tf.compat.v1.placeholder: a value the caller must feed to every run that needs it."""
    dtype = as_dtype(dtype)
    shape = None if shape is None else tuple(shape)
    op = create_op("Placeholder", [], [(dtype, shape)], {"dtype": dtype, "shape": shape},
                   name or "Placeholder")
    return op.outputs[0]


def placeholder_not_fed(op: Operation) -> InvalidArgumentError:
    """TF's error for a placeholder that a run needs but was not fed."""
    t = op.outputs[0]
    shape = "unknown" if t.shape is None else \
        "[" + ",".join("?" if d is None else str(d) for d in t.shape) + "]"
    return InvalidArgumentError(
        f"You must feed a value for placeholder tensor '{op.name}' with dtype "
        f"{t.dtype.name} and shape {shape}\n\t [[{{{{node {op.name}}}}}]]")


def _placeholder_kernel(op, args, rt):
    """Runs only when the placeholder is a run's target: a fed value replaces its output."""
    raise placeholder_not_fed(op)


# TF registers a GPU (DEVICE_DEFAULT) kernel too, so a placeholder goes where its scope asks
register("Placeholder", _placeholder_kernel, flops=no_flops, gpu=ANY_TYPE,
         grad=NOT_DIFFERENTIABLE)


# -- Identity -------------------------------------------------------------------------------------


def identity(x, name=None) -> Tensor:
    return unary_op("Identity", x, name)


def _identity_grad(op, g):
    return [g[0]]


register("Identity", numpy_kernel(lambda x: x), flops=no_flops, gpu=ANY_TYPE,
         grad=_identity_grad)


# -- ZerosLike, OnesLike --------------------------------------------------------------------------


def zeros_like(x, name=None) -> Tensor:
    return unary_op("ZerosLike", x, name)


def ones_like(x, name=None) -> Tensor:
    return unary_op("OnesLike", x, name)


register("ZerosLike", numpy_kernel(np.zeros_like), flops=no_flops, gpu=ANY_TYPE,
         grad=NOT_DIFFERENTIABLE)
register("OnesLike", numpy_kernel(np.ones_like), flops=no_flops, gpu=ANY_TYPE,
         grad=NOT_DIFFERENTIABLE)


# -- GatherV2 -------------------------------------------------------------------------------------


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
    return create_op("GatherV2", [params, indices], [(params.dtype, shape)],
                     name=name).outputs[0]


def embedding_lookup(params, ids, partition_strategy="mod", name=None) -> Tensor:
    """tf.nn.embedding_lookup of one params tensor: a gather placed with the params, as TF
    does (``colocate_with(params)``), so only the rows looked up leave a parameter server
    (a PartitionedVariable: its parts, by ``partition_strategy``)."""
    from simdist.graph.graph import get_default_graph

    if hasattr(params, "_embedding_lookup"):
        return params._embedding_lookup(ids, partition_strategy, name)

    anchor = params if isinstance(params, Operation) else getattr(params, "op", None)
    if anchor is None:
        return gather(params, ids, name=name or "embedding_lookup")
    with get_default_graph().colocate_with(anchor):
        return gather(params, ids, name=name or "embedding_lookup")


def _gather_kernel(op, args, rt):
    params, indices = args
    if indices.size and (indices.min() < 0 or indices.max() >= params.shape[0]):
        bad = indices[(indices < 0) | (indices >= params.shape[0])].flat[0]
        raise InvalidArgumentError(f"{op.name}: indices = {bad} is not in [0, "
                                   f"{params.shape[0]}) (params of {op.inputs[0].name!r})")
    return [params[indices]]


def _gather_grad(op, g):
    params, indices = op.inputs
    if params.shape is None or None in params.shape:
        raise InvalidArgumentError(f"gather: params {params.name!r} need a fully known shape "
                                   f"for a sparse gradient, got {format_shape(params.shape)}")
    dense_shape = constant(np.array(params.shape, np.int32), name="dense_shape")  # TF's int32
    return [IndexedSlices(g[0], indices, dense_shape), None]


register("GatherV2", _gather_kernel, flops=no_flops,
         gpu=lambda op: op.inputs[0].dtype.is_floating, grad=_gather_grad)


# -- IndexedSlicesToDense -------------------------------------------------------------------------


def _dense(slices: IndexedSlices) -> Tensor:
    """An IndexedSlices as a dense tensor (duplicate rows summed), like tf.convert_to_tensor."""
    values = slices.values
    return create_op("IndexedSlicesToDense", [values, slices.indices, slices.dense_shape],
                     [(values.dtype, None)], name="IndexedSlicesToDense").outputs[0]


def _to_dense_kernel(op, args, rt):
    values, indices, shape = args
    dense = np.zeros(tuple(int(d) for d in shape), values.dtype)
    np.add.at(dense, indices, values)
    return [dense]


register("IndexedSlicesToDense", _to_dense_kernel, flops=lambda op, args, outs: args[0].size,
         grad=NO_GRADIENT)


# -- ExpandDims, ConcatV2 (as gradients use them) -------------------------------------------------


def expand_last_dim(x: Tensor) -> Tensor:
    """tf.expand_dims(x, -1), its result's shape left unknown."""
    return create_op("ExpandDims", [x], [(x.dtype, None)]).outputs[0]


def concat_rows(values: list) -> Tensor:
    """tf.concat(values, axis=0), its result's shape left unknown."""
    return create_op("ConcatV2", values, [(values[0].dtype, None)]).outputs[0]


register("ExpandDims", lambda op, args, rt: [args[0][..., None]], flops=no_flops,
         grad=NO_GRADIENT)
def _concat_grad(op, g):
    """Each input's rows of the gradient (a gather of them), for a concat along axis 0 of
    inputs of known rows (a partitioned variable's value); none otherwise."""
    rows = [t.shape[0] if t.shape else None for t in op.inputs]
    if op.attrs.get("axis", 0) != 0 or None in rows:
        return [None] * len(rows)
    starts = np.cumsum([0] + rows)
    return [gather(g[0], constant(np.arange(a, b, dtype=np.int32), name="concat_grad/rows"),
                   name="concat_grad") for a, b in zip(starts, starts[1:])]


register("ConcatV2", lambda op, args, rt: [np.concatenate(args, op.attrs.get("axis", 0))],
         flops=no_flops, grad=_concat_grad)


# -- Fill -------------------------------------------------------------------------------------


def fill(dims, value, name=None) -> Tensor:
    """tf.fill(dims, value): a tensor of shape ``dims`` (a list of ints) holding ``value``
    (a scalar tensor, e.g. a variable's value read when the op runs)."""
    if not isinstance(dims, (list, tuple)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise InvalidArgumentError(f"fill: dims={dims!r}, expected a list of ints >= 0")
    value = convert_to_tensor(value)
    shape = constant(list(dims), dtype="int32", name="Fill/dims") if dims else \
        constant(np.zeros(0, np.int32), name="Fill/dims")
    return create_op("Fill", [shape, value], [(value.dtype, tuple(dims))], name=name).outputs[0]


register("Fill", lambda op, args, rt: [np.full(tuple(args[0]), args[1], args[1].dtype)],
         flops=no_flops, gpu=ANY_TYPE, grad=NOT_DIFFERENTIABLE)
