"""The two transports that carry messages between simulated tasks.

A transport only moves payloads; the cost model (``network.py``) decides when they arrive.
``InProcessTransport`` when every task lives in one Python process, ``MPITransport`` when tasks
are spread over MPI ranks: payload arrays move with mpi4py's buffer calls. This is the only
module that imports mpi4py; the benchmarks get what they need of MPI (barrier, reductions over
ranks, ``MPI_Allreduce`` of a buffer) from ``MPITransport``. Its ``RankWatchdog``
(``watchdog.py``) ends a job whose ranks wait for one that stopped answering. ``RankStats`` (on
when ``SIMDIST_RANK_STATS`` names a file prefix, as ``simdist bench mpi`` does) counts where
each rank's time went; it reads a clock for that alone and never changes what is simulated.
``MPITransport`` checks at start-up that every rank runs the same versions
(``rank_report.RankVersions``) and tallies the windows and each rank's events for the run
report (``rank_report.WindowTally``).
"""

from __future__ import annotations

import atexit
import json
import os
import pickle
import time

import numpy as np

from simdist.base.errors import FailedPreconditionError
from simdist.base.files import write_atomic
from simdist.sim import rank_report
from simdist.sim.payloads import BUFFERS
from simdist.sim.watchdog import RankWatchdog


#: the environment variable that turns ``RankStats`` on: a file prefix; each rank writes
#: PREFIX.rank<N>.json when its process ends
STATS_ENV = "SIMDIST_RANK_STATS"


class RankStats:
    """Where one rank's wall time went, for ``simdist bench mpi``: simulating (its tasks'
    events and the network model, everything outside the transport), waiting at window ends
    (for the slowest rank, in the all-gather of the report sizes), exchanging (the reports'
    bytes and the payload arrays) and serializing (pickling and unpickling the reports).
    Counts windows and bytes too. Measured from the first window (imports and the program's
    set-up left out: they differ between one process and mpiexec's ranks) to the process's
    end."""

    def __init__(self, prefix: str):
        self.prefix, self.start, self.cpu_start = prefix, None, None
        self.transport_cpu_s = 0.0  # CPU time inside the transport's window exchange
        self.rank, self.size, self.transport = 0, 1, "inprocess"
        self.wait_s = self.exchange_s = self.serialize_s = 0.0
        self.windows = self.report_bytes = self.payload_bytes = self.payload_messages = 0
        self.tally = rank_report.WindowTally()  # the MPI transport's, under mpiexec
        atexit.register(self.write)

    def window(self) -> None:
        """Count a window (the first one starts the clock)."""
        if self.start is None:
            self.start, self.cpu_start = time.perf_counter(), time.process_time()
        self.windows += 1

    def as_dict(self) -> dict:
        total = time.perf_counter() - self.start if self.start is not None else 0.0
        cpu = time.process_time() - self.cpu_start if self.start is not None else 0.0
        spent = self.wait_s + self.exchange_s + self.serialize_s
        events = self.tally.events  # this rank's: its tasks' kernel events
        return {"rank": self.rank, "ranks": self.size, "transport": self.transport,
                "total_s": total, "cpu_s": cpu, "simulate_cpu_s": cpu - self.transport_cpu_s,
                "simulate_s": total - spent, "wait_s": self.wait_s,
                "exchange_s": self.exchange_s, "serialize_s": self.serialize_s,
                "windows": self.windows, "report_bytes": self.report_bytes,
                "payload_bytes": self.payload_bytes,
                "payload_messages": self.payload_messages,
                "events": events[self.rank] if self.rank < len(events) else 0}

    def write(self) -> None:
        write_atomic(f"{self.prefix}.rank{self.rank}.json", json.dumps(self.as_dict()))


#: this process's RankStats, or None (the default: nothing is counted)
STATS = RankStats(os.environ[STATS_ENV]) if os.environ.get(STATS_ENV) else None


class InProcessTransport:
    """Every simulated task in this Python process: one 'rank', no copying between ranks."""

    rank = 0
    size = 1
    name = "inprocess"

    def allgather(self, obj):
        if STATS is not None:
            STATS.window()
            STATS.tally.add([obj])
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
        if self.size > 1:
            self._check_versions()
        ranks_here = _ranks_on_host(self.comm, MPI) if self.size > 1 else 1
        #: with ``watchdog_s``, a rank that waits that long for the others ends the job
        self.watchdog = RankWatchdog(self.comm, watchdog_s, ranks_here == self.size) \
            if watchdog_s is not None and self.size > 1 else None
        self._slots = ReportSlots()
        #: how long a waiting rank polls before it sleeps (``_wait``)
        self._spin_s = _spin_seconds(ranks_here) if self.size > 1 else 0.0
        #: the windows this transport carried and each rank's events (the run report's)
        self.tally = rank_report.WindowTally()
        if STATS is not None:
            STATS.rank, STATS.size, STATS.transport = self.rank, self.size, self.name
            STATS.tally = self.tally

    def _check_versions(self) -> None:
        """Refuse, on every rank alike, a job whose ranks run different versions
        (``rank_report.version_mismatch``): one all-gather of each rank's
        ``RankVersions`` (versions and a source digest: nothing machine-specific). MPI is
        finalized first (over ``COMM_WORLD``), so that the job ends with the error's exit
        status, without an ``MPI_Abort``."""
        import mpi4py

        mine = rank_report.local_versions(mpi4py.__version__,
                                          self._MPI.Get_library_version())
        mismatch = rank_report.version_mismatch(self.comm.allgather(mine))
        if mismatch:
            if self.comm is self._MPI.COMM_WORLD:  # a part of a larger job: its ranks go on
                self._MPI.Finalize()
            error = FailedPreconditionError(mismatch)
            error.every_rank = True  # every rank raises it: rank 0 alone need say it
            raise error

    def allgather(self, obj):
        """Every rank's ``obj``, in rank order, with one ``MPI_Allgather`` of a fixed-size
        slot per rank when every pickled ``obj`` fits its slot (the usual window report),
        else a second round (``MPI_Allgatherv``) with the exact sizes."""
        return self._watched(self._allgather, obj)

    def _allgather(self, obj):
        stats = STATS
        if stats is not None:
            stats.window()
            t0, c0 = time.perf_counter(), time.process_time()
        if self.size == 1:
            self.tally.add([obj])
            return [obj]
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        if stats is not None:
            t1 = time.perf_counter()
        slots = self._slots
        slot = slots.slot
        send, recv = slots.buffers(self.size)
        send[:8] = np.frombuffer(len(data).to_bytes(8, "little"), np.uint8)
        fits = len(data) <= slot - 8
        if fits:
            send[8:8 + len(data)] = np.frombuffer(data, np.uint8)
        self._wait(self.comm.Iallgather(send, recv))
        table = recv.reshape(self.size, slot)
        sizes = table[:, :8].copy().view(np.int64).reshape(-1).tolist()
        if stats is not None:
            t2 = time.perf_counter()
        if max(sizes) <= slot - 8:
            parts = [table[r, 8:8 + n].data for r, n in enumerate(sizes)]
        else:  # a report larger than its slot: every rank sends its whole report again
            offsets = np.cumsum([0] + sizes[:-1]).tolist()
            whole = bytearray(sum(sizes))
            self.comm.Allgatherv(data, [whole, sizes, offsets, self._MPI.BYTE])
            view = memoryview(whole)
            parts = [view[o:o + n] for o, n in zip(offsets, sizes)]
        slots.resize(max(sizes))  # the same sizes on every rank: the same next slot
        if stats is not None:
            t3 = time.perf_counter()
        out = [obj if r == self.rank else pickle.loads(part) for r, part in enumerate(parts)]
        if stats is not None:
            t4 = time.perf_counter()
            stats.transport_cpu_s += time.process_time() - c0
            stats.report_bytes += sum(sizes)
            stats.serialize_s += (t1 - t0) + (t4 - t3)
            stats.wait_s += t2 - t1
            stats.exchange_s += t3 - t2
        self.tally.add(out)
        return out

    def _wait(self, request) -> None:
        """Wait for a nonblocking MPI call: polling at first, then sleeping between polls
        (50 us, doubling to 200 us), so that a rank waiting for a slower one leaves the CPU to
        it when ranks outnumber the cores, instead of spinning inside MPI (``_spin_seconds``:
        when every rank of this host has a core, it polls for a while longer first)."""
        test = request.Test
        for _ in range(_SPIN_POLLS):
            if test():
                return
        if self._spin_s:
            until = time.perf_counter() + self._spin_s
            while time.perf_counter() < until:
                for _ in range(_SPIN_POLLS):
                    if test():
                        return
        pause = 50e-6
        while not test():
            time.sleep(pause)
            pause = min(pause * 2, 2e-4)

    def _watched(self, call, *args, **kwargs):
        """``call(*args, **kwargs)``, an MPI call that waits for other ranks, under the
        watchdog (when there is one)."""
        if self.watchdog is None:
            return call(*args, **kwargs)
        self.watchdog.enter()
        try:
            return call(*args, **kwargs)
        finally:
            self.watchdog.leave()

    def gather(self, obj):
        return self._watched(self.comm.gather, obj, root=0)

    def barrier(self) -> None:
        """``MPI_Barrier``: wait until every rank is here."""
        self._watched(self.comm.Barrier)

    def finalize(self) -> None:
        """``MPI_Finalize``: this rank is done with MPI. Called by every rank, it lets the job
        end with a non-zero exit code without ``MPI_Abort`` (``python -m mpi4py`` aborts a
        job whose rank exits non-zero while MPI is still initialized)."""
        if self.watchdog is not None:
            self.watchdog.finish()
        self._MPI.Finalize()

    def allreduce(self, value, op: str = "sum"):
        """``value`` (a number or a bool) combined over every rank: op "sum", "max" or
        "land" (logical and), as MPI_SUM, MPI_MAX and MPI_LAND."""
        return self._watched(self.comm.allreduce, value, op=getattr(self._MPI, op.upper()))

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
        if STATS is not None:
            t0, c0 = time.perf_counter(), time.process_time()
        try:
            self._wait(_AllRequests(self._MPI, requests))
        finally:
            if self.watchdog is not None:
                self.watchdog.leave()
        if STATS is not None:
            STATS.exchange_s += time.perf_counter() - t0
            STATS.transport_cpu_s += time.process_time() - c0
            STATS.payload_messages += len(outgoing) + len(incoming)
            STATS.payload_bytes += sum(a.nbytes for _, _, arrays in outgoing for a in arrays)
        return received


#: polls of a nonblocking call before ``MPITransport._wait`` starts sleeping between them
_SPIN_POLLS = 200
#: seconds a waiting rank goes on polling when this host has a core for each of its ranks:
#: a window's all-gather then ends microseconds after the slowest rank arrives, where a
#: rank woken from a sleep is late by up to 200 us each window (docs/results/mpi.md); a
#: window that waits longer than this sleeps as before
_SPIN_S_OWN_CORE = 2e-3


def _ranks_on_host(comm, MPI) -> int:
    """How many ranks of ``comm`` run on this rank's host. A collective call: every rank
    makes it."""
    on_host = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return on_host.Get_size()
    finally:
        on_host.Free()


def _spin_seconds(ranks_here: int) -> float:
    """How long a waiting rank polls before sleeping: ``_SPIN_S_OWN_CORE`` when the
    ``ranks_here`` ranks on this host are no more than its cores (each can keep one), else 0
    (oversubscribed: a sleeping rank leaves its core to a rank it waits for)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    return _SPIN_S_OWN_CORE if ranks_here <= cores else 0.0


class _AllRequests:
    """Several MPI requests as one, for ``MPITransport._wait`` (``MPI_Testall``)."""

    def __init__(self, MPI, requests):
        self.MPI, self.requests = MPI, requests

    def Test(self) -> bool:
        return self.MPI.Request.Testall(self.requests)


class ReportSlots:
    """The fixed-size slot each rank's window report gets in the window's ``MPI_Allgather``
    (its first 8 bytes: the report's size). Every rank resizes it alike after each window,
    from sizes that every rank has seen: up to fit the largest report (to 1 MiB), down to a
    quarter when 64 windows in a row used less than that."""

    LARGEST, SMALLEST, SHRINK_AFTER = 1 << 20, 4096, 64

    def __init__(self):
        self.slot, self.small_windows, self._buffers = 16384, 0, None

    def buffers(self, ranks: int):
        if self._buffers is None or self._buffers[0].size != self.slot:
            self._buffers = (np.zeros(self.slot, np.uint8),
                             np.zeros(self.slot * ranks, np.uint8))
        return self._buffers

    def resize(self, largest: int) -> None:
        need = largest + 8
        if need > self.slot and self.slot < self.LARGEST:
            self.slot = min(self.LARGEST, 1 << (need - 1).bit_length())
            self.small_windows = 0
        elif need * 4 < self.slot and self.slot > self.SMALLEST:
            self.small_windows += 1
            if self.small_windows >= self.SHRINK_AFTER:
                self.slot, self.small_windows = max(self.SMALLEST, self.slot // 4), 0
        else:
            self.small_windows = 0


def _bytes_view(arr: np.ndarray):
    """A byte view of an array, so that any dtype (bool, float16, ...) moves as raw bytes."""
    return arr.reshape(-1).view(np.uint8)
