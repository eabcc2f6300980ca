"""Models TF1's partitioned variables (``tensorflow/python/ops/partitioned_variables.py`` and
``PartitionedVariable`` of ``variables.py``): a variable cut along one axis into parts, each
an ordinary variable ``NAME/part_K`` that ``replica_device_setter`` places on a ps task of
its own, as TF1 shards a large variable (an embedding) over parameter servers.

    with tf.variable_scope("emb", partitioner=tf.fixed_size_partitioner(3)):
        w = tf.get_variable("w", shape=[10, 4])   # parts emb/w/part_0..2: 4, 3 and 3 rows

A partitioner is called as TF calls it, ``partitioner(shape=..., dtype=...)``, and returns
the parts per axis; the first ``rows % parts`` parts get one extra row (TF's ``_iter_slices``).
Each part carries TF's ``_save_slice_info`` (its slice of the whole: ``"10 4 0,4:0,4"``).
The TF2 partitioners (``FixedShardsPartitioner``...) are in
``simdist/distribute/sharded_variable.py``; for the same variable they give the same parts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from simdist.graph.dtypes import as_dtype, float32, string
from simdist.graph.graph import Tensor, format_shape, get_default_graph


def _element_bytes(dtype, bytes_per_string: int) -> int:
    dtype = as_dtype(dtype)
    return bytes_per_string if dtype == string else np.dtype(dtype.as_numpy_dtype).itemsize


def _dims(shape) -> list[int]:
    return [int(d) for d in (shape.as_list() if hasattr(shape, "as_list") else shape)]


def fixed_size_partitioner(num_shards, axis=0):
    """tf.compat.v1.fixed_size_partitioner: ``num_shards`` parts along ``axis`` (at most
    one per row)."""
    def _partitioner(shape, **unused_args):
        dims = _dims(shape)
        partitions = [1] * len(dims)
        partitions[axis] = min(num_shards, dims[axis])
        return partitions
    return _partitioner


def min_max_variable_partitioner(max_partitions=1, axis=0, min_slice_size=256 << 10,
                                 bytes_per_string_element=16):
    """tf.compat.v1.min_max_variable_partitioner: as many parts as keep each at least
    ``min_slice_size`` bytes, at most ``max_partitions`` and the rows of ``axis``."""
    def _partitioner(shape, dtype):
        dims = _dims(shape)
        if axis >= len(dims):
            raise ValueError(f"Cannot partition variable along axis {axis} when shape is "
                             f"only {tuple(dims)}")
        total = math.prod(dims) * _element_bytes(dtype, bytes_per_string_element)
        partitions = [1] * len(dims)
        partitions[axis] = max(1, min(dims[axis], max_partitions,
                                      int(math.ceil(total / min_slice_size))))
        return partitions
    return _partitioner


def variable_axis_size_partitioner(max_shard_bytes, axis=0, bytes_per_string_element=16,
                                   max_shards=None):
    """tf.compat.v1.variable_axis_size_partitioner: as few parts along ``axis`` as keep each
    below ``max_shard_bytes`` (one row a part at most), at most ``max_shards``."""
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError(
            "Both max_shard_bytes and bytes_per_string_element must be positive. "
            f"Currently, max_shard_bytes is {max_shard_bytes} and"
            f"bytes_per_string_element is {bytes_per_string_element}")
    if max_shards and max_shards < 1:
        raise ValueError("max_shards must be positive.")

    def _partitioner(shape, dtype):
        dims = _dims(shape)
        partitions = [1] * len(dims)
        element = _element_bytes(dtype, bytes_per_string_element)
        bytes_per_slice = 1.0 * (math.prod(dims) / dims[axis]) * element
        slices_per_shard = max(1, math.floor(max_shard_bytes / bytes_per_slice))
        shards = int(math.ceil(1.0 * dims[axis] / slices_per_shard))
        partitions[axis] = min(max_shards, shards) if max_shards else shards
        return partitions
    return _partitioner


class SaveSliceInfo(NamedTuple):
    """TF's ``Variable.SaveSliceInfo``: where a part lies in the whole variable."""

    full_name: str
    full_shape: list
    var_offset: list
    var_shape: list

    @property
    def spec(self) -> str:
        """TF's slice spec: the full shape, then ``offset,length`` per axis ("4 2 0,2:0,2")."""
        return " ".join(str(d) for d in self.full_shape) + " " + ":".join(
            f"{o},{s}" for o, s in zip(self.var_offset, self.var_shape))


class PartitionedVariable:
    """tf.compat.v1 PartitionedVariable: the parts of one variable, in order; iterating
    gives the parts, ``as_tensor()`` (or any op taking it) concatenates them."""

    def __init__(self, name, shape, dtype, variable_list, partitions):
        if not isinstance(variable_list, (list, tuple)):
            raise TypeError(f"variable_list is not a list or tuple: {variable_list}")
        if not isinstance(partitions, (list, tuple)):
            raise TypeError(f"partitions is not a list or tuple: {partitions}")
        if not all(p >= 1 for p in partitions):
            raise ValueError(f"partition values must be positive: {partitions}")
        if not variable_list:
            raise ValueError("variable_list may not be empty")
        self._variable_list = sorted(variable_list,
                                     key=lambda v: v._get_save_slice_info().var_offset)
        self._name, self._shape, self._dtype = name, tuple(shape), as_dtype(dtype)
        self._partitions = list(partitions)
        self._cached = None

    def __iter__(self):
        return iter(self._variable_list)

    def __len__(self):
        return len(self._variable_list)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self):
        return self._shape

    def get_shape(self):
        return self._shape

    def _get_variable_list(self):
        return self._variable_list

    def _get_partitions(self):
        return self._partitions

    def _partition_axes(self):
        if all(p == 1 for p in self._partitions):
            return [0]
        return [i for i, p in enumerate(self._partitions) if p > 1]

    def _concat(self) -> Tensor:
        """The whole value, the parts concatenated (ops named TF's way, under the control
        dependencies of the scope)."""
        from simdist.graph.array_ops import identity
        graph = get_default_graph()
        if len(self._variable_list) == 1:
            with graph.name_scope(None):
                return identity(self._variable_list[0]._as_tensor(), name=self._name)
        axis = self._partition_axes()[0]
        with graph.name_scope(self._name + "/ConcatPartitions/"):
            parts = [v._as_tensor() for v in self._variable_list]
            shape = list(self._shape)
            concatenated = graph.create_op("ConcatV2", parts, [(self._dtype, tuple(shape))],
                                           {"axis": axis}, "concat").outputs[0]
        with graph.name_scope(None):
            return identity(concatenated, name=self._name)

    def as_tensor(self) -> Tensor:
        """The whole value, built once, outside any control dependencies."""
        with get_default_graph().control_dependencies(None):
            if self._cached is None:
                self._cached = self._concat()
            return self._cached

    def _as_tensor(self) -> Tensor:  # what convert_to_tensor asks of a variable
        return self.as_tensor()

    def assign(self, value, name=None):
        """Assign each part its slice of ``value`` (a list of values per part, another
        PartitionedVariable, or a whole value known when the graph is built)."""
        if isinstance(value, PartitionedVariable):
            values = list(value)
        elif isinstance(value, list) and len(value) == len(self._variable_list) and \
                not isinstance(value[0], (int, float)):
            values = value
        else:
            if isinstance(value, Tensor):
                raise ValueError(f"PartitionedVariable {self._name!r}: assign a list of one "
                                 "value per part; a whole tensor needs TF's Split, which "
                                 "simdist does not model")
            whole = np.asarray(value, self._dtype.as_numpy_dtype)
            values = [whole[tuple(slice(o, o + s) for o, s in zip(info.var_offset,
                                                                   info.var_shape))]
                      for info in (v._get_save_slice_info() for v in self._variable_list)]
        return [v.assign(x, name=name) for v, x in zip(self._variable_list, values)]

    def _embedding_lookup(self, ids, partition_strategy="mod", name=None) -> Tensor:
        """tf.nn.embedding_lookup over the parts, as TF's: id ``i`` is row ``i // P`` of part
        ``i % P`` ("mod", TF's default) or the part whose rows hold it ("div"); each part
        gathers its own rows where it lives, so only those rows travel."""
        from simdist.base.errors import InvalidArgumentError
        from simdist.graph.array_ops import constant, gather
        if partition_strategy not in ("mod", "div"):
            raise ValueError(f"Unrecognized partition strategy: {partition_strategy}")
        graph = get_default_graph()
        parts, name = self._variable_list, name or "embedding_lookup"
        if len(parts) == 1:
            with graph.colocate_with(parts[0].op):
                return gather(parts[0]._as_tensor(), ids, name=name)
        known = ids.op.attrs["value"] if isinstance(ids, Tensor) and ids.op.type == "Const" \
            else None if isinstance(ids, Tensor) else ids
        flat = None if known is None else np.asarray(known)
        if flat is None or flat.ndim != 1 or flat.dtype.kind not in "iu":
            raise InvalidArgumentError(
                f"embedding_lookup over PartitionedVariable {self._name!r} ({len(parts)} "
                f"parts): ids {ids!r} must be a vector of ints known when the graph is built "
                "(TF's dynamic_partition and dynamic_stitch are not modeled)")
        rows = [v.shape[0] for v in parts]
        starts = np.cumsum([0] + rows)
        if flat.size and (flat.min() < 0 or flat.max() >= starts[-1]):
            raise InvalidArgumentError(f"embedding_lookup: ids {flat.tolist()} must be in "
                                       f"[0, {starts[-1]})")
        if partition_strategy == "mod":
            owner, local = flat % len(parts), flat // len(parts)
        else:
            owner = np.searchsorted(starts, flat, side="right") - 1
            local = flat - starts[owner]
        with graph.name_scope(name):
            pieces, order = [], []
            for p, part in enumerate(parts):
                where = np.nonzero(owner == p)[0]
                if where.size:
                    with graph.colocate_with(part.op):
                        pieces.append(gather(part._as_tensor(),
                                             constant(local[where].astype(np.int32))))
                    order.extend(where.tolist())
            shape = (len(order), *self._shape[1:])
            stacked = pieces[0] if len(pieces) == 1 else graph.create_op(
                "ConcatV2", pieces, [(self._dtype, shape)], {"axis": 0}, "concat").outputs[0]
            position = np.argsort(np.asarray(order, np.int64)).astype(np.int32)
            return gather(stacked, constant(position), name="stitch")

    def __repr__(self):
        return (f"<simdist PartitionedVariable '{self._name}' "
                f"shape={format_shape(self._shape)} partitions={self._partitions}>")


def _call_partitioner(partitioner, shape, dtype) -> list:
    """TF's ``_call_partitioner``: the partitioner's answer, checked."""
    if any(d is None for d in shape):
        raise ValueError("Shape of a new partitioned variable must be fully defined, but "
                         f"instead was {format_shape(shape)}.")
    if len(shape) < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1, shape: "
                         f"{format_shape(shape)}")
    slicing = partitioner(shape=tuple(shape), dtype=dtype)
    if not isinstance(slicing, Sequence):
        raise ValueError(f"Partitioner must return a sequence, but saw: {slicing}")
    if len(slicing) != len(shape):
        raise ValueError("Partitioner returned a partition list that does not match the "
                         f"Variable's rank: {slicing} vs. {format_shape(shape)}")
    if any(p < 1 for p in slicing):
        raise ValueError(f"Partitioner returned zero partitions for some axes: {slicing}")
    if sum(p > 1 for p in slicing) > 1:
        raise ValueError("Can only slice a variable along one dimension: shape: "
                         f"{format_shape(shape)}, partitioning: {slicing}")
    return list(slicing)


def _iter_slices(full_shape, num_slices, slice_dim):
    """(offset, shape) of each part: the first ``rows % parts`` parts one row longer."""
    extra = full_shape[slice_dim] % num_slices
    offset = [0] * len(full_shape)
    least = full_shape[slice_dim] // num_slices
    for i in range(num_slices):
        shape = list(full_shape)
        shape[slice_dim] = least + (1 if i < extra else 0)
        yield offset[:], shape
        offset[slice_dim] += shape[slice_dim]


def partitioned_variable(name, partitioner, shape, dtype, initializer, trainable,
                         collections, reuse) -> PartitionedVariable:
    """TF's ``_VariableStore._get_partitioned_variable``: the parts of ``name``, made (or
    with reuse found) as TF makes them."""
    from simdist.graph.array_ops import convert_to_tensor
    from simdist.graph.variables import (Initializer, Variable, glorot_uniform_initializer,
                                         zeros_initializer)
    graph = get_default_graph()
    existing = graph._vars_by_name.get(name)
    if existing is not None and not isinstance(existing, PartitionedVariable):
        raise ValueError(
            "A partitioner was provided, but an unpartitioned version of the variable was "
            f"found: {name}.  Perhaps a variable of the same name was already created "
            "without partitioning?")
    value = None
    if isinstance(initializer, Tensor):
        if initializer.op.type != "Const":
            raise ValueError(f"get_variable {name!r}: a partitioned variable's tensor "
                             "initializer must be a constant here (slicing a computed tensor "
                             "needs TF's Slice, which simdist does not model)")
        value, dtype = np.asarray(initializer.op.attrs["value"]), initializer.dtype
        shape = value.shape if shape is None else shape  # TF: only a tensor gives the shape
    elif isinstance(initializer, (np.ndarray, np.generic, list, int, float)):
        value = np.asarray(initializer, None if dtype is None
                           else as_dtype(dtype).as_numpy_dtype)
        dtype = dtype or value.dtype
    if shape is None:
        raise ValueError(f"Shape of a new partitioned variable ({name}) must be fully "
                         "defined, but instead was <unknown>.")
    shape, dtype = tuple(int(d) for d in shape), as_dtype(dtype or float32)
    partitions = _call_partitioner(partitioner, shape, dtype)
    if existing is not None:
        if reuse is False or reuse is None:
            raise ValueError(f"Partitioned variable with name {name} already exists. Did you "
                             "mean to set reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
        if tuple(existing.get_shape()) != shape:
            raise ValueError(f"Trying to reuse partitioned variable {name}, but specified "
                             f"shape {format_shape(shape)} and found shape "
                             f"{format_shape(existing.get_shape())}.")
        if existing._get_partitions() != partitions:
            raise ValueError(f"Trying to reuse partitioned variable {name}, but specified "
                             f"partitions {partitions} and found partitions "
                             f"{existing._get_partitions()}.")
        return existing
    if reuse is True:
        raise ValueError(f"PartitionedVariable {name} does not exist, or was not created "
                         "with tf.get_variable(). Did you mean to set reuse=False or "
                         "reuse=tf.AUTO_REUSE in VarScope?")
    slice_dim = next((i for i, p in enumerate(partitions) if p > 1), 0)
    num_slices = partitions[slice_dim]
    if initializer is None:
        initializer = glorot_uniform_initializer() if dtype.is_floating \
            else zeros_initializer()
    parts = []
    for i, (offset, part_shape) in enumerate(_iter_slices(list(shape), num_slices, slice_dim)):
        for o, d in zip(offset, shape):  # TF's _PartitionInfo
            if o < 0 or o >= d:
                raise ValueError(f"Expected 0 <= offset < shape but found offset={o}, "
                                 f"shape={d} for var_offset={offset}, full_shape={list(shape)}")
        part_name = f"{name}/part_{i}"
        if value is not None:
            part_value = value[tuple(slice(o, o + s) for o, s in zip(offset, part_shape))]
            op_name = "Const"
        elif isinstance(initializer, Initializer):
            part_value = initializer(part_shape, dtype, seed=len(graph._ops), full_shape=shape)
            op_name = initializer.op_name
        else:  # a function, called as TF calls it
            part_value = np.asarray(initializer(part_shape, dtype=dtype, partition_info=None),
                                    dtype.as_numpy_dtype)
            op_name = "Const"
        with graph.name_scope(None):
            part = Variable(
                lambda v=part_value, n=op_name: convert_to_tensor(v, dtype=dtype, name=n),
                trainable=trainable, name=part_name, collections=collections)
        part._set_save_slice_info(SaveSliceInfo(name, list(shape), offset, part_shape))
        graph._vars_by_name[part_name] = part
        parts.append(part)
    result = PartitionedVariable(name, shape, dtype, parts, partitions)
    graph._vars_by_name[name] = result
    return result


def create_partitioned_variables(shape, slicing, initializer, dtype=float32, trainable=True,
                                 collections=None, name=None, reuse=None) -> list:
    """tf.compat.v1.create_partitioned_variables (deprecated in TF): the parts of a variable
    cut as ``slicing`` says, in the variable scope ``name`` (default "PartitionedVariable",
    made unique)."""
    from simdist.graph.variables import _scope_state, variable_scope
    if len(shape) != len(slicing):
        raise ValueError("The 'shape' and 'slicing' of a partitioned Variable must have the "
                         f"length: shape: {list(shape)}, slicing: {list(slicing)}")
    if len(shape) < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1: shape: {shape}")
    with variable_scope(name, "PartitionedVariable", reuse=reuse):
        scope, scope_reuse, _ = _scope_state(get_default_graph())[-1]
        return list(partitioned_variable(scope, lambda **unused: list(slicing), shape, dtype,
                                         initializer, trainable, collections, scope_reuse))


__all__ = ["PartitionedVariable", "SaveSliceInfo", "create_partitioned_variables",
           "fixed_size_partitioner", "min_max_variable_partitioner",
           "variable_axis_size_partitioner"]
