"""Models tf.DType: the element types a simulated tensor can hold (float32, int32, ...)."""

from __future__ import annotations

import numpy as np

from simdist.base.errors import InvalidArgumentError


class DType:
    """A TF dtype: its name ("float32"), numpy type and size in bytes."""

    def __init__(self, name: str, np_type):
        self.name = name
        self.as_numpy_dtype = np_type
        self.size = np.dtype(np_type).itemsize

    @property
    def is_floating(self) -> bool:
        return np.issubdtype(self.as_numpy_dtype, np.floating)

    @property
    def is_integer(self) -> bool:
        return np.issubdtype(self.as_numpy_dtype, np.integer)

    def __repr__(self):
        return f"tf.{self.name}"

    def __eq__(self, other):
        try:
            return self.name == as_dtype(other).name
        except InvalidArgumentError:
            return NotImplemented

    def __hash__(self):
        return hash(self.name)


float16 = DType("float16", np.float16)
float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
bool_ = DType("bool", np.bool_)
#: bytes (UTF-8 text): a checkpoint's file name, as TF's Saver feeds it
string = DType("string", np.bytes_)
#: a handle to a resource (a queue): what a queue op outputs and its ops take
resource = DType("resource", np.object_)
_ALL = {d.name: d for d in (float16, float32, float64, int32, int64, bool_, string,
                            resource)}


def as_dtype(value) -> DType:
    """A DType from a DType, a name ("float32"), or a numpy dtype/type."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _ALL:
        return _ALL[value]
    try:
        name = "string" if np.dtype(value).kind == "S" else np.dtype(value).name
    except TypeError:
        name = None
    if name in _ALL:
        return _ALL[name]
    raise InvalidArgumentError(f"unsupported dtype {value!r}: expected one of {', '.join(_ALL)}")


def dtype_of(array) -> DType:
    return as_dtype(np.asarray(array).dtype)
