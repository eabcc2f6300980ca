"""What a TF RPC carries, as bytes a message can hold: a small header (compact JSON in a
``uint8`` array, at least ``RPC_BYTES`` long, as an RPC's header costs), an error (its
class name and message) and, for TF's ``RegisterGraph``, a graph (pickled: every rank runs
the same Python, so the classes it names exist on the other side).

Both TF runtimes use it: the TF1 master and workers (``simdist/graph/_sim/``) and
ParameterServerStrategy's coordinator and servers (``simdist/distribute/rpc.py``).
"""

from __future__ import annotations

import builtins
import json
import pickle

import numpy as np

from simdist.base import errors
from simdist.base.errors import InvalidArgumentError, UnknownError

#: the bytes of a request's header (an RPC without its tensors)
RPC_BYTES = 64


def encode_header(obj, minimum: int = RPC_BYTES) -> np.ndarray:
    """``obj`` (JSON data) as a ``uint8`` array of at least ``minimum`` bytes."""
    raw = json.dumps(obj, separators=(",", ":")).encode()
    out = np.zeros(max(minimum, len(raw)), np.uint8)
    out[:len(raw)] = np.frombuffer(raw, np.uint8)
    return out


def decode_header(array) -> object:
    return json.loads(bytes(np.asarray(array, np.uint8)).rstrip(b"\0").decode())


def error_fields(error: BaseException) -> list[str]:
    """An error as it travels: [class name, message]."""
    return [type(error).__name__, str(error)]


def rebuild_error(fields) -> Exception:
    """The error of ``error_fields``: simdist's (TF's) class of that name, a Python builtin,
    else ``UnknownError`` naming it."""
    name, message = fields
    cls = getattr(errors, name, None) or getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls(message)
    return UnknownError(f"{name}: {message}")


def pack_object(obj, what: str) -> np.ndarray:
    """``obj`` pickled into a ``uint8`` array (``what`` names it in the error when it holds
    something that cannot travel, such as a Python function)."""
    try:
        raw = pickle.dumps(obj, protocol=4)
    except (pickle.PicklingError, TypeError, AttributeError) as error:
        raise InvalidArgumentError(f"{what} cannot travel to another task: {error} (a Python "
                                   "function or object runs in its client's process only)"
                                   ) from None
    return np.frombuffer(raw, np.uint8).copy()


def unpack_object(array):
    return pickle.loads(np.asarray(array, np.uint8).tobytes())
