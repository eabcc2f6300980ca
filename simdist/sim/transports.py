"""The two transports that carry messages between simulated tasks.

A transport only moves payloads; the cost model (``network.py``) decides when they arrive.
``InProcessTransport`` when every task lives in one Python process, ``MPITransport`` when tasks
are spread over MPI ranks: payload arrays move with mpi4py's buffer calls. This is the only
module that imports mpi4py; the benchmarks get what they need of MPI (barrier, reductions over
ranks, ``MPI_Allreduce`` of a buffer) from ``MPITransport``. ``RankWatchdog`` ends a job whose
ranks wait for one that stopped answering.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

import numpy as np

from simdist.sim.payloads import BUFFERS


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

    def __init__(self, comm=None, watchdog_s: float | None = None):
        from mpi4py import MPI  # imported only when MPI is used: simdist starts fast without

        self._MPI = MPI
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        #: with ``watchdog_s``, a rank that waits that long for the others ends the job
        self.watchdog = RankWatchdog(self.comm, MPI, watchdog_s) \
            if watchdog_s is not None and self.size > 1 else None

    def allgather(self, obj):
        if self.watchdog is None:
            return self.comm.allgather(obj)
        self.watchdog.enter()
        try:
            return self.comm.allgather(obj)
        finally:
            self.watchdog.leave()

    def gather(self, obj):
        if self.watchdog is None:
            return self.comm.gather(obj, root=0)
        self.watchdog.enter()
        try:
            return self.comm.gather(obj, root=0)
        finally:
            self.watchdog.leave()

    def barrier(self) -> None:
        """``MPI_Barrier``: wait until every rank is here."""
        self.comm.Barrier()

    def finalize(self) -> None:
        """``MPI_Finalize``: this rank is done with MPI. Called by every rank, it lets the job
        end with a non-zero exit code without ``MPI_Abort`` (``python -m mpi4py`` aborts a
        job whose rank exits non-zero while MPI is still initialized)."""
        self._MPI.Finalize()

    def allreduce(self, value, op: str = "sum"):
        """``value`` (a number or a bool) combined over every rank: op "sum", "max" or
        "land" (logical and), as MPI_SUM, MPI_MAX and MPI_LAND."""
        return self.comm.allreduce(value, op=getattr(self._MPI, op.upper()))

    def allreduce_buffer(self, sendbuf: np.ndarray, recvbuf: np.ndarray) -> None:
        """``MPI_Allreduce(sendbuf, recvbuf, MPI_SUM)`` of numpy buffers: MPI's own all-reduce,
        the reference that ``simdist bench allreduce`` measures the simulator against."""
        self.comm.Allreduce(sendbuf, recvbuf, op=self._MPI.SUM)

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
        if self.watchdog is not None:
            self.watchdog.enter()
        try:
            self._MPI.Request.Waitall(requests)
        finally:
            if self.watchdog is not None:
                self.watchdog.leave()
        return received


class RankWatchdog:
    """Ends the job (``MPI_Abort``) when this rank has waited ``timeout`` seconds for the
    others in one exchange: a rank that stopped answering (stopped, spinning in a task's code,
    crashed without ``python -m mpi4py``) would otherwise leave every other rank waiting at
    full CPU forever. Ranks on one machine share a small table (a memory-mapped file, deleted
    as soon as every rank has mapped it; plain stores: two writes per exchange) of each
    rank's exchange count and whether it waits, so that the message names the ranks that are
    not answering.
    """

    def __init__(self, comm, MPI, timeout: float):
        self.comm, self.timeout, self.rank = comm, timeout, comm.Get_rank()
        self.count, self.since, self.table = 0, None, None
        if comm.Split_type(MPI.COMM_TYPE_SHARED).Get_size() == comm.Get_size():
            self.table = _shared_table(comm, (comm.Get_size(), 2))
        threading.Thread(target=self._watch, name="simdist-rank-watchdog", daemon=True).start()

    def enter(self) -> None:
        self.count += 1
        self.since = time.monotonic()
        if self.table is not None:
            self.table[self.rank] = (self.count, 1)

    def leave(self) -> None:
        self.since = None
        if self.table is not None:
            self.table[self.rank, 1] = 0

    def _watch(self) -> None:
        while True:
            time.sleep(min(1.0, self.timeout / 4))
            since = self.since
            if since is None or time.monotonic() - since <= self.timeout:
                continue
            count, table = self.count, self.table
            if table is None:
                silent = "one or more ranks"
            else:
                rows = table.copy()
                waiting = [r for r in range(len(rows)) if rows[r, 1] and rows[r, 0] == count]
                if self.rank != min(waiting, default=self.rank) \
                        and time.monotonic() - since <= self.timeout + 5:
                    continue  # the lowest waiting rank speaks for all
                silent = ", ".join(f"rank {r} (at exchange {rows[r, 0]})"
                                   for r in range(len(rows)) if r not in waiting)
            sys.stderr.write(
                f"simdist: error: {silent} stopped answering: rank {self.rank} waited "
                f"{self.timeout:g} s (--timeout) for it at exchange {count}. A rank that is "
                "stopped, spins in a task's code or crashed looks like this; ending the job "
                "(MPI_Abort)\n")
            sys.stderr.flush()
            self.comm.Abort(4)


def _bytes_view(arr: np.ndarray):
    """A byte view of an array, so that any dtype (bool, float16, ...) moves as raw bytes."""
    return arr.reshape(-1).view(np.uint8)


def _shared_table(comm, shape) -> np.ndarray:
    """An int64 array that every rank of ``comm`` (all on one machine) maps."""
    folder = "/dev/shm" if os.path.isdir("/dev/shm") else None
    if comm.Get_rank() == 0:
        with tempfile.NamedTemporaryFile(prefix="simdist-watchdog-", dir=folder,
                                         delete=False) as f:
            f.truncate(8 * int(np.prod(shape)))
            name = f.name
    name = comm.bcast(name if comm.Get_rank() == 0 else None, root=0)
    table = np.memmap(name, dtype=np.int64, mode="r+", shape=shape)
    comm.Barrier()
    if comm.Get_rank() == 0:
        os.unlink(name)  # the mappings stay; nothing is left behind, even if the job is killed
    return table
