"""Executing a lesson's notebook for the course site: a Jupyter kernel (nbclient) over Unix
sockets (no TCP port), the traces of the timelines it draws recorded as it runs, and the kept
run (``executed/``) reused while the notebook's code is unchanged, with its Markdown as it is
now. ``course.site`` builds the pages from what this gives."""

from __future__ import annotations

import copy
import functools
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from course import html as H
from simdist.base.files import atomic_output

#: the plots of simdist.trace.plots that take a trace first: the traces the site offers
TRACE_PLOTS = ("plot_timeline", "plot_queue_occupancy")

#: the folder that holds this package (and simdist beside it): the kernel imports them from it
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def same_cells(a, b) -> bool:
    """True when two notebooks have the same cells (kind and source), outputs aside."""
    def cells(nb):
        return [(c.cell_type, H._text(c.source)) for c in nb.cells]
    return cells(a) == cells(b)


def same_code(a, b) -> bool:
    """True when two notebooks have the same code cells, in order (Markdown aside)."""
    def code(nb):
        return [H._text(c.source) for c in nb.cells if c.cell_type == "code"]
    return code(a) == code(b)


def with_outputs_of(kept, source):
    """``source`` with the outputs of ``kept``'s code cells (``same_code``): an executed
    notebook whose Markdown was edited after it ran, without running it again."""
    outputs = iter([c for c in kept.cells if c.cell_type == "code"])
    nb = copy.deepcopy(source)
    nb.cells = [next(outputs) if c.cell_type == "code" else c for c in nb.cells]
    return nb


@contextmanager
def local_kernel(kernel_name: str = "python3"):
    """A Jupyter kernel manager whose kernel talks over Unix sockets in a private temporary
    folder (removed after): no TCP port is opened, and ipykernel has no reason to warn
    about unencrypted TCP. Its kernel is shut down at the end."""
    from jupyter_client import KernelManager

    with tempfile.TemporaryDirectory(prefix="distlab-kernel-") as folder:
        km = KernelManager(kernel_name=kernel_name, transport="ipc",
                           ip=os.path.join(folder, "kernel"))
        try:
            yield km
        finally:  # nbclient shuts down only the kernels it made itself
            if km.has_kernel:
                km.shutdown_kernel(now=True)


def record_timelines(directory) -> None:
    """Run in a notebook's kernel: from now on, every trace drawn by ``TRACE_PLOTS`` is also
    saved in ``directory`` (``trace-N.json``), and the cell that drew it gets an output
    saying so (``html.TRACE_MIME``, with a line of text for Jupyter)."""
    from IPython.display import display

    from simdist.trace import plots

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    saved = []

    def recording(plot):
        @functools.wraps(plot)
        def draw(trace, *args, **kwargs):
            name = f"trace-{len(saved) + 1:02d}.json"
            trace.save(folder / name)
            saved.append(name)
            title = kwargs.get("title") or trace.metadata.get("program") or "trace"
            display({H.TRACE_MIME: {"file": name, "title": title},
                     "text/plain": f"(the course site keeps this timeline's trace: {name})"},
                    raw=True)
            return plot(trace, *args, **kwargs)
        return draw

    for name in TRACE_PLOTS:
        setattr(plots, name, recording(getattr(plots, name)))


@contextmanager
def _kernel_imports_this_simdist():
    """PYTHONPATH starts with this simdist's checkout while the kernel starts."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE_ROOT), before) if p)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def execute(notebook: Path, traces: Path, timeout: float = 600,
            on_cell: Callable[[int, int], None] | None = None):
    """Run a notebook top to bottom in a fresh kernel, in its own folder (as Jupyter does),
    recording its timelines' traces in ``traces``; returns the executed notebook. A cell
    that raises keeps its error as its output and the run goes on."""
    import nbclient
    import nbformat

    traces = Path(traces).resolve()  # the kernel runs in the notebook's folder
    nb = nbformat.read(notebook, as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if traces.exists():
        shutil.rmtree(traces)
    nb.cells.insert(0, nbformat.v4.new_code_cell(
        f"import course.execute\ncourse.execute.record_timelines({str(traces)!r})"))

    def started(cell, cell_index, **_):
        if on_cell is not None and cell_index > 0:
            on_cell(code.index(cell_index - 1) + 1, len(code))

    kernel = nb.metadata.get("kernelspec", {}).get("name", "python3")
    with _kernel_imports_this_simdist(), local_kernel(kernel) as km:
        client = nbclient.NotebookClient(
            nb, km=km, timeout=timeout, allow_errors=True, on_cell_execute=started,
            resources={"metadata": {"path": str(notebook.parent)}})
        client.execute()
    hidden = nb.cells.pop(0)
    if hidden.outputs:
        raise RuntimeError(f"{notebook}: could not record the timelines' traces:\n"
                           + H.plain_text("\n".join(hidden.outputs[0].get("traceback", []))))
    return nb


def kept_run(page, cache: Path, again: bool = False):
    """The kept executed notebook of ``page`` (a ``course.site.Page``) when its code is the
    notebook's (with the notebook's Markdown), else None. Returns (notebook, where its traces are, or None)."""
    import nbformat

    source = nbformat.read(page.notebook, as_version=4)
    kept = cache / page.prefix / page.notebook.name
    traces = cache / page.prefix / f"{page.name}.traces"
    if again or not kept.is_file():
        return None
    nb = nbformat.read(kept, as_version=4)
    if not same_code(nb, source):
        return None
    page.run = "kept"
    return with_outputs_of(nb, source), traces if traces.is_dir() else None


def executed_notebook(page, cache: Path, execute_missing: bool = True,
                      again: bool = False, timeout: float = 600, on_cell=None):
    """The page's notebook with outputs: the one in ``cache`` while its code cells are the
    same as the notebook's (``kept_run``), else a fresh run (kept in ``cache``); without
    ``execute_missing``, the notebook as committed. Returns (notebook, where its traces are,
    or None)."""
    import nbformat

    kept = kept_run(page, cache, again)
    if kept is not None:
        return kept
    if not execute_missing:
        return nbformat.read(page.notebook, as_version=4), None
    traces = cache / page.prefix / f"{page.name}.traces"
    start = time.monotonic()
    nb = execute(page.notebook, traces, timeout, on_cell)
    page.seconds = time.monotonic() - start
    with atomic_output(cache / page.prefix / page.notebook.name) as tmp:
        nbformat.write(nb, tmp)  # a killed build leaves no broken kept run
    page.run = "now"
    return nb, traces
