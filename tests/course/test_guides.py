"""The repository's docs/ rendered as pages of the course site (course/guides.py)."""

import re

from course.guides import docs_pages, guides_html, write_guides
from course.site import index_page
from tests.conftest import ROOT


def _docs(tmp_path):
    docs = tmp_path / "docs"
    (docs / "guides").mkdir(parents=True)
    (docs / "pic.png").write_bytes(b"\x89PNG")
    (docs / "guides" / "a.md").write_text(
        "# Guide A\n\nSee [the B page](../b.md#part-two), [the code](../../simdist/x.py), "
        "[a site](https://example.org) and [below](#guide-a).\n\n![a picture](../pic.png)\n")
    (docs / "b.md").write_text("# Page B\n\n## Part two\n")
    (docs / "README.md").write_text("# The index of docs/ (not a page of the site)\n")
    return docs


def test_pages_link_each_other_keep_links_out_as_text_and_copy_their_pictures(tmp_path):
    docs, out = _docs(tmp_path), tmp_path / "site"
    guides = write_guides(out, docs)
    assert [(g.title, g.href) for g in guides] == [("Guide A", "docs/guides/a.html"),
                                                  ("Page B", "docs/b.html")]
    a = (out / "docs" / "guides" / "a.html").read_text()
    assert '<a href="../b.html#part-two">the B page</a>' in a
    assert "the code" in a and "simdist/x.py" not in a  # the site does not hold source files
    assert '<a href="https://example.org">a site</a>' in a and 'href="#guide-a"' in a
    assert '<img src="../pic.png"' in a and (out / "docs" / "pic.png").read_bytes() == b"\x89PNG"
    assert 'href="../../index.html"' in a and 'href="../../course.css"' in a
    assert 'id="part-two"' in (out / "docs" / "b.html").read_text()


def test_every_page_of_the_repository_s_docs_is_rendered_with_its_links_resolving(tmp_path):
    guides = write_guides(tmp_path, ROOT / "docs")
    assert len(guides) == len(docs_pages(ROOT / "docs")) >= 15
    missing = []
    for page in tmp_path.rglob("*.html"):
        for target in re.findall(r'(?:href|src)="([^"#:]+)(?:#[^"]*)?"', page.read_text()):
            if not (page.parent / target).exists() and not target.endswith(
                    ("index.html", "course.css", "course.js")):
                missing.append(f"{page.relative_to(tmp_path)} -> {target}")
    assert missing == []


def test_the_contents_page_lists_the_guides(tmp_path):
    guides = write_guides(tmp_path / "site", _docs(tmp_path))
    page = index_page([], {}, guides)
    assert guides_html(guides) in page and '<a href="docs/b.html">Page B</a>' in page
    assert guides_html([]) == "" and "Guides" not in index_page([], {})
