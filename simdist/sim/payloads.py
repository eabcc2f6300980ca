"""What simulated tasks send each other: messages and their payloads.

A message models what TensorFlow's gRPC runtime sends between tasks (a tensor for a Recv op, a
gradient pushed to a parameter server). Its payload is real numpy data or a size-only
``Phantom`` (analytic mode). ``describe_payload`` splits a payload into a picklable description
and its arrays, so that a transport (``transports.py``) can move the arrays as raw buffers, and
``rebuild_payload`` puts it back together; ``BUFFERS`` keeps large receive buffers for reuse.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np

from simdist.base.errors import InvalidArgumentError, brief


@dataclass(frozen=True)
class Phantom:
    """A size-only payload: simulates moving ``nbytes`` without carrying data (analytic mode)."""

    nbytes: int

    def __post_init__(self):
        if type(self.nbytes) is not int and not isinstance(self.nbytes, np.integer) \
                or self.nbytes < 0:
            raise InvalidArgumentError(f"Phantom size must be an int >= 0 of bytes, "
                                       f"got {self.nbytes!r}")


class Message:
    """A delivered message, as ``ctx.recv`` returns it."""

    __slots__ = ("src", "dst", "tag", "payload", "nbytes", "sent_at", "arrived_at", "seq",
                 "src_device", "dst_device")

    def __init__(self, src, dst, tag, payload, nbytes, sent_at, arrived_at=None, seq=0,
                 src_device=None, dst_device=None):
        # one field a line: tuple assignments of 4 build a tuple each (one message per send)
        self.src = src
        self.dst = dst
        self.tag = tag
        self.payload = payload
        self.nbytes = nbytes
        self.sent_at = sent_at
        self.arrived_at = arrived_at
        self.seq = seq
        self.src_device = src_device
        self.dst_device = dst_device

    def __repr__(self):
        src = self.src if self.src_device is None else f"{self.src} device {self.src_device}"
        dst = self.dst if self.dst_device is None else f"{self.dst} device {self.dst_device}"
        return (f"Message({src} -> {dst}, tag={self.tag!r}, {self.nbytes} B, "
                f"sent {self.sent_at} ns, arrived {self.arrived_at} ns)")


# -- payloads -------------------------------------------------------------------------------

PAYLOAD_HELP = ("expected None, a numpy array, a Phantom(nbytes), or a list/tuple/dict "
                "(str keys) of numpy arrays")


def describe_payload(payload):
    """Split a payload into (a picklable description, the list of arrays it carries)."""
    if payload is None:
        return ("none",), []
    if isinstance(payload, Phantom):
        return ("phantom", int(payload.nbytes)), []
    if isinstance(payload, np.ndarray):
        return ("array",), [_as_array(payload, payload)]
    if isinstance(payload, (np.generic, int, float, bool)) and not isinstance(payload, str):
        return ("scalar",), [np.asarray(payload)]
    if isinstance(payload, (list, tuple)):
        arrays = [_as_array(x, payload) for x in payload]
        return ("list" if isinstance(payload, list) else "tuple", len(arrays)), arrays
    if isinstance(payload, dict):
        keys = list(payload)
        for k in keys:
            if not isinstance(k, str):
                raise InvalidArgumentError(f"payload dict key {brief(k)} is not a str; "
                                           + PAYLOAD_HELP)
        return ("dict", tuple(keys)), [_as_array(payload[k], payload) for k in keys]
    raise InvalidArgumentError(f"cannot send payload of type {type(payload).__name__}: "
                               f"{brief(payload)}; " + PAYLOAD_HELP)


def _as_array(x, whole):
    if isinstance(x, np.ndarray):
        if x.dtype.hasobject:  # Python objects, not bytes: they cannot cross MPI ranks
            raise InvalidArgumentError(
                f"payload array of dtype {x.dtype} holds Python objects, which cannot travel "
                f"between MPI ranks as bytes: {brief(x)}; send numbers (e.g. float32)")
        return x
    raise InvalidArgumentError(f"payload item {brief(x)} in {brief(whole)} is not a numpy "
                               "array; " + PAYLOAD_HELP)


def payload_nbytes(desc, arrays) -> int:
    return desc[1] if desc[0] == "phantom" else sum(int(a.nbytes) for a in arrays)


@functools.lru_cache(maxsize=256)
def _phantom(nbytes: int) -> Phantom:
    return Phantom(nbytes)  # immutable, so one object per size can be shared


def rebuild_payload(desc, arrays):
    """Inverse of ``describe_payload``."""
    kind = desc[0]
    if kind == "none":
        return None
    if kind == "phantom":
        return _phantom(desc[1])
    if kind == "array":
        return arrays[0]
    if kind == "scalar":
        return arrays[0][()]
    if kind == "list":
        return list(arrays)
    if kind == "tuple":
        return tuple(arrays)
    return dict(zip(desc[1], arrays))


# -- buffers --------------------------------------------------------------------------------

class BufferPool:
    """Large buffers (received payloads, collective results) kept for reuse, as MPI libraries
    keep their registered buffers:
    a buffer is handed out again once nothing refers to it any more (the program dropped the
    payload and every view of it), so that a collective called again and again does not
    fault in fresh pages each time. Small buffers are not worth it and are not kept."""

    MIN_BYTES = 1 << 20
    MAX_BYTES = 256 << 20

    def __init__(self):
        self._free: dict[tuple, list[np.ndarray]] = {}
        self._bytes = 0

    def get(self, dtype, shape) -> np.ndarray:
        dtype, shape = np.dtype(dtype), tuple(shape)
        nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if nbytes < self.MIN_BYTES:  # the common small message: no pool work at all
            return np.empty(shape, dtype=dtype)
        kept = self._free.setdefault((dtype.str, shape), [])
        for buf in kept:
            if sys.getrefcount(buf) == 3:  # the list, this loop's name, getrefcount's argument
                return buf
        buf = np.empty(shape, dtype=dtype)
        if self._bytes + nbytes <= self.MAX_BYTES:
            kept.append(buf)
            self._bytes += nbytes
        return buf


#: the process's pool of large buffers (``BUFFERS.get(dtype, shape)``)
BUFFERS = BufferPool()
