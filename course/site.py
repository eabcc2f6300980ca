"""The course site: every lesson's notebook, executed, as a page with its figures and the
traces of its timelines, and a contents page with each lesson's goals and check status.

``build_course`` is what ``simdist course build`` runs. A notebook is executed in a Jupyter
kernel (nbclient, over Unix sockets: no TCP port) once and kept (``executed/``); it is
executed again only when its code changes (a kept run takes the new Markdown as it is), and
the notebooks to execute run a few at a time (``jobs``: one kernel per core). While it runs, ``record_timelines`` (run in the kernel, in a cell that is not kept)
saves the trace of every timeline the lesson draws, so that the page can offer it to Perfetto.
Lessons come from ``lessons.list_lessons``, their notebooks from ``notebooks/`` and, for each
other edition, from ``notebooks/LANG/`` (``notebooks.notebook_path``: ``notebooks/zh/``).
The HTML is in ``html.py``; nothing on the site is loaded from the network.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from course import html as H
from course.lang import LANGUAGES as CHECK_LANGUAGES
from course.lang import localize, word
from course.checks import run_checks
from course.folders import lessons_dir, list_lessons
from course.guides import guides_html, write_guides
from course.notebooks import editions, notebook_path
from simdist.base.files import atomic_output, write_atomic

#: the plots of simdist.trace.plots that take a trace first: the traces the site offers
TRACE_PLOTS = ("plot_timeline", "plot_queue_occupancy")

#: the name of each edition's language
LANGUAGES = {"en": "English", "zh": "简体中文"}

#: the folder that holds this package (and simdist beside it): the kernel imports them from it
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Page:
    """One lesson in one language: its notebook, what the page shows, where it goes."""

    lesson: Path
    lang: str
    notebook: Path
    title: str = ""
    goals: list = field(default_factory=list)
    run: str = ""  # "kept": a kept run reused; "now": executed by this build; "": neither
    errors: list = field(default_factory=list)
    figures: int = 0
    key_figure: str = ""  # the figure the contents page shows as the lesson's thumbnail
    traces: int = 0

    @property
    def name(self) -> str:
        return self.lesson.name

    @property
    def prefix(self) -> str:
        """The page's folder under the site ('' or 'LANG/')."""
        return "" if self.lang == "en" else f"{self.lang}/"

    @property
    def href(self) -> str:
        return f"{self.prefix}{self.name}.html"

    @property
    def executed(self) -> bool:
        return bool(self.run)


@dataclass
class Status:
    """A lesson's ``simdist check`` results when the site was built (None: not run)."""

    results: list | None
    error: str = ""

    @property
    def kind(self) -> str:
        if not self.results:
            return "unknown"
        if all(r.passed for r in self.results):
            return "done"
        return "started" if any(not r.not_done for r in self.results) else "todo"

    def text(self, lang: str = "en") -> str:
        """"k of n checks pass" in ``lang``, or why there is no status."""
        if self.results:
            lang = lang if lang in CHECK_LANGUAGES else "en"
            return word("summary", lang, passed=sum(r.passed for r in self.results),
                        total=len(self.results))
        return self.error or "not checked (built with --no-checks)"

    def not_done(self, lang: str = "en") -> str:
        """"not done yet: NAMES" in ``lang``, or ''."""
        names = sorted({r.exercise for r in self.results or [] if r.not_done})
        lang = lang if lang in CHECK_LANGUAGES else "en"
        return word("summary_not_done", lang, names=", ".join(names)).strip(" ()（）") \
            if names else ""


# -- finding the notebooks -----------------------------------------------------------------------

def pages_of(lessons: list[Path]) -> list[Page]:
    """A page for every lesson in every edition it has a notebook of (``notebooks.editions``),
    English first."""
    langs = list(dict.fromkeys(lang for lesson in lessons for lang in editions(lesson)))
    return [Page(lesson, lang, notebook_path(lesson, lang)) for lang in langs
            for lesson in lessons
            if lang in editions(lesson) and notebook_path(lesson, lang).is_file()]


# -- executing -----------------------------------------------------------------------------------

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
    import copy

    outputs = iter([c for c in kept.cells if c.cell_type == "code"])
    nb = copy.deepcopy(source)
    nb.cells = [next(outputs) if c.cell_type == "code" else c for c in nb.cells]
    return nb


@contextmanager
def local_kernel(kernel_name: str = "python3"):
    """A Jupyter kernel manager whose kernel talks over Unix sockets in a private temporary
    folder (removed after): no TCP port is opened, and ipykernel has no reason to warn
    about unencrypted TCP."""
    from jupyter_client import KernelManager

    with tempfile.TemporaryDirectory(prefix="distlab-kernel-") as folder:
        yield KernelManager(kernel_name=kernel_name, transport="ipc",
                            ip=os.path.join(folder, "kernel"))


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
        f"import course.site\ncourse.site.record_timelines({str(traces)!r})"))

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


def kept_run(page: Page, cache: Path, again: bool = False):
    """The page's kept executed notebook when its code is the notebook's (with the
    notebook's Markdown), else None. Returns (notebook, where its traces are, or None)."""
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


def executed_notebook(page: Page, cache: Path, execute_missing: bool = True,
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
    nb = execute(page.notebook, traces, timeout, on_cell)
    with atomic_output(cache / page.prefix / page.notebook.name) as tmp:
        nbformat.write(nb, tmp)  # a killed build leaves no broken kept run
    page.run = "now"
    return nb, traces


# -- what a page says ----------------------------------------------------------------------------

def title_and_goals(nb) -> tuple[str, list[str]]:
    """The lesson's title (its first '# ' heading) and goals (the first bullet list of its
    first Markdown cell, each item as Markdown)."""
    first = next((H._text(c.source) for c in nb.cells if c.cell_type == "markdown"), "")
    title, goals, item = "", [], None
    for line in first.splitlines():
        if not title and line.startswith("# "):
            title = line[2:].strip()
        elif line.startswith(("- ", "* ")):
            item = [line[2:].strip()]
            goals.append(item)
        elif item is not None and line.startswith("  ") and line.strip():
            item.append(line.strip())
        elif item is not None:
            break
    return title, [" ".join(g) for g in goals]


def lesson_status(lesson: Path) -> Status:
    """``simdist check``'s results for the lesson's exercises, as they are now."""
    try:
        return Status(run_checks(lesson))
    except Exception as error:  # a broken checks.py: the site still builds, and says so
        return Status(None, f"checks could not run: {type(error).__name__}: {error}")


def _inline(text: str) -> str:
    return H._markdown().renderInline(text)


def _status_html(status: Status, details: bool = True, lang: str = "en") -> str:
    """A badge "k of n checks pass", a bar, and (``details``) what is not done yet."""
    if not status.results:
        return f'<span class="status unknown">{H.esc(status.text(lang))}</span>'
    done, total = sum(r.passed for r in status.results), len(status.results)
    rest = status.not_done(lang)
    more = f'<div class="note">{H.esc(rest)}</div>' if details and rest else ""
    return (f'<span class="status {status.kind}">{H.esc(status.text(lang))}</span>'
            f'<div class="bar" title="{done} of {total}"><span style="width:'
            f'{100 * done // total}%"></span></div>{more}')


def _checks_html(page: Page, status: Status) -> str:
    number, say = page.name[:2], H.words(page.lang)
    items = "".join(f'<li class="{"pass" if r.passed else "fail"}">'
                    f'{H.esc(localize(r.title or r.name, page.lang))}</li>'
                    for r in status.results or [])
    return (f'<details class="note"><summary>{say["yours"]} (<code>simdist check {number}'
            f'</code>, {say["built"]}): '
            f'{_status_html(status, details=False, lang=page.lang)}</summary>'
            f'<ul class="checks">{items}</ul></details>')


#: a lesson names its key figure (the thumbnail) in its Markdown: <!-- key figure: 3 -->
_KEY_FIGURE = re.compile(r"<!--\s*key figure:\s*(\d+)\s*-->")


def key_figure(nb, assets) -> str:
    """The page's key figure: the one its Markdown names, else its largest PNG (the one
    with the most drawn in it), else ''."""
    for cell in nb.cells:
        m = _KEY_FIGURE.search(H._text(cell.source)) if cell.cell_type == "markdown" else None
        if m and 1 <= int(m.group(1)) <= len(assets.written):
            return assets.written[int(m.group(1)) - 1]
    pngs = [name for name in assets.written if name.endswith(".png")]
    return max(pngs, key=lambda name: (assets.folder / name).stat().st_size, default="")


def lesson_page(page: Page, nb, traces: Path | None, status: Status, out: Path,
                pages: list[Page]) -> str:
    """Write the page's figures and traces under ``out`` and return its HTML."""
    import nbformat

    folder = out / page.prefix / page.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    assets = H.Assets(folder, page.name)
    if traces is not None:
        shutil.copytree(traces, folder / "traces")
    with atomic_output(folder / page.notebook.name) as tmp:  # the executed notebook
        nbformat.write(nb, tmp)
    page.title, page.goals = title_and_goals(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    page.errors = [f"code cell {i}: {o.get('ename')}: {o.get('evalue')}"
                   for i, c in enumerate(code, 1)
                   for o in c.get("outputs", []) if o.get("output_type") == "error"]
    headings: list = []
    cells = []
    for cell in nb.cells:
        page.traces += len(H.traces_of(cell))
        cells.append(H.cell_html(cell, assets, headings, f"{page.name}/traces", page.lang))
    page.figures = len(assets.written)
    page.key_figure = key_figure(nb, assets)
    same_lang = [p for p in pages if p.lang == page.lang]
    at = same_lang.index(page)
    prev = same_lang[at - 1] if at > 0 else None
    nxt = same_lang[at + 1] if at + 1 < len(same_lang) else None
    root = "../" if page.prefix else ""
    other = [p for p in pages if p.name == page.name and p.lang != page.lang]
    switch = " ".join(f'<a href="{root}{p.href}" lang="{p.lang}">'
                      f'{H.esc(LANGUAGES.get(p.lang, p.lang))}</a>' for p in other)
    say = H.words(page.lang)
    note = "" if page.executed else f'<p class="note">{say["no_outputs"]}</p>'
    contents = "".join(f'<li><a href="#{ident}">{text}</a></li>'
                       for level, ident, text in headings if level == 2)
    body = f"""<main>
<nav class="top"><a href="{root}index.html">{say["course"]}</a>
<span>{H.esc(page.name)}</span><span class="spacer"></span>{switch}
<a href="{page.name}/{page.notebook.name}" download>{say["notebook"]}</a></nav>
{note}{_checks_html(page, status)}
<details class="note"><summary>{say["contents"]}</summary><ul>{contents}</ul></details>
{"".join(cells)}
<footer class="pager"><span>{_pager_link(prev, "← ")}</span>
<span>{_pager_link(nxt, "", " →")}</span></footer>
</main>"""
    return H.page(page.title or page.name, body, root, page.lang)


def _pager_link(page: Page | None, before="", after="") -> str:
    if page is None:
        return ""
    return f'<a href="{page.name}.html">{before}{H.esc(page.name)}{after}</a>'


def index_page(pages: list[Page], statuses: dict, guides: list | None = None) -> str:
    """The contents page: for each language, each lesson with its goals and status; then the
    guides (``course.guides``)."""
    sections = []
    for lang in dict.fromkeys(p.lang for p in pages):
        cards = []
        say = H.words(lang)
        for page in (p for p in pages if p.lang == lang):
            goals = "".join(f"<li>{_inline(g)}</li>" for g in page.goals)
            what = [f'<a href="{page.href}">{say["read"]}</a>',
                    f'<a href="{page.prefix}{page.name}/{page.notebook.name}" download>'
                    f'{say["notebook"]}</a>', f'{page.figures} {say["figures"]}',
                    f'{page.traces} {say["traces"]}']
            thumb = (f'<a href="{page.href}"><img class="thumb" src="{page.prefix}{page.name}/'
                     f'{page.key_figure}" alt="the key figure of {H.esc(page.name)}"></a>'
                     if page.key_figure else "")
            cards.append(f"""<article class="lesson" id="{H.esc(page.prefix)}{page.name}">
{thumb}<h3><a href="{page.href}">{H.esc(page.title or page.name)}</a></h3>
{_status_html(statuses[page.name], lang=lang)}
<ul>{goals}</ul>
<p class="links">{" · ".join(what)}</p>
</article>""")
        heading = "Lessons" if lang == "en" else LANGUAGES.get(lang, lang)
        sections.append(f'<section lang="{lang}"><h2>{H.esc(heading)}</h2>'
                        f'<div class="lessons">{"".join(cards)}</div></section>')
    results = [r for status in statuses.values() for r in status.results or []]
    progress = (f"<p>Your progress over the {len(statuses)} lessons: "
                f"{_status_html(Status(results), details=False)}</p>") if results else ""
    body = f"""<main>
<h1>DistLab: distributed TensorFlow, simulated and real</h1>
<p>Each lesson explains one idea of distributed training, shows it in the simulator
(<code>simdist</code>) and on real TensorFlow (<code>realdist</code>), and ends with exercises
that are checked automatically. These pages are the lessons' notebooks run top to bottom;
to run and edit them yourself, open them with <code>make lab</code>; to check your exercises,
run <code>simdist check NN</code>. Every timeline's trace can be opened in Perfetto.</p>
{progress}
{"".join(sections)}
{guides_html(guides or [])}
<p class="note">Status: the checks of each lesson run on its exercises when this site was
built (<code>simdist course build</code>).</p>
</main>"""
    return H.page("DistLab course", body, "")


# -- the site ------------------------------------------------------------------------------------

def build_course(out, folder=None, only=None, executed=None, execute_missing=True,
                 again=False, checks=True, timeout: float = 600,
                 log: Callable[[str], None] = print,
                 on_cell: Callable[[Page, int, int], None] | None = None,
                 jobs: int = 1) -> list[Page]:
    """Write the site into ``out``: ``index.html``, a page per lesson and language, their
    figures, traces and executed notebooks, ``course.css`` and ``course.js``; with every lesson
    built (no ``only``), the guides of the checkout's ``docs/`` beside them.

    ``only``: lesson folders to build (default: every lesson of ``folder``); ``executed``:
    where executed notebooks are kept and reused (default ``out/executed``); ``again``:
    execute even when a kept one is current; ``execute_missing=False``: never execute
    (notebooks without a kept run are shown without outputs); ``checks``: run each lesson's
    checks for its status; ``jobs``: notebooks executed at once (a kernel each). ``log``
    gets a line per step, ``on_cell(page, i, n)`` is called before each code cell runs (from
    the job's thread). Returns the pages, with what each one holds.
    """
    out = Path(out)
    lessons = list(only) if only else list_lessons(folder)
    cache = Path(executed) if executed is not None else out / "executed"
    pages = pages_of(lessons)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "course.css", H.STYLE + H.pygments_css())
    write_atomic(out / "course.js", H.SCRIPT)
    statuses = {}
    for i, lesson in enumerate(lessons, 1):
        if checks:
            log(f"[{i}/{len(lessons)}] {lesson.name}: running its checks (simdist check)")
        statuses[lesson.name] = lesson_status(lesson) if checks else Status(None)
    def run(i, page):
        log(f"[{i}/{len(pages)}] {page.prefix}{page.name}: its notebook")
        return executed_notebook(
            page, cache, execute_missing, again, timeout,
            (lambda k, n, page=page: on_cell(page, k, n)) if on_cell else None)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:  # a kernel per job
        runs = [pool.submit(run, i, page) for i, page in enumerate(pages, 1)]
        for page, done in zip(pages, runs):
            nb, traces = done.result()
            html = lesson_page(page, nb, traces, statuses[page.name], out, pages)
            write_atomic(out / page.href, html)
            log(f"      wrote {page.href}: {page.figures} figures, {page.traces} traces"
                + (f", {len(page.errors)} cell error(s)" if page.errors else "")
                + {"kept": " (a kept run: its code has not changed)", "now": "",
                   "": " (no outputs: not executed)"}[page.run])
    docs = lessons_dir(folder).resolve().parent / "docs"
    guides = write_guides(out, docs) if docs.is_dir() and not only else []
    if guides:
        log(f"guides: {len(guides)} pages of docs/ in {out / 'docs'}")
    write_atomic(out / "index.html", index_page(pages, statuses, guides))
    return pages


def make_server(folder, port: int = 8000):
    """An HTTP server of ``folder`` on 127.0.0.1 only (``port`` 0: any free port); the site
    needs http for its "Open in Perfetto" buttons. Call ``serve_forever()`` on it."""
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    return ThreadingHTTPServer(("127.0.0.1", port), handler)
