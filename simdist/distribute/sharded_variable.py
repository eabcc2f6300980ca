"""Variables on parameter servers: ``tf.distribute.experimental.partitioners`` and
``ShardedVariable`` (TF 2.21's ``tensorflow/python/distribute/sharded_variable.py``).

A partitioner is called as TF calls it, ``partitioner(shape, dtype)``, and returns the number
of partitions per axis (``[3, 1]``: three shards along the first axis). ParameterServerStrategy
cuts a variable along its first axis into that many shards, the first ``rows % shards`` shards
one row longer than the others ("div" partitioning), and places each shard on a ps task in
turn. A ``ShardedVariable`` acts as one tensor: reading it concatenates the shards, assigning
it splits the value, and an embedding lookup reads only the rows it needs from each shard.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from simdist.base.errors import (FailedPreconditionError, InvalidArgumentError, brief,
                                 stricter_than_tf)


def _positive(cls, what: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidArgumentError(f"{cls}: argument `{what}` must be an int >= 1, got "
                                   f"{brief(value)}")


def _shape_and_element_bytes(cls, shape, dtype, bytes_per_string: int):
    shape = tuple(shape)
    if not shape:
        raise InvalidArgumentError(f"{cls}: cannot partition a scalar (shape ()): "
                                   "ParameterServerStrategy places rank-0 variables whole")
    if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0
           for d in shape):
        raise InvalidArgumentError(f"{cls}: shape {brief(shape)} must be fully defined "
                                   "(ints >= 0)")
    dtype = np.dtype(dtype)
    size = bytes_per_string if dtype.kind in "SUO" else dtype.itemsize
    return shape, size


class Partitioner:
    """``tf.distribute.experimental.partitioners.Partitioner``: ``__call__(shape, dtype)``
    returns the partitions per axis; only the first axis may be more than 1."""

    def __call__(self, shape, dtype, axis=0):
        raise NotImplementedError


def _axis_result(shape, axis, error=IndexError) -> list:
    """[1] per axis, or TF's error for an ``axis`` out of range (IndexError from
    FixedShardsPartitioner and MaxSizePartitioner, ValueError from MinSizePartitioner)."""
    if not -len(shape) <= axis < len(shape):
        raise IndexError("list index out of range") if error is IndexError else ValueError(
            f"Cannot partition variable along axis {axis} when shape is only {shape}")
    return [1] * len(shape)


class FixedShardsPartitioner(Partitioner):
    """A fixed number of shards (no more than the rows). As TF, ``num_shards`` is not
    checked here (``FixedShardsPartitioner(0)`` answers ``[0, 1]``); ParameterServerStrategy
    refuses fewer than one shard (``num_shards`` below)."""

    def __init__(self, num_shards: int):
        if isinstance(num_shards, bool) or not isinstance(num_shards, (int, np.integer)):
            raise InvalidArgumentError(f"FixedShardsPartitioner: argument `num_shards` must "
                                       f"be an int, got {brief(num_shards)}")
        self._num_shards = int(num_shards)

    def __call__(self, shape, dtype, axis=0):
        shape, _ = _shape_and_element_bytes("FixedShardsPartitioner", shape, dtype, 1)
        result = _axis_result(shape, axis)
        result[axis] = min(self._num_shards, shape[axis])
        return result


class MinSizePartitioner(Partitioner):
    """As many shards as keep each at least ``min_shard_bytes`` (256 KiB by default), at most
    ``max_shards`` (1 by default), at least one."""

    def __init__(self, min_shard_bytes: int = 256 << 10, max_shards: int = 1,
                 bytes_per_string: int = 16):
        for what, value in (("min_shard_bytes", min_shard_bytes), ("max_shards", max_shards),
                            ("bytes_per_string", bytes_per_string)):
            _positive("MinSizePartitioner", what, value)
        self._min_shard_bytes, self._max_shards = min_shard_bytes, max_shards
        self._bytes_per_string = bytes_per_string

    def __call__(self, shape, dtype, axis=0):
        shape, element = _shape_and_element_bytes("MinSizePartitioner", shape, dtype,
                                                  self._bytes_per_string)
        result = _axis_result(shape, axis, ValueError)
        total = math.prod(shape) * element
        result[axis] = max(1, min(shape[axis], self._max_shards,
                                  math.ceil(total / self._min_shard_bytes)))
        return result


class MaxSizePartitioner(Partitioner):
    """As few shards as keep each at most ``max_shard_bytes`` (whole rows: a row larger than
    that is a shard of its own), at most ``max_shards`` when given."""

    def __init__(self, max_shard_bytes: int, max_shards: int | None = None,
                 bytes_per_string: int = 16):
        _positive("MaxSizePartitioner", "max_shard_bytes", max_shard_bytes)
        if max_shards is not None:
            _positive("MaxSizePartitioner", "max_shards", max_shards)
        _positive("MaxSizePartitioner", "bytes_per_string", bytes_per_string)
        self._max_shard_bytes, self._max_shards = max_shard_bytes, max_shards
        self._bytes_per_string = bytes_per_string

    def __call__(self, shape, dtype, axis=0):
        shape, element = _shape_and_element_bytes("MaxSizePartitioner", shape, dtype,
                                                  self._bytes_per_string)
        result = _axis_result(shape, axis)
        if shape[axis] == 0:  # TF divides by zero here
            raise InvalidArgumentError(f"MaxSizePartitioner: shape {shape} has no rows to "
                                       "partition")
        row_bytes = math.prod(shape) / shape[axis] * element
        rows_per_shard = max(1, math.floor(self._max_shard_bytes / row_bytes)) \
            if row_bytes else shape[axis]
        shards = math.ceil(shape[axis] / rows_per_shard)
        if self._max_shards:
            shards = min(self._max_shards, shards)
        result[axis] = shards
        return result


def shard_offsets(rows: int, num_shards: int) -> list[int]:
    """Where each shard starts, and ``rows`` at the end: the first ``rows % num_shards``
    shards get one extra row (TF's "div" partitioning)."""
    base, extra = divmod(rows, num_shards)
    offsets = [0]
    for i in range(num_shards):
        offsets.append(offsets[-1] + base + (1 if i < extra else 0))
    return offsets


def num_shards(partitioner, name: str, shape: tuple, dtype) -> int:
    """The shards ``partitioner`` asks for a variable, checked as TF checks them (and more
    shards than rows refused)."""
    partitions = partitioner(shape=shape, dtype=dtype)
    try:
        parts = [int(p) for p in partitions]
    except (TypeError, ValueError):
        parts = []
    if not parts or parts[0] < 1 or any(p != 1 for p in parts[1:]):
        raise InvalidArgumentError(
            f"variable_partitioner must return a list whose elements are 1 besides the first "
            f"(>= 1), got {brief(partitions)} for variable {name!r} of shape {shape}")
    if parts[0] > shape[0]:
        raise InvalidArgumentError(
            f"variable_partitioner asks for {parts[0]} shards of variable {name!r}, which has "
            f"only {shape[0]} rows (shape {shape}): at most one shard per row"
            + stricter_than_tf("TF quietly makes one shard per row, and the partitioner "
                               "meant something else"))
    return parts[0]


def summed_rows(rows: np.ndarray, values: np.ndarray):
    """A sparse gradient's duplicate rows summed (rows sorted), as TF's scatter ops add the
    contributions of repeated indices (``ResourceScatterAdd``/``Sub``)."""
    unique, where = np.unique(rows.reshape(-1), return_inverse=True)
    if unique.size == rows.size:
        return rows, values
    summed = np.zeros((unique.size, *values.shape[rows.ndim:]), values.dtype)
    np.add.at(summed, where, values.reshape(-1, *values.shape[rows.ndim:]))
    return unique, summed


class IndexedSlices(NamedTuple):
    """``tf.IndexedSlices``: the rows ``indices`` of a tensor (a sparse gradient, as an
    embedding lookup's), with their ``values``."""

    values: np.ndarray
    indices: np.ndarray


class Variable:
    """A ``tf.Variable`` that lives on one parameter server (a whole variable, or one shard
    of a ``ShardedVariable``). ``device`` is TF's string; ``task`` the ps task ("ps:1").

    It is a handle: the value lives on its ps (``home``, the ps's server when that runs on
    this rank), read and written by messages (``strategy.read``, ``strategy.update``...).
    In one process ``numpy()`` and ``assign()`` reach the ps's value directly, at no
    simulated cost (a test's view); across MPI ranks only a handle whose ps is on this rank
    can."""

    def __init__(self, name: str, value: np.ndarray, task: str, key: int, home=None):
        self.name = f"{name}:0"
        self.task = task
        self.device = f"/job:ps/replica:0/task:{task.split(':')[1]}/device:CPU:0"
        self.key = key  # its number in the strategy (what a request to its ps names)
        value = np.asarray(value)
        self._shape, self._dtype, self._nbytes = value.shape, value.dtype, value.nbytes
        self._home = home

    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def nbytes(self) -> int:
        return self._nbytes

    @property
    def lost(self) -> bool:
        """Its ps failed since it was last assigned (known where its ps runs)."""
        return self._local("lost").lost.__contains__(self.key)

    def _local(self, what: str):
        if self._home is None:
            raise FailedPreconditionError(
                f"variable {self.name!r} lives on {self.task}, on another MPI rank: its {what} "
                "travels by message (strategy.read(..., ctx=ctx) on the coordinator)")
        return self._home

    def numpy(self) -> np.ndarray:
        return self._local("value").values[self.key].copy()

    def assign(self, value) -> None:
        home = self._local("value")
        value = np.asarray(value, dtype=self._dtype)
        if value.shape != self._shape:
            raise InvalidArgumentError(f"cannot assign a value of shape {value.shape} to "
                                       f"variable {self.name!r} of shape {self._shape}")
        home.assign(self.key, value)

    def __repr__(self):
        return f"<Variable {self.name!r} shape={self.shape} device={self.device!r}>"


class ShardedVariable:
    """``tf.distribute.experimental.partitioners``' result: one variable stored as shards
    along its first axis (``.variables``, in order), used as one tensor."""

    #: TF 2.21 names every ShardedVariable so (its shards carry the variable's name)
    name = "ShardedVariable"

    def __init__(self, variables: list[Variable]):
        first = variables[0]
        if any(v.shape[1:] != first.shape[1:] or v.dtype != first.dtype for v in variables):
            raise InvalidArgumentError("the shards of a ShardedVariable must have one dtype "
                                       "and the same shape after the first axis")
        self.variables = list(variables)

    @property
    def shape(self):
        return (sum(v.shape[0] for v in self.variables), *self.variables[0].shape[1:])

    @property
    def dtype(self):
        return self.variables[0].dtype

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.variables)

    def offsets(self) -> list[int]:
        rows = [0]
        for v in self.variables:
            rows.append(rows[-1] + v.shape[0])
        return rows

    def numpy(self) -> np.ndarray:
        """The whole value: the shards concatenated (what ``tf.convert_to_tensor`` gives)."""
        return np.concatenate([v.numpy() for v in self.variables])

    def assign(self, value) -> None:
        value = np.asarray(value)
        if value.shape != self.shape:
            raise InvalidArgumentError(f"cannot assign a value of shape {value.shape} to a "
                                       f"ShardedVariable of shape {self.shape}")
        offsets = self.offsets()
        for i, v in enumerate(self.variables):
            v.assign(value[offsets[i]:offsets[i + 1]])

    def lookup_plan(self, ids) -> list[tuple[Variable, np.ndarray, np.ndarray]]:
        """For ``tf.nn.embedding_lookup``: per shard that holds some of ``ids``, (shard, the
        rows it must give, where they go in the result)."""
        ids = np.asarray(ids)
        rows = self.shape[0]
        if ids.dtype.kind not in "iu" or (ids.size and (ids.min() < 0 or ids.max() >= rows)):
            raise InvalidArgumentError(f"embedding_lookup: ids {brief(ids.tolist())} must be "
                                       f"ints in [0, {rows})")
        flat = ids.reshape(-1)
        offsets = np.asarray(self.offsets())
        shard_of = np.searchsorted(offsets, flat, side="right") - 1
        plan = []
        for i, v in enumerate(self.variables):
            where = np.nonzero(shard_of == i)[0]
            if where.size:
                plan.append((v, flat[where] - offsets[i], where))
        return plan

    def __repr__(self):
        return (f"<ShardedVariable shape={self.shape} shards="
                f"{[(v.shape[0], v.device) for v in self.variables]}>")


__all__ = ["FixedShardsPartitioner", "IndexedSlices", "MaxSizePartitioner",
           "MinSizePartitioner", "Partitioner", "ShardedVariable", "Variable", "num_shards",
           "shard_offsets", "summed_rows"]
