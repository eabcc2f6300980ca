"""Every link in the README, CONTRIBUTING, docs/ and lessons/README.md resolves: relative links
and images to a file (and a ``#anchor`` to a heading of it, as GitHub makes them), and every
repository path written in backticks to a file or folder that exists."""

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

#: backticked text that starts so is a repository path
PREFIXES = ("simdist/", "realdist/", "course/", "tests/", "lessons/", "docs/", "benchmarks/")
#: a path with a placeholder in it (``lessons/NN_slug/``, ``simdist/collectives/NAME.py``)
TEMPLATE = re.compile(r"NN|NAME|[*<>{}]|\.\.\.")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[ \t]*$", re.M | re.S)
CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$", re.M)


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "lessons" / "README.md",
            *sorted((ROOT / "docs").rglob("*.md"))]


def prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text, lower case, punctuation dropped, spaces to -."""
    text = CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (a repeated one gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(prose(path.read_text(encoding="utf-8"))):
        base = slug(heading)
        found.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return found


def links(text: str) -> list[str]:
    """The targets of a page's links and images, outside code."""
    return LINK.findall(CODE.sub("code", prose(text)))


def code_paths(text: str) -> list[str]:
    """The repository paths a page writes in backticks, outside code blocks."""
    spans = (m.group(2).strip() for m in CODE.finditer(prose(text)))
    return [s.split()[0] for s in spans if s.startswith(PREFIXES)]


def problems(page: Path, root: Path = ROOT) -> list[str]:
    """What does not resolve in one page, one line each."""
    text = page.read_text(encoding="utf-8")
    found = []
    for target in links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not checked here
            continue
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists():
            found.append(f"link {target}: no file {linked}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            found.append(f"link {target}: no heading #{anchor} in {linked.name}")
    for written in code_paths(text):
        path, _, name = written.rstrip(".,;:)").partition("::")
        if TEMPLATE.search(path):
            continue
        if not (root / path).exists():
            found.append(f"`{written}`: no such file or folder")
        elif name and not re.search(rf"^\s*(async )?def {re.escape(name)}\(",
                                    (root / path).read_text(encoding="utf-8"), re.M):
            found.append(f"`{written}`: no function {name} in {path}")
    return found


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_path_resolves(page):
    assert problems(page) == []


def test_every_docs_page_is_reachable_from_the_readme():
    reached, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in reached or page.suffix != ".md" or not page.is_file():
            continue
        reached.add(page)
        todo += [(page.parent / t.partition("#")[0]).resolve() for t in
                 links(page.read_text(encoding="utf-8")) if not re.match(r"[a-z]+:", t)]
    orphans = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").rglob("*.md"))
               if p.resolve() not in reached]
    assert orphans == []


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


def test_slugs_are_githubs():
    assert slug("Calibration: predicting real step times") == \
        "calibration-predicting-real-step-times"
    assert slug("Adding a TF1 op") == "adding-a-tf1-op"
    assert slug("`simdist run` and [its options](x.md)") == "simdist-run-and-its-options"
    assert slug("ParameterServerStrategy and the ClusterCoordinator (TF2)") == \
        "parameterserverstrategy-and-the-clustercoordinator-tf2"


def test_a_broken_link_anchor_or_path_is_found(tmp_path):
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "core.py").write_text("def run():\n    pass\n")
    (tmp_path / "other.md").write_text("# A heading\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n[fine](other.md#a-heading) [second](other.md#twice-1) [self](#title)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere) ![img](pic.png)\n"
        "[web](https://example.com) `simdist/NAME.py` `tests/sim/`\n\n"
        "```\n[in code](nowhere.md) `tests/not/in/prose.py`\n# not a heading\n```\n")
    assert problems(page, root=tmp_path) == [
        f"link missing.md: no file {tmp_path / 'missing.md'}",
        "link other.md#nowhere: no heading #nowhere in other.md",
        f"link pic.png: no file {tmp_path / 'pic.png'}",
        "`tests/sim/`: no such file or folder"]
    (tmp_path / "simdist").mkdir()
    page.write_text("`simdist/../sim/core.py::run`, `simdist/`\n")
    assert problems(page, root=tmp_path) == []
    page.write_text("`simdist/../sim/core.py::gone`\n")
    assert problems(page, root=tmp_path) == [
        "`simdist/../sim/core.py::gone`: no function gone in simdist/../sim/core.py"]


#: a dotted name of DistLab's packages (``simdist.training.exercises.Exercise``)
DOTTED = re.compile(r"^(?:simdist|realdist|course)(?:\.\w+)+")
IMPORT = re.compile(r"^\s*from ((?:simdist|realdist|course)[\w.]*) import (?:\(([^)]*)\)|(.*))",
                    re.M)


def dotted_names(text: str) -> list[str]:
    """The dotted names a page writes in backticks, and those its code blocks import."""
    names = [m.group(0) for span in CODE.finditer(prose(text))
             if (m := DOTTED.match(span.group(2).strip()))]
    for block in FENCE.finditer(text):
        for module, inside, line in IMPORT.findall(block.group(0)):
            imported = re.sub(r"#.*", "", inside or line).split(",")
            names += [f"{module}.{n.split()[0]}" for n in imported if n.strip()]
    return names


def resolves(name: str) -> bool:
    """Whether ``name`` is a module, or an attribute (at any depth) of the longest module it
    starts with."""
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_dotted_name_resolves(page):
    names = dotted_names(page.read_text(encoding="utf-8"))
    assert [n for n in names if not resolves(n)] == []


def test_a_dotted_name_that_moved_is_found():
    text = ("`simdist.training.exercises.Exercise` `simdist.graph` `simdist.nowhere`\n\n"
            "```python\nfrom simdist.training.input_pipeline import (loader_trainer,\n"
            "    ensemble)\n```\n")
    names = dotted_names(text)
    assert names == ["simdist.training.exercises.Exercise", "simdist.graph", "simdist.nowhere",
                     "simdist.training.input_pipeline.loader_trainer",
                     "simdist.training.input_pipeline.ensemble"]
    assert [n for n in names if not resolves(n)] == [
        "simdist.nowhere", "simdist.training.input_pipeline.ensemble"]
