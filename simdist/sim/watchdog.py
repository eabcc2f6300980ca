"""The MPI ranks' watchdog: a rank that waited too long for the others in one exchange ends
the job (``MPI_Abort``), naming the ranks that stopped answering (``MPITransport`` starts one
with ``watchdog_s``)."""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
import threading
import time

import numpy as np


class RankWatchdog:
    """Ends the job (``MPI_Abort``) when this rank has waited ``timeout`` seconds for the
    others in one exchange: a rank that stopped answering (stopped, spinning in a task's code,
    crashed without ``python -m mpi4py``) would otherwise leave every other rank waiting at
    full CPU forever. Ranks on one machine share a small table (a memory-mapped file, deleted
    as soon as every rank has mapped it; plain stores: two writes per exchange) of each
    rank's exchange count and whether it waits, so that the message names the ranks that are
    not answering.
    """

    def __init__(self, comm, timeout: float, one_host: bool):
        """``one_host``: every rank of ``comm`` runs on this host (they can share a table)."""
        self.comm, self.timeout, self.rank = comm, timeout, comm.Get_rank()
        self.count, self.since, self.table = 0, None, None
        if one_host:
            self.table = _shared_table(comm, (comm.Get_size(), 2))
            atexit.register(self.finish)
        threading.Thread(target=self._watch, name="simdist-rank-watchdog", daemon=True).start()

    def enter(self) -> None:
        self.count += 1
        self.since = time.monotonic()
        if self.table is not None:
            self.table[self.rank] = (self.count, WAITING)

    def leave(self) -> None:
        self.since = None
        if self.table is not None:
            self.table[self.rank, 1] = WORKING

    def finish(self) -> None:
        """This rank is done with its exchanges (at ``finalize`` and at exit): it is not
        the one the others wait for."""
        if self.table is not None:
            self.table[self.rank, 1] = DONE

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
                waiting = [r for r in range(len(rows)) if rows[r, 1] == WAITING]
                if self.rank != min(waiting, default=self.rank) \
                        and time.monotonic() - since <= self.timeout + 5:
                    continue  # the lowest waiting rank speaks for all
                silent = ", ".join(f"rank {r} (at exchange {rows[r, 0]})"
                                   for r in silent_ranks(rows)) or "one or more ranks"
            sys.stderr.write(
                f"simdist: error: {silent} stopped answering: rank {self.rank} waited "
                f"{self.timeout:g} s (--timeout) for it at exchange {count}. A rank that is "
                "stopped, spins in a task's code or crashed looks like this; ending the job "
                "(MPI_Abort)\n")
            sys.stderr.flush()
            self.comm.Abort(4)


#: a rank's state in the watchdog's table: in its own work, waiting in an exchange, done
WORKING, WAITING, DONE = 0, 1, 2


def silent_ranks(rows) -> list[int]:
    """The ranks the others wait for, from the watchdog's table (a row per rank: its
    exchange count and state): those at work (neither waiting in an exchange nor done);
    when every rank waits (one stopped inside MPI), those at the lowest exchange, if not
    all are. A rank that went on ahead (a gather's sender, a rank in a barrier) waits too
    and is never named."""
    working = [r for r in range(len(rows)) if rows[r][1] == WORKING]
    if working:
        return working
    waiting = [r for r in range(len(rows)) if rows[r][1] == WAITING]
    lowest = min((rows[r][0] for r in waiting), default=0)
    behind = [r for r in waiting if rows[r][0] == lowest]
    return behind if len(behind) < len(waiting) else []


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
