"""Messages between simulated tasks, and the two transports that carry them.

A message models what TensorFlow's gRPC runtime sends between tasks (a tensor for a Recv op, a
gradient pushed to a parameter server). Its payload is real numpy data or a size-only
``Phantom``. The *cost model* (see ``network.py``) decides when it arrives; a *transport*
only moves it: ``InProcessTransport`` when every task lives in one Python process,
``MPITransport`` when tasks are spread over MPI ranks (payloads move with mpi4py's buffer calls).
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np

from .errors import InvalidArgumentError


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
        self.src, self.dst, self.tag, self.payload = src, dst, tag, payload
        self.nbytes, self.sent_at, self.arrived_at, self.seq = nbytes, sent_at, arrived_at, seq
        self.src_device, self.dst_device = src_device, dst_device

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
        return ("array",), [payload]
    if isinstance(payload, (np.generic, int, float, bool)) and not isinstance(payload, str):
        return ("scalar",), [np.asarray(payload)]
    if isinstance(payload, (list, tuple)):
        arrays = [_as_array(x, payload) for x in payload]
        return ("list" if isinstance(payload, list) else "tuple", len(arrays)), arrays
    if isinstance(payload, dict):
        keys = list(payload)
        for k in keys:
            if not isinstance(k, str):
                raise InvalidArgumentError(f"payload dict key {k!r} is not a str; "
                                           + PAYLOAD_HELP)
        return ("dict", tuple(keys)), [_as_array(payload[k], payload) for k in keys]
    raise InvalidArgumentError(f"cannot send payload of type {type(payload).__name__}: "
                               f"{_short(payload)}; " + PAYLOAD_HELP)


def _as_array(x, whole):
    if isinstance(x, np.ndarray):
        return x
    raise InvalidArgumentError(f"payload item {_short(x)} in {_short(whole)} is not a numpy "
                               "array; " + PAYLOAD_HELP)


def _short(x, n=60):
    text = repr(x)
    return text if len(text) <= n else text[: n - 3] + "..."


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


# -- transports -----------------------------------------------------------------------------


class InProcessTransport:
    """Every simulated task in this Python process: one 'rank', no copying between ranks."""

    rank = 0
    size = 1
    name = "inprocess"

    def allgather(self, obj):
        return [obj]

    def exchange_payloads(self, outgoing, incoming):
        """Nothing crosses a rank: ``outgoing`` is empty and ``incoming`` already filled."""
        return {}

    def gather(self, obj):
        return [obj]


class MPITransport:
    """Tasks spread over the ranks of an MPI communicator (``mpiexec -n N``).

    Window metadata travels with one ``allgather`` per window; numpy payloads move with
    nonblocking buffer sends (``Isend``/``Irecv``) straight into preallocated arrays.
    """

    name = "mpi"

    def __init__(self, comm=None):
        from mpi4py import MPI  # imported only when MPI is used: simdist starts fast without

        self._MPI = MPI
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()

    def allgather(self, obj):
        return self.comm.allgather(obj)

    def gather(self, obj):
        return self.comm.gather(obj, root=0)

    def exchange_payloads(self, outgoing, incoming):
        """Move payload arrays between ranks.

        ``outgoing``: list of (dst_rank, key, arrays) this rank sends; ``incoming``: list of
        (src_rank, key, [(dtype, shape), ...], into) it receives, ``into`` being the buffer
        its one array should land in, or None. Both sides list messages in the same global
        order, so the n-th transfer between two ranks uses MPI tag n.
        Returns {key: [arrays]} for the incoming messages.
        """
        requests, received, tags = [], {}, {}
        for src, key, specs, into in incoming:
            bufs = [into] if into is not None else \
                [BUFFERS.get(dtype, shape) for dtype, shape in specs]
            received[key] = bufs
            for buf in bufs:
                tag = tags[("r", src)] = tags.get(("r", src), -1) + 1
                if buf.nbytes:
                    requests.append(self.comm.Irecv(_bytes_view(buf), source=src,
                                                    tag=tag % 32000))
        for dst, key, arrays in outgoing:
            for arr in arrays:
                tag = tags[("s", dst)] = tags.get(("s", dst), -1) + 1
                if arr.nbytes:
                    requests.append(self.comm.Isend(_bytes_view(np.ascontiguousarray(arr)),
                                                    dest=dst, tag=tag % 32000))
        self._MPI.Request.Waitall(requests)
        return received


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


def _bytes_view(arr: np.ndarray):
    """A byte view of an array, so that any dtype (bool, float16, ...) moves as raw bytes."""
    return arr.reshape(-1).view(np.uint8)
