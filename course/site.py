"""The course site: every lesson's notebook, executed, as a page with its figures and the
traces of its timelines, and a contents page with each lesson's goals and check status.

``build_course`` is what ``simdist course build`` runs. A notebook is executed once and kept
(``course.execute``: a kept run is reused while the notebook's code is unchanged), the
traces of its timelines recorded so that the page can offer them to Perfetto; the notebooks
to execute run a few at a time (``jobs``: one kernel per core).
Lessons come from ``lessons.list_lessons``, their notebooks from ``notebooks/`` and, for each
other edition, from ``notebooks/LANG/`` (``notebooks.notebook_path``: ``notebooks/zh/``).
The HTML is in ``html.py``; nothing on the site is loaded from the network.
"""

from __future__ import annotations

import functools
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from course import html as H
from course.execute import executed_notebook
from course.lang import LANGUAGES as CHECK_LANGUAGES
from course.lang import localize, word
from course.checks import run_checks
from course.folders import lessons_dir, list_lessons
from course.guides import guides_html, write_guides
from course.notebooks import editions, notebook_path
from simdist.base.files import atomic_output, write_atomic

#: the name of each edition's language
LANGUAGES = {"en": "English", "zh": "简体中文"}

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
    seconds: float = 0.0  # how long executing its notebook took, when this build did

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


def _live(lesson: str, lang: str, badge: str) -> str:
    """A badge that course.js replaces with the learner's progress at view time, when the
    site is served by ``simdist course serve`` (``progress.json``)."""
    return f'<span class="live" data-lesson="{H.esc(lesson)}" data-lang="{lang}">{badge}</span>'


def _checks_html(page: Page, status: Status) -> str:
    number, say = page.name[:2], H.words(page.lang)
    items = "".join(f'<li class="{"pass" if r.passed else "fail"}">'
                    f'{H.esc(localize(r.title or r.name, page.lang))}</li>'
                    for r in status.results or [])
    return (f'<details class="note"><summary>{say["yours"]} (<code>simdist check {number}'
            f'</code>, {say["built"]}): '
            f'{_live(page.name, page.lang, _status_html(status, details=False, lang=page.lang))}'
            f'</summary>'
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
{_live(page.name, lang, _status_html(statuses[page.name], lang=lang))}
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
<p class="note">The Chinese edition (简体中文) needs a CJK font in the browser and for its
figures: if its text shows as empty boxes, install one (<code>apt-get install
fonts-noto-cjk</code>; the pages ask for Noto Sans CJK SC) and rebuild.</p>

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
                + {"kept": " (a kept run: its code has not changed)",
                   "now": f" (executed in {page.seconds:.0f} s)",
                   "": " (no outputs: not executed)"}[page.run])
    docs = lessons_dir(folder).resolve().parent / "docs"
    guides = write_guides(out, docs) if docs.is_dir() and not only else []
    if guides:
        log(f"guides: {len(guides)} pages of docs/ in {out / 'docs'}")
    write_atomic(out / "index.html", index_page(pages, statuses, guides))
    return pages


def workspace_progress(folder=None, workspace=None) -> dict:
    """The learner's progress as the workspace's ``.progress.json`` holds it now (every
    ``simdist check`` records it): for each lesson, its exercises, those whose checks passed
    last time, and those never checked. What ``simdist course serve`` answers at
    ``/progress.json``."""
    from course.checks import load_lesson_checks
    from course.workspace import Progress

    progress = Progress(workspace)
    lessons = {}
    for lesson in list_lessons(folder):
        exercises = list(load_lesson_checks(lesson).exercises)
        seen = progress.data.get(lesson.name, {})
        lessons[lesson.name] = {
            "exercises": exercises,
            "passed": [e for e in exercises if seen.get(e, {}).get("passed")],
            "unchecked": [e for e in exercises if e not in seen]}
    return {"lessons": lessons}


def make_server(folder, port: int = 8000, progress: Callable[[], dict] | None = None):
    """An HTTP server of ``folder`` on 127.0.0.1 only (``port`` 0: any free port); the site
    needs http for its "Open in Perfetto" buttons. ``progress()``: what ``/progress.json``
    answers at each request (the learner's progress now), else it is not found. Call
    ``serve_forever()`` on it."""
    import json
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path.split("?")[0] != "/progress.json" or progress is None:
                return super().do_GET()
            try:
                body = json.dumps(progress()).encode()
            except Exception as error:  # noqa: BLE001 (a broken workspace: say so, go on)
                self.send_error(500, f"progress: {type(error).__name__}: {error}")
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    handler = functools.partial(Quiet, directory=str(folder))
    return ThreadingHTTPServer(("127.0.0.1", port), handler)
