"""Shared test helpers: launching simdist under mpiexec with a timeout."""

import os
import sys
from pathlib import Path

import pytest

from simdist.mpirun import run_mpi

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "programs"

# Open MPI as root (CI runs as root) and with more ranks than the 2 cores
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")


def mpi_simdist(n, args, timeout=120, cwd=None):
    """Run ``mpiexec -n n python -m mpi4py -m simdist ARGS``; fail the test on non-zero exit."""
    proc = run_mpi(n, ["-m", "simdist", *args], timeout=timeout, cwd=cwd or ROOT)
    assert proc.returncode == 0, (
        f"mpiexec -n {n} simdist {' '.join(args)} exited {proc.returncode}\n"
        f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture
def python():
    return sys.executable
