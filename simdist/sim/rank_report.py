"""What the ranks of an MPI job learn about each other, beside the simulation itself.

``RankVersions``: what must be the same on every rank, and so on every host of a job run
across machines (Python, DistLab and simdist's source, numpy, mpi4py, the MPI library);
``MPITransport`` compares them at start-up and refuses a job whose ranks differ
(``version_mismatch``), since two ranks running different code would simulate different
runs. ``WindowTally``: the windows a transport carried and each rank's events, counted from
the window reports every rank receives anyway, for the run report's placement lines
(``simdist.commands.placement``). Nothing here is machine-specific: no host name, path or
process id is compared or sent. No MPI here (``transports`` does the calls).
"""

from __future__ import annotations

import functools
import hashlib
import platform
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

import numpy as np

#: the simdist package's folder, whose source files ``source_digest`` reads
PACKAGE = Path(__file__).resolve().parents[1]


class RankVersions(NamedTuple):
    """What one rank runs; every rank of a job must run the same (``version_mismatch``)."""

    python: str  # implementation and version: "CPython 3.11.9"
    distlab: str  # the installed distribution's version (simdist's package is in it)
    source: str  # a digest of simdist's source files (the same version, different code)
    numpy: str
    mpi4py: str
    mpi: str  # the MPI library: the first line of MPI_Get_library_version


@functools.lru_cache(maxsize=None)
def source_digest() -> str:
    """12 hex digits of a SHA-256 over simdist's ``.py`` files (their paths relative to the
    package and their bytes): equal on two hosts when their code is equal, wherever it is
    installed."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def local_versions(mpi4py_version: str, mpi_library: str) -> RankVersions:
    """This process's ``RankVersions`` (mpi4py's figures come from ``transports``, the one
    module that imports mpi4py)."""
    try:
        distlab = metadata.version("distlab")
    except metadata.PackageNotFoundError:
        distlab = "not installed"
    return RankVersions(f"{platform.python_implementation()} {platform.python_version()}",
                        distlab, source_digest(), np.__version__, mpi4py_version,
                        (mpi_library.strip().splitlines() or ["?"])[0].strip())


#: how each field is named in ``version_mismatch``'s line
_LABELS = {"python": "Python", "distlab": "DistLab", "source": "simdist source digest",
           "numpy": "numpy", "mpi4py": "mpi4py", "mpi": "MPI library"}


def version_mismatch(versions: list[RankVersions]) -> str | None:
    """One line naming the first rank whose versions differ from rank 0's, each differing
    version on both, and how many other ranks differ; None when every rank runs the same."""
    first = versions[0]
    differ = [r for r, v in enumerate(versions) if v != first]
    if not differ:
        return None
    rank, other = differ[0], versions[differ[0]]
    fields = "; ".join(f"{_LABELS[f]} {getattr(other, f)!r} (rank 0: {getattr(first, f)!r})"
                       for f in RankVersions._fields if getattr(other, f) != getattr(first, f))
    more = f" (and {len(differ) - 1} more rank(s))" if len(differ) > 1 else ""
    return (f"MPI rank {rank} runs other versions than rank 0{more}: {fields}. Every host of "
            "a job needs the same Python, DistLab and simdist source, numpy, mpi4py and MPI "
            "(docs/guides/simulator.md, 'Across machines')")


class WindowTally:
    """The time windows a transport carried and each rank's events (kernel events
    scheduled), read from the window reports (``scheduler.WindowReport``: ``now``,
    ``events``) that every rank's all-gather returns. Summed over the simulations a process
    runs: a report whose clock or events went back starts a new one."""

    def __init__(self):
        self.windows = 0
        self.events: list[int] = []  # per rank, in all
        self._done: list[int] = []  # per rank: the events of the simulations before
        self._last: list[tuple] = []  # per rank: (now, events) of its last report

    def add(self, reports) -> None:
        """Count one all-gather's reports (one per rank); anything else gathered (no
        ``events`` field) is not a window and is not counted."""
        if not reports or not hasattr(reports[0], "events"):
            return
        if len(self.events) != len(reports):
            self.events = [0] * len(reports)
            self._done = [0] * len(reports)
            self._last = [(0, 0)] * len(reports)
        self.windows += 1
        last, done, events = self._last, self._done, self.events
        for rank, report in enumerate(reports):
            now, count = report.now, report.events
            if now < last[rank][0] or count < last[rank][1]:
                done[rank] += last[rank][1]
            last[rank] = (now, count)
            events[rank] = done[rank] + count
