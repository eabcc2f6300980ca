"""Reduction operators and the splitting of values into chunks.

``ReduceOp`` mirrors ``tf.distribute.ReduceOp`` (SUM, MEAN) plus MAX and MIN, which MPI and
NCCL also offer. A value is a numpy array (any shape; chunks are taken from its flattened
elements) or a size-only ``Phantom`` (chunks are taken from its bytes).
"""

from __future__ import annotations

import enum

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.sim.payloads import BUFFERS, Phantom


class ReduceOp(enum.Enum):
    """How the participants' values combine (``tf.distribute.ReduceOp`` and MPI's ops)."""

    SUM = "sum"
    MEAN = "mean"
    MAX = "max"
    MIN = "min"

    @classmethod
    def parse(cls, op) -> ReduceOp:
        if isinstance(op, ReduceOp):
            return op
        try:
            return cls(str(op).lower())
        except ValueError:
            raise InvalidArgumentError(f"unknown reduce op {op!r}: expected one of "
                                       "SUM, MEAN, MAX, MIN") from None

    def combine(self, a, b, out=None):
        """Combine two partial values (MEAN adds; ``finalize`` divides at the end), into
        ``out`` if given."""
        if isinstance(a, Phantom):
            return a
        return _UFUNCS[self](a, b, out=out)

    def finalize(self, value, count: int):
        """The result once all ``count`` values are combined."""
        if self is ReduceOp.MEAN and not isinstance(value, Phantom):
            return value / count
        return value


_UFUNCS = {ReduceOp.SUM: np.add, ReduceOp.MEAN: np.add, ReduceOp.MAX: np.maximum,
           ReduceOp.MIN: np.minimum}


def check_value(value, what: str):
    if isinstance(value, Phantom):
        return value
    if isinstance(value, np.ndarray):
        return value
    raise InvalidArgumentError(f"{what}: value {value!r:.60} is not a numpy array or a "
                               "Phantom(nbytes)")


def check_pieces(pieces):
    """``pieces`` (pipelining: each chunk cut into that many pieces) must be an int >= 1."""
    if not isinstance(pieces, int) or isinstance(pieces, bool) or pieces < 1:
        raise InvalidArgumentError(f"pieces must be an int >= 1 (pipelining), got {pieces!r}")


def size_of(value) -> int:
    """Elements of an array, bytes of a phantom: the unit chunks are counted in."""
    return value.nbytes if isinstance(value, Phantom) else value.size


def nbytes(value) -> int:
    return value.nbytes if isinstance(value, Phantom) else int(value.nbytes)


def split_sizes(n: int, parts: int) -> list[int]:
    """``n`` units in ``parts`` near-equal chunks, the larger ones first (np.array_split)."""
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def split(value, parts: int) -> list:
    """A value cut into ``parts`` chunks (views of the flattened array, or phantoms)."""
    sizes = split_sizes(size_of(value), parts)
    if isinstance(value, Phantom):
        return [Phantom(s) for s in sizes]
    flat = value.reshape(-1)
    bounds = np.cumsum([0] + sizes)
    return [flat[bounds[i]:bounds[i + 1]] for i in range(parts)]


def join(chunks, like):
    """Inverse of ``split``: the chunks back into one value shaped like ``like``."""
    if isinstance(like, Phantom):
        return Phantom(sum(c.nbytes for c in chunks))
    return np.concatenate([np.asarray(c).reshape(-1) for c in chunks]).reshape(like.shape)


def flat_template(parts):
    """A template for ``join``-ing parts into one 1-D value: an array of their total size,
    or a phantom."""
    if isinstance(parts[0], Phantom):
        return Phantom(0)
    return np.empty(sum(x.size for x in parts), dtype=parts[0].dtype)


def join_flat(parts):
    """Parts joined into one 1-D value."""
    return join(parts, flat_template(parts))


def resplit(value, like_parts):
    """Cut ``value`` back into parts of the sizes of ``like_parts``."""
    if isinstance(value, Phantom):
        return [Phantom(x.nbytes) for x in like_parts]
    bounds = np.cumsum([0] + [x.size for x in like_parts])
    return [value[bounds[i]:bounds[i + 1]] for i in range(len(like_parts))]


def empty_like_flat(value):
    """An uninitialized 1-D buffer for a value's result (a phantom stays a phantom); large
    ones are recycled once the program has dropped them (``payloads.BUFFERS``)."""
    if isinstance(value, Phantom):
        return Phantom(value.nbytes)
    return BUFFERS.get(value.dtype, (value.size,))


def assign(dst, src):
    """Copy ``src`` into the buffer ``dst`` (phantoms carry nothing); returns ``dst``."""
    if not isinstance(dst, Phantom):
        dst[...] = np.asarray(src).reshape(dst.shape)
    return dst


def reshape_like(flat, like):
    """A flat result back in the shape of ``like``."""
    return flat if isinstance(flat, Phantom) else flat.reshape(like.shape)


def copy(value):
    return value if isinstance(value, Phantom) else np.array(value, copy=True)
