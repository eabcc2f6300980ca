"""The course site (simdist course build / serve): pages from executed notebooks, kept runs
reused, goals and check status on the contents page, a second language, timelines' traces
for Perfetto, nothing from the network; and every page of a real lesson in Chromium."""

import base64
import json
import re
import threading

import nbformat
import pytest

from course import site as course
from course import html as course_html
from simdist.commands.cli import main
from course.notebooks import write_notebook

from tests.browser import INSTALL, Chromium, find_chromium
from tests.conftest import ROOT, left_behind

PNG = base64.b64decode(  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5Erk"
    "Jggg==")

LESSON = """\
# Lesson 01 · A tiny lesson

In this lesson you will:

- add `two` numbers;
- draw a timeline,
  on two lines.

Then more text.

## 1. Adding

```python
print(1 + 1)
```

## 2. A table

| a | b |
|---|---|
| <b>1</b> | 2 |

```python
%matplotlib inline
from simdist.trace.plots import plot_timeline
from simdist.trace.schema import Span, Trace
plot_timeline(Trace(spans=[Span("worker:0", "CPU:0", "step", "compute", 0, 100)]), title="t")
```
"""

CHECKS = """\
from course.lessons import Check

def _add(m):
    assert m.add(1, 2) == 3
    return "adds"

def _draw(m):
    m.draw()

CHECKS = [Check("add", "add", "add adds", _add), Check("draw", "draw", "draw draws", _draw)]
DIFFICULTY = {"add": 1, "draw": 2}
"""

EXERCISES = """\
def add(a, b):
    return a + b

def draw():
    raise NotImplementedError("exercise draw: draw it")
"""


@pytest.fixture
def repo(tmp_path):
    """A repository with one lesson (checks: one passes, one not done) in English and
    Chinese, and their notebooks."""
    lesson = tmp_path / "lessons" / "01_tiny"
    lesson.mkdir(parents=True)
    (lesson / "lesson.md").write_text(LESSON)
    (lesson / "checks.py").write_text(CHECKS)
    (lesson / "exercises.py").write_text(EXERCISES)
    (lesson / "solution.py").write_text(EXERCISES)
    (lesson / "lesson.zh.md").write_text(LESSON.replace("A tiny lesson", "小课")
                                         .replace("add `two` numbers", "两数相加"))
    write_notebook(lesson)
    write_notebook(lesson, lang="zh")
    return tmp_path


def executed_copy(notebook, into):
    """The notebook with outputs as a kernel would leave them: text with a progress bar
    rewritten by \\r, a figure, an error; kept in ``into`` as a kept run."""
    nb = nbformat.read(notebook, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    code[0].execution_count = 1
    code[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)
                       for text in ("[#---] 1/4", "\r[####] 4/4", "\n2\n")]  # as nbclient
    code[1].execution_count = 2
    code[1].outputs = [
        nbformat.v4.new_output("display_data", data={
            course_html.TRACE_MIME: {"file": "trace-01.json", "title": "t"},
            "text/plain": "(the course site keeps this timeline's trace: trace-01.json)"}),
        nbformat.v4.new_output("execute_result", data={
            "image/png": base64.b64encode(PNG).decode(), "text/plain": "<Figure>"},
            execution_count=2),
        nbformat.v4.new_output("error", ename="ValueError", evalue="bad",
                               traceback=["\x1b[31mValueError\x1b[0m: bad"])]
    into.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, into / notebook.name)
    traces = into / f"{notebook.stem}.traces"
    traces.mkdir()
    (traces / "trace-01.json").write_text('{"traceEvents": []}')
    return nb


def build(repo, *args):
    return main(["course", "build", "--lessons-dir", str(repo / "lessons"),
                 "-o", str(repo / "site"), *args])


def test_text_outputs_show_what_a_terminal_shows():
    assert course_html.plain_text("\x1b[31mred\x1b[0m") == "red"
    assert course_html.plain_text("[#--] 1/3\r[###] 3/3\nnext\r\n") == "[###] 3/3\nnext\n"


def test_markdown_headings_get_ids_and_raw_html_stays_text():
    headings = []
    text = course_html.markdown_html("## 2. Two `ways`\n\n<script>x</script> `a<b`", headings)
    assert '<h2 id="2-two-ways">2. Two <code>ways</code></h2>' in text
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert headings == [(2, "2-two-ways", "2. Two <code>ways</code>")]


def test_title_and_goals_come_from_the_first_markdown_cell(repo):
    nb = nbformat.read(repo / "notebooks" / "01_tiny.ipynb", as_version=4)
    assert course.title_and_goals(nb) == (
        "Lesson 01 · A tiny lesson", ["add `two` numbers;", "draw a timeline, on two lines."])


def test_kept_runs_make_the_pages_with_figures_status_traces_and_a_second_language(
        repo, capsys):
    kept = repo / "site" / "executed"
    executed_copy(repo / "notebooks" / "01_tiny.ipynb", kept)
    executed_copy(repo / "notebooks" / "zh" / "01_tiny.ipynb", kept / "zh")
    assert build(repo, "--no-execute") == 1  # a cell raised: said, and the site is built
    out = capsys.readouterr()
    assert "a cell raised: 01_tiny.html: code cell 2: ValueError: bad" in out.err
    assert "a kept run" in out.out

    site = repo / "site"
    index = (site / "index.html").read_text()
    assert "Lesson 01 · A tiny lesson" in index and "<code>two</code> numbers" in index
    assert '<span class="status started">1 of 2 checks pass</span>' in index
    assert '<div class="note">not done yet: draw</div>' in index
    assert '<section lang="zh"><h2>简体中文</h2>' in index and "两数相加" in index
    assert 'href="zh/01_tiny.html"' in index

    page = (site / "01_tiny.html").read_text()
    assert (site / "01_tiny" / "figure-01.png").read_bytes() == PNG
    assert '<img src="01_tiny/figure-01.png" alt="&lt;Figure&gt;">' in page
    assert "[####] 4/4\n2\n" in page and "[#---]" not in page  # the bar as it was left
    assert "ValueError: bad" in page and "\x1b" not in page
    assert '<td>&lt;b&gt;1&lt;/b&gt;</td>' in page  # a Markdown table, its HTML as text
    assert 'data-trace="01_tiny/traces/trace-01.json" data-title="t"' in page
    assert "the course site keeps" not in page  # the link, under the cell that drew it
    assert json.loads((site / "01_tiny" / "traces" / "trace-01.json").read_text())
    zh = (site / "zh" / "01_tiny.html").read_text()
    assert 'href="../01_tiny.html" lang="en"' in zh and "你的练习" in zh  # in its language
    assert "2 项检查中通过 1 项" in zh and "2 项检查中通过 1 项" in index
    assert nbformat.read(site / "01_tiny" / "01_tiny.ipynb", as_version=4).cells[1].outputs

    # nothing is loaded from the network: no address outside the site but Perfetto's
    for html in site.rglob("*.html"):
        addresses = re.findall(r'(?:src|href)="([^"]+)"', html.read_text())
        assert not [a for a in addresses if re.match(r"[a-z]+:", a)
                    and not a.startswith("data:")], html


def test_a_kept_run_of_other_cells_is_not_used(repo, capsys):
    kept = repo / "site" / "executed"
    executed_copy(repo / "notebooks" / "01_tiny.ipynb", kept)
    nb = nbformat.read(kept / "01_tiny.ipynb", as_version=4)
    assert nb.cells[1].cell_type == "code"
    nb.cells[1].source = "print(2 + 2)"  # a kept run of other code
    nbformat.write(nb, kept / "01_tiny.ipynb")
    assert build(repo, "01", "--no-execute", "--no-checks") == 0
    page = (repo / "site" / "01_tiny.html").read_text()
    assert "without outputs" in page and "figure-01.png" not in page
    assert "not checked" in (repo / "site" / "index.html").read_text()


def test_a_kept_run_takes_the_markdown_edited_since(repo, capsys):
    kept = repo / "site" / "executed"
    executed_copy(repo / "notebooks" / "01_tiny.ipynb", kept)
    lesson = repo / "lessons" / "01_tiny"
    (lesson / "lesson.md").write_text(LESSON.replace("Then more text.", "Then new words."))
    write_notebook(lesson)  # the same code, other Markdown
    assert build(repo, "01", "--no-execute", "--no-checks") == 1  # its kept cell error
    assert "a kept run: its code has not changed" in capsys.readouterr().out
    page = (repo / "site" / "01_tiny.html").read_text()
    assert "Then new words." in page and "Then more text." not in page
    assert "[####] 4/4\n2\n" in page and "figure-01.png" in page  # the kept outputs


def test_the_thumbnail_is_the_key_figure(tmp_path):
    assets = course_html.Assets(tmp_path, "01_tiny")
    for size in (10, 300, 50):
        assets.add(PNG + b"\0" * size, ".png")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Lesson")])
    assert course.key_figure(nb, assets) == "figure-02.png"  # the most drawn in it
    nb.cells.append(nbformat.v4.new_markdown_cell("text <!-- key figure: 3 -->"))
    assert course.key_figure(nb, assets) == "figure-03.png"  # the one the lesson names
    nb.cells[-1].source = "<!-- key figure: 9 -->"  # no such figure: the largest again
    assert course.key_figure(nb, assets) == "figure-02.png"
    assert course.key_figure(nb, course_html.Assets(tmp_path, "none")) == ""


def test_the_served_site_shows_the_learners_progress_at_view_time(repo, tmp_path):
    import urllib.request

    assert build(repo, "--no-execute", "--no-checks") == 0
    index = (repo / "site" / "index.html").read_text()
    assert '<span class="live" data-lesson="01_tiny" data-lang="en">' in index
    assert '<span class="live" data-lesson="01_tiny" data-lang="zh">' in index
    workspace = tmp_path / "mine"
    workspace.mkdir()
    state = workspace / ".progress.json"
    server = course.make_server(repo / "site", 0, lambda: course.workspace_progress(
        repo / "lessons", workspace))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/progress.json"
    try:
        def progress():
            with urllib.request.urlopen(url, timeout=10) as answer:
                return json.loads(answer.read())["lessons"]["01_tiny"]

        assert progress() == {"exercises": ["add", "draw"], "passed": [],
                              "unchecked": ["add", "draw"]}
        # simdist check records each run in the workspace: read at each request
        state.write_text(json.dumps({"01_tiny": {"add": {"failures": 0, "passed": True},
                                                 "draw": {"failures": 2, "passed": False}}}))
        assert progress() == {"exercises": ["add", "draw"], "passed": ["add"], "unchecked": []}
        state.write_text("[")  # a broken file: an error answer, the server goes on
        with pytest.raises(urllib.error.HTTPError, match="500"):
            progress()
        with urllib.request.urlopen(url.replace("progress.json", "index.html")) as page:
            assert b"data-lesson" in page.read()
    finally:
        server.shutdown()
        server.server_close()


def test_bad_input_is_one_line(repo, capsys):
    assert build(repo, "07") == 2
    assert "unknown lesson '07'" in capsys.readouterr().err
    assert build(repo, "--timeout", "0") == 2
    assert "--timeout 0.0: expected seconds > 0" in capsys.readouterr().err
    assert build(repo, "--jobs", "0") == 2
    assert "--jobs 0: expected 1 to 64" in capsys.readouterr().err
    assert main(["course"]) == 2
    assert main(["course", "serve", "-d", str(repo / "nothing")]) == 2
    assert "run simdist course build first" in capsys.readouterr().err


@pytest.mark.notebook
@pytest.mark.timeout(120)
def test_executing_a_notebook_keeps_the_traces_of_its_timelines(repo, capfd):
    seen = []
    pages = course.build_course(repo / "site", repo / "lessons", checks=False, log=seen.append,
                                on_cell=lambda page, k, n: seen.append((page.lang, k, n)),
                                jobs=2)  # both editions at once, a kernel each
    assert [(p.lang, p.run, p.figures, p.traces, p.errors) for p in pages] == [
        ("en", "now", 1, 1, []), ("zh", "now", 1, 1, [])]
    assert ("en", 2, 2) in seen and ("zh", 2, 2) in seen
    wrote = [line for line in seen if isinstance(line, str) and "wrote" in line]
    assert len(wrote) == 2 and all(re.search(r"\(executed in \d+ s\)$", w) for w in wrote)
    assert all(p.seconds > 0 for p in pages)
    # the kernels talk over Unix sockets: no TCP port, no warning about one; none is left
    assert "TCP" not in capfd.readouterr().err
    psutil = pytest.importorskip("psutil")
    assert left_behind() == []
    trace = repo / "site" / "01_tiny" / "traces" / "trace-01.json"
    assert json.loads(trace.read_text())["traceEvents"]
    page = (repo / "site" / "01_tiny.html").read_text()
    assert 'data-trace="01_tiny/traces/trace-01.json" data-title="t"' in page
    # the next build reuses the kept runs
    again = course.build_course(repo / "site", repo / "lessons", checks=False, log=seen.append)
    assert [p.run for p in again] == ["kept", "kept"]


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_every_page_of_a_real_lesson_renders_in_chromium(tmp_path):
    binary = find_chromium()
    if binary is None:
        pytest.skip(f"no Chromium or Chrome found on PATH; install one: {INSTALL}")
    site = tmp_path / "site"
    pages = course.build_course(site, only=[ROOT / "lessons" / "01_collectives"],
                                log=lambda line: None)
    assert pages[0].figures >= 4 and pages[0].traces >= 2 and not pages[0].errors
    mine = {"lessons": {"01_collectives": {"exercises": ["ring_all_reduce", "predict_fastest"],
                                           "passed": ["ring_all_reduce"], "unchecked": []}}}
    server = course.make_server(site, 0, lambda: mine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with Chromium(binary) as browser:
            for html in sorted(site.rglob("*.html")):
                for url in (f"{base}/{html.relative_to(site)}", html.as_uri()):
                    report = browser.load(url)
                    assert report.problems() == [], url
                    figures = len(list((html.parent / html.stem).glob("figure-*")))
                    if html.name == "index.html":  # a lesson's first figure on its card
                        figures = sum(1 for p in pages if p.figures)
                    assert len(report.images) == figures, url
            browser.load(f"{base}/index.html")  # over http, the badge is the learner's now
            badge = browser.evaluate(
                "new Promise(done => setTimeout(() => done(document.querySelector("
                "'.live[data-lesson=\"01_collectives\"] .status').textContent), 1000))")
            assert badge == "1 of 2 exercises pass (your workspace now)", badge
            browser.load(f"{base}/zh/01_collectives.html")  # Chinese as glyphs, not boxes
            fonts = browser.platform_fonts("h1")  # the lesson's title, in Chinese
            assert any("CJK" in family and glyphs for family, glyphs in fonts.items()), \
                f"{fonts}: no CJK font drew the Chinese title: apt-get install fonts-noto-cjk"
            browser.load(f"{base}/01_collectives.html")  # over http, a trace can be fetched
            events = browser.evaluate(
                "fetch(document.querySelector('button[data-trace]').dataset.trace)"
                ".then(r => r.json()).then(trace => trace.traceEvents.length)")
            assert events > 0
            browser.load((site / "01_collectives.html").as_uri())  # over file://, it says how
            note = browser.evaluate(
                "document.querySelector('button[data-trace]').click(),"
                "document.querySelector('.perfetto-note').textContent")
            assert "simdist course serve" in note
    finally:
        server.shutdown()
        server.server_close()
