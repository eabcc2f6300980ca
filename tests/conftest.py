"""Shared test helpers: mpiexec and notebook runs with a timeout, simulated workers, a fresh
TF1 world, literal error patterns."""

import os
import re
import sys
import types
from pathlib import Path

import pytest

from course import lessons
from course.execute import local_kernel
from simdist.sim.launcher import run_mpi

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "programs"

# Open MPI as root (CI runs as root) and with more ranks than the 2 cores
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
# the lesson checks read the learner's workspace (my_exercises/): tests see the stubs only,
# in English, and never write to a developer's own workspace
os.environ["DISTLAB_WORKSPACE"] = str(Path(__file__).resolve().parent / ".no_workspace")
os.environ["DISTLAB_LANG"] = "en"


def mpi_simdist(n, args, timeout=120, cwd=None):
    """Run ``mpiexec -n n python -m mpi4py -m simdist ARGS``; fail the test on non-zero exit."""
    proc = run_mpi(n, ["-m", "simdist", *args], timeout=timeout, cwd=cwd or ROOT)
    assert proc.returncode == 0, (
        f"mpiexec -n {n} simdist {' '.join(args)} exited {proc.returncode}\n"
        f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc


def trace_over_ranks(args, tmp_path, ranks: int = 2) -> bytes:
    """``simdist ARGS --trace FILE`` in this process and under ``mpiexec -n ranks``: the two
    traces must be byte-identical. Returns the trace (for what it must show)."""
    from simdist.commands.cli import main as simdist_main

    alone, mpi = tmp_path / "inprocess.json", tmp_path / f"mpi{ranks}.json"
    assert simdist_main([*args, "--trace", str(alone)]) == 0
    proc = mpi_simdist(ranks, [*args, "--trace", str(mpi)])
    assert f"mpi, {ranks} rank(s)" in proc.stdout
    assert mpi.read_bytes() == alone.read_bytes()
    return alone.read_bytes()


def lesson_mpi(program, ranks: int, *args, timeout: int = 120):
    """Run a lesson's mpiexec program (``lessons/NN_slug/NAME_mpi.py``, relative to the
    repository) on ``ranks`` ranks with ``args``: it must end without MPI_Abort, and rank 0
    alone reports (NAME once in its output). The finished process, whatever its exit code."""
    proc = run_mpi(ranks, [str(program), *args], timeout=timeout, cwd=ROOT)
    assert "MPI_ABORT" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert proc.stdout.count(Path(program).stem) == 1, proc.stdout
    return proc


def run_notebook(notebook, monkeypatch, cell_timeout=240):
    """Execute a notebook headless with simdist from this checkout; fail on any error cell.
    Returns (the text of every output, the number of PNG images drawn)."""
    import nbclient
    import nbformat

    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)  # the kernel imports simdist from this checkout
    notebook = Path(notebook)
    nb = nbformat.read(notebook, as_version=4)
    with local_kernel() as km:  # over Unix sockets, as the course build runs them
        client = nbclient.NotebookClient(nb, km=km, timeout=cell_timeout,
                                         resources={"metadata": {"path": str(notebook.parent)}})
        client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [f"{o.ename}: {o.evalue}" for o in outputs if o.output_type == "error"]
    assert not errors, errors
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                   for o in outputs)
    images = sum("image/png" in o.get("data", {}) for o in outputs)
    return text, images


def assert_notebook_shows(notebook, monkeypatch, lines, images: int, cell_timeout=240):
    """Run a notebook (``run_notebook``): every one of ``lines`` in its output, and at least
    ``images`` figures drawn."""
    text, drawn = run_notebook(notebook, monkeypatch, cell_timeout)
    missing = [line for line in lines if line not in text]
    assert not missing, missing
    assert drawn >= images, f"{drawn} figures drawn, {images} expected"


@pytest.fixture
def python():
    return sys.executable


@pytest.fixture
def fresh_tf1():
    """A new default graph and no simulated server running, before and after the test."""
    import simdist.graph as tf

    tf.reset_default_graph()
    tf.stop_all_servers()
    yield
    tf.stop_all_servers()


def literal(text):
    """A pytest.raises(match=...) pattern that matches ``text`` literally."""
    return re.escape(text)


def run_on_workers(p, body, hardware=None, trace=True):
    """Run ``body(ctx)`` (a generator) on p workers from t=0; returns
    ([(its value, the time it returned) for each worker], the SimulationResult)."""
    from simdist import simulate

    def main(ctx):
        out = yield from body(ctx)
        return out, ctx.now

    result = simulate({"worker": p}, main, hardware=hardware, trace=trace)
    return list(result.returns.values()), result


class LessonChecks:
    """A lesson's checks, loaded once so that the simulated runs they share are made once,
    and each run on a learner's answer."""

    def __init__(self, folder):
        self.checks = {c.exercise: c for c in lessons.load_checks(folder)}

    def result(self, exercise: str, source: str):
        """The check of ``exercise`` run on a module made of ``source`` (an answer)."""
        module = types.ModuleType("answers")
        exec(source, module.__dict__)  # noqa: S102 - the test's own answers
        return lessons.run_check(self.checks[exercise], module)


def left_behind() -> list:
    """This test process's descendants that should have ended: all but its TF zygotes
    (``realdist.runtime.zygote``: one per set of imports, living as long as the process);
    what a zygote forked and left running counts."""
    import psutil

    from realdist.runtime import zygote

    keep = zygote.running()
    return [p for p in psutil.Process().children(recursive=True) if p.pid not in keep]
