"""The repository's guides in the course site: ``docs/`` (architecture, guides, results) as
pages beside the lessons, their links between each other kept, their pictures copied.

A link from one page of ``docs/`` to another becomes a link between the rendered pages; a link
that leaves ``docs/`` (to source files, the README) is kept as its text, since the site does
not hold those files. Nothing here runs code.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from course import html as H
from simdist.base.files import atomic_output, write_atomic

#: where the rendered docs go, inside the site
FOLDER = "docs"
#: the pages of docs/ the site shows, in this order (the reference is generated, long, and
#: lives best in the repository)
SECTIONS = ("guides", ".", "results")

_LINK = re.compile(r'<a href="([^"]*)">(.*?)</a>', re.S)
_IMAGE = re.compile(r'<img src="([^"]*)"')


@dataclass
class Guide:
    """One rendered page of ``docs/``: its source, title and place in the site."""

    source: Path
    title: str
    href: str  # relative to the site's top folder


def docs_pages(docs: Path) -> list[Path]:
    """The Markdown pages of ``docs`` the site shows: the guides first, then the pages at the
    top of docs/ (architecture, differences, guarantees), then the dated results."""
    pages = []
    for section in SECTIONS:
        pages += sorted(p for p in (docs / section).glob("*.md") if p.name != "README.md")
    return pages


def _title(text: str, fallback: str) -> str:
    match = re.search(r"^# (.+)$", text, re.M)
    return match.group(1).strip() if match else fallback


def _href(docs: Path, page: Path) -> str:
    return f"{FOLDER}/{page.relative_to(docs).with_suffix('.html').as_posix()}"


def _rewrite(body: str, page: Path, docs: Path, shown: set[Path], out: Path) -> str:
    """Links to shown pages point at their HTML; links out of docs/ keep their text only;
    pictures inside docs/ are copied beside the page."""
    def link(match):
        target, text = match.group(1), match.group(2)
        if re.match(r"[a-z]+:|#", target):
            return match.group(0)  # a web address, or an anchor in this page
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve()
        if resolved in shown:
            rel = os.path.relpath(_href(docs, resolved), Path(_href(docs, page)).parent)
            return f'<a href="{Path(rel).as_posix()}{"#" + anchor if anchor else ""}">{text}</a>'
        return text

    def image(match):
        target = match.group(1)
        resolved = (page.parent / target).resolve()
        if re.match(r"[a-z]+:", target) or not resolved.is_file() \
                or not resolved.is_relative_to(docs.resolve()):
            return match.group(0)
        with atomic_output(out / FOLDER / resolved.relative_to(docs.resolve())) as tmp:
            shutil.copyfile(resolved, tmp)
        return f'<img src="{target}"'

    return _IMAGE.sub(image, _LINK.sub(link, body))


def write_guides(out, docs) -> list[Guide]:
    """Render every page of ``docs_pages(docs)`` into ``out/docs/``; the pages written."""
    out, docs = Path(out), Path(docs)
    pages = docs_pages(docs)
    shown = {p.resolve() for p in pages}
    guides = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        href = _href(docs, page)
        root = "../" * href.count("/")
        body = _rewrite(H.markdown_html(text), page.resolve(), docs.resolve(), shown, out)
        title = _title(text, page.stem)
        html = H.page(title, f'<main class="guide"><p><a href="{root}index.html">DistLab '
                      f'course</a></p>\n{body}</main>', root)
        write_atomic(out / href, html)
        guides.append(Guide(page, title, href))
    return guides


def guides_html(guides: list[Guide]) -> str:
    """The contents page's list of guides (empty without any)."""
    if not guides:
        return ""
    items = "".join(f'<li><a href="{g.href}">{H.esc(g.title)}</a></li>' for g in guides)
    return (f'<section lang="en"><h2>Guides</h2><p>How DistLab is built and what it measured, '
            f'one topic a page (<code>docs/</code> in the repository).</p>'
            f'<ul class="guides">{items}</ul></section>')
