"""HTML of the course site: an executed notebook as a page, and the contents page.

What ``jupyter nbconvert --to html`` does for one notebook, with nothing loaded from the
network (nbconvert's templates fetch RequireJS and MathJax from a CDN): Markdown cells through
markdown-it-py, code through Pygments, outputs as text, images written beside the page
(``Assets``), errors as text. ``course.py`` decides what goes on which page.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from simdist.base.files import write_atomic

#: ANSI colour codes in tracebacks and coloured output
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

#: the output ``course.record_timelines`` adds to a cell that drew a timeline: the name of
#: the trace file it saved and the plot's title
TRACE_MIME = "application/vnd.distlab.trace+json"

#: the site's own words, by the language of the page
WORDS = {
    "en": {"course": "DistLab course", "notebook": "executed notebook",
           "yours": "Your exercises", "built": "when this page was built",
           "contents": "On this page", "read": "read the lesson", "figures": "figures",
           "traces": "traces for Perfetto", "trace": "Trace of this timeline:",
           "open": "Open in Perfetto",
           "no_outputs": "This page shows the notebook without outputs (built with "
                         "--no-execute): run <code>simdist course build</code> to see its "
                         "figures."},
    "zh": {"course": "DistLab 课程", "notebook": "已运行的 notebook", "yours": "你的练习",
           "built": "生成本页时", "contents": "本页内容", "read": "阅读本课",
           "figures": "幅图", "traces": "条可在 Perfetto 中打开的 trace",
           "trace": "这条时间线的 trace：", "open": "在 Perfetto 中打开",
           "no_outputs": "本页显示的是没有输出的 notebook（用 --no-execute 生成）：运行 "
                         "<code>simdist course build</code> 即可看到图。"},
}


def words(lang: str) -> dict:
    """The site's words in ``lang`` (English where it has none)."""
    return WORDS.get(lang, WORDS["en"])


#: output images, by MIME type, and the file suffix they are written with
IMAGE_TYPES = {"image/png": ".png", "image/jpeg": ".jpg", "image/svg+xml": ".svg"}


@dataclass
class Assets:
    """The folder where a page's figures go (``folder``), named from the page
    (``href`` is that folder relative to the page)."""

    folder: Path
    href: str
    written: list = field(default_factory=list)

    def add(self, data: bytes, suffix: str) -> str:
        """Write one figure; its address relative to the page."""
        name = f"figure-{len(self.written) + 1:02d}{suffix}"
        write_atomic(self.folder / name, data)
        self.written.append(name)
        return f"{self.href}/{name}"


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def plain_text(text: str) -> str:
    """Output text as a terminal shows it: colour codes removed, and a line rewritten with
    ``\\r`` (a progress bar) shown as it was left."""
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    return "\n".join(line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else
                     line.rstrip("\r") for line in text.split("\n"))


# -- Markdown ------------------------------------------------------------------------------------

def _markdown():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table")


def slug(text: str) -> str:
    """An HTML id from a heading: lower case, words joined by '-'."""
    words = re.findall(r"[\w]+", text.lower())
    return "-".join(words) or "section"


def markdown_html(text: str, headings: list | None = None) -> str:
    """Markdown as HTML (raw HTML in it is shown as text); every heading gets an id, and
    ``headings`` (if given) receives (level, id, its text as HTML) of each."""
    md = _markdown()
    tokens = md.parse(text)
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            inline = tokens[i + 1]
            ident = slug(inline.content)
            token.attrSet("id", ident)
            if headings is not None:
                headings.append((int(token.tag[1]), ident,
                                 md.renderer.render(inline.children, md.options, {})))
    return md.renderer.render(tokens, md.options, {})


# -- code and outputs ----------------------------------------------------------------------------

def code_html(source: str) -> str:
    """A code cell's source, highlighted as Python (IPython's %magics included)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    body = highlight(source, PythonLexer(), HtmlFormatter(nowrap=True))
    return f'<pre class="code highlight">{body}</pre>'


def pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs(".highlight")


def output_html(output, assets: Assets) -> str:
    """One output of a code cell."""
    kind = output.get("output_type")
    if kind == "stream":
        name = output.get("name", "stdout")
        return f'<pre class="output {esc(name)}">{esc(plain_text(_text(output["text"])))}</pre>'
    if kind == "error":
        lines = "\n".join(output.get("traceback") or
                          [f"{output.get('ename')}: {output.get('evalue')}"])
        return f'<pre class="output error">{esc(plain_text(lines))}</pre>'
    data = output.get("data", {})
    if TRACE_MIME in data:  # shown as a link under the cell's outputs (cell_html)
        return ""
    for mime, suffix in IMAGE_TYPES.items():
        if mime in data:
            raw = _text(data[mime])
            blob = raw.encode() if mime == "image/svg+xml" else base64.b64decode(raw)
            alt = plain_text(_text(data.get("text/plain", "figure")))
            return (f'<figure class="output"><img src="{esc(assets.add(blob, suffix))}" '
                    f'alt="{esc(alt)}"></figure>')
    if "text/html" in data:  # the notebook's own HTML (a table): shown as the notebook does
        return f'<div class="output html">{_text(data["text/html"])}</div>'
    if "text/markdown" in data:
        return f'<div class="output markdown">{markdown_html(_text(data["text/markdown"]))}</div>'
    if "text/plain" in data:
        return f'<pre class="output result">{esc(plain_text(_text(data["text/plain"])))}</pre>'
    return ""


def _text(value) -> str:
    """A notebook field that is a string or a list of lines."""
    return "".join(value) if isinstance(value, list) else str(value)


def merged_streams(outputs) -> list:
    """The outputs with each run of text printed to one stream joined into one, as Jupyter
    shows them (a progress bar's ``\r`` updates arrive as outputs of their own)."""
    merged = []
    for output in outputs:
        last = merged[-1] if merged else None
        if (output.get("output_type") == "stream" and last is not None
                and last.get("output_type") == "stream" and last.get("name") == output.get("name")):
            merged[-1] = {**last, "text": _text(last["text"]) + _text(output["text"])}
        else:
            merged.append(output)
    return merged


def traces_of(cell) -> list[dict]:
    """What ``record_timelines`` said of the traces a code cell drew: {"file", "title"}."""
    return [o["data"][TRACE_MIME] for o in cell.get("outputs", [])
            if TRACE_MIME in o.get("data", {})]


def cell_html(cell, assets: Assets, headings: list, traces: str = "", lang: str = "en") -> str:
    """One cell: Markdown as HTML; code with its outputs, then a link to each trace it drew
    (files in the folder ``traces``, relative to the page)."""
    if cell.get("cell_type") == "markdown":
        return f'<section class="markdown">{markdown_html(_text(cell["source"]), headings)}' \
               '</section>'
    if cell.get("cell_type") != "code":
        return f'<pre class="raw">{esc(_text(cell["source"]))}</pre>'
    outputs = "".join(output_html(o, assets) for o in merged_streams(cell.get("outputs", [])))
    links = trace_links([(f"{traces}/{t['file']}", t["title"]) for t in traces_of(cell)], lang)
    return (f'<section class="cell">{code_html(_text(cell["source"]))}'
            f'{outputs}{links}</section>')


# -- pages ---------------------------------------------------------------------------------------

def page(title: str, body: str, root: str, lang: str = "en") -> str:
    """A whole HTML page; ``root`` is the site's top folder relative to the page."""
    return f"""<!DOCTYPE html>
<html lang="{esc(lang)}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{root}course.css">
<script src="{root}course.js" defer></script>
</head>
<body>
{body}
</body>
</html>
"""


STYLE = """
body { font: 16px/1.55 system-ui, -apple-system, "Segoe UI", "Noto Sans", "PingFang SC",
       "Microsoft YaHei", "Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC",
       "WenQuanYi Zen Hei", sans-serif;
       color: #1d2430; margin: 0; background: #f6f7f9; }
main { max-width: 980px; margin: 0 auto; padding: 1.5rem 2rem 4rem; background: #fff;
       min-height: 100vh; box-shadow: 0 0 12px rgba(0, 0, 0, 0.06); }
nav.top { display: flex; gap: 1rem; flex-wrap: wrap; align-items: baseline;
          font-size: 0.9rem; border-bottom: 1px solid #e3e6ea; padding-bottom: 0.6rem; }
nav.top .spacer { flex: 1; }
a { color: #0b5cad; }
h1 { font-size: 1.8rem; line-height: 1.25; }
h2 { margin-top: 2.2rem; border-bottom: 1px solid #e3e6ea; padding-bottom: 0.2rem; }
code, pre { font: 13px/1.45 ui-monospace, "SFMono-Regular", Menlo, Consolas,
            "Noto Sans Mono CJK SC", "Noto Sans CJK SC", monospace; }

:not(pre) > code { background: #f0f2f5; padding: 0.05em 0.3em; border-radius: 3px; }
pre { overflow-x: auto; padding: 0.6rem 0.8rem; margin: 0.4rem 0; border-radius: 4px; }
pre.code { background: #f5f7fa; border-left: 3px solid #9db4d0; }
pre.output { background: #fff; border-left: 3px solid #d9dee4; }
pre.output.stderr { background: #fff8f0; border-left-color: #f0b37e; }
pre.output.error { background: #fff0f0; border-left-color: #d9534f; }
figure.output { margin: 0.5rem 0; }
figure.output img { max-width: 100%; height: auto; border: 1px solid #eceff2; }
table { border-collapse: collapse; margin: 0.8rem 0; }
th, td { border: 1px solid #d9dee4; padding: 0.25rem 0.6rem; text-align: left; }
.cell { margin: 1rem 0; }
.traces { font-size: 0.85rem; margin: 0.3rem 0 0; color: #4a5563; }
.traces button { font-size: 0.8rem; margin-left: 0.3rem; cursor: pointer; }
.note { font-size: 0.85rem; color: #4a5563; }
.status { display: inline-block; font-size: 0.8rem; padding: 0.1rem 0.55rem;
          border-radius: 999px; background: #eef1f4; color: #374151; white-space: nowrap; }
.status.done { background: #dff3e4; color: #14532d; }
.status.started { background: #fff4d6; color: #7a4b00; }
.status.unknown { background: #f1f1f1; color: #6b7280; }
.bar { height: 6px; background: #eef1f4; border-radius: 3px; margin-top: 0.35rem; }
.bar span { display: block; height: 100%; background: #2f9e55; border-radius: 3px; }
.lessons { display: grid; gap: 1rem; grid-template-columns: repeat(auto-fill, minmax(400px, 1fr)); }
.lesson { border: 1px solid #e3e6ea; border-radius: 8px; padding: 0.9rem 1.1rem; }
.lesson img.thumb { display: block; width: 100%; height: 150px; object-fit: cover;
                    object-position: left top; border: 1px solid #eceff2; border-radius: 4px;
                    margin-bottom: 0.6rem; }
.lesson h3 { margin: 0 0 0.3rem; font-size: 1.15rem; }
.lesson ul { margin: 0.4rem 0; padding-left: 1.2rem; font-size: 0.93rem; }
.lesson .links { font-size: 0.85rem; }
.checks { font-size: 0.9rem; padding-left: 1.2rem; }
.checks .pass::marker { content: "✓ "; color: #2f9e55; }
.checks .fail::marker { content: "✗ "; color: #c0392b; }
footer.pager { display: flex; justify-content: space-between; margin-top: 3rem;
               border-top: 1px solid #e3e6ea; padding-top: 0.8rem; font-size: 0.9rem; }
"""

#: "Open in Perfetto": the trace is fetched from the site and handed to ui.perfetto.dev with
#: Perfetto's postMessage protocol (PING until PONG, then the buffer). Browsers do not let a
#: file:// page fetch files or post to another window, so there the button says how to serve
#: the site. Nothing runs until a button is pressed.
SCRIPT = """
"use strict";
const PERFETTO = "https://ui.perfetto.dev";

function openInPerfetto(button) {
  const url = button.dataset.trace, title = button.dataset.title;
  const note = button.parentElement.querySelector(".perfetto-note");
  if (location.protocol === "file:") {
    note.textContent = " Opening needs the site served over http: run 'simdist course serve' "
      + "and open the address it prints, or download the file and drop it on "
      + PERFETTO + ".";
    return;
  }
  fetch(url).then(r => r.arrayBuffer()).then(buffer => {
    const win = window.open(PERFETTO);
    if (!win) { note.textContent = " The browser blocked the new tab: allow pop-ups."; return; }
    const ping = setInterval(() => win.postMessage("PING", PERFETTO), 50);
    window.addEventListener("message", function onPong(event) {
      if (event.source !== win || event.data !== "PONG") return;
      clearInterval(ping);
      window.removeEventListener("message", onPong);
      win.postMessage({perfetto: {buffer: buffer, title: title, fileName: url}}, PERFETTO);
    });
  });
}

document.addEventListener("click", event => {
  const button = event.target.closest("button[data-trace]");
  if (button) openInPerfetto(button);
});

// The learner's progress now, from 'simdist course serve' (progress.json): each lesson's
// badge shows the exercises whose checks passed last time (simdist check records them).
const PROGRESS = {
  en: (done, total) => `${done} of ${total} exercises pass (your workspace now)`,
  zh: (done, total) => `${total} 个练习中通过 ${done} 个（你的工作区，当前）`,
};
function showProgress(lessons) {
  for (const live of document.querySelectorAll(".live[data-lesson]")) {
    const mine = lessons[live.dataset.lesson];
    if (!mine) continue;
    const done = mine.passed.length, total = mine.exercises.length;
    const kind = done === total ? "done" : (mine.unchecked.length < total ? "started" : "todo");
    const text = (PROGRESS[live.dataset.lang] || PROGRESS.en)(done, total);
    live.innerHTML = `<span class="status ${kind}"></span><div class="bar" title="${done} of `
      + `${total}"><span style="width:${Math.floor(100 * done / total)}%"></span></div>`;
    live.querySelector(".status").textContent = text;
  }
}
if (location.protocol !== "file:" && document.currentScript) {
  fetch(new URL("progress.json", document.currentScript.src), {cache: "no-store"})
    .then(r => r.ok ? r.json() : null)
    .then(data => { if (data && data.lessons) showProgress(data.lessons); })
    .catch(() => {});  // a static copy of the site: the badges stay as built
}
"""


def trace_links(traces: list[tuple[str, str]], lang: str = "en") -> str:
    """The traces a cell drew, each with a download link and an "Open in Perfetto" button;
    ``traces`` are (address relative to the page, title)."""
    if not traces:
        return ""
    items = "".join(
        f'<span class="trace"><a href="{esc(href)}" download>{esc(Path(href).name)}</a>'
        f'<button type="button" data-trace="{esc(href)}" data-title="{esc(title)}">'
        f'{words(lang)["open"]}</button><span class="perfetto-note"></span></span> '
        for href, title in traces)
    return f'<p class="traces">{words(lang)["trace"]} {items}</p>'
