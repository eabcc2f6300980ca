"""Lesson notebooks: ``notebooks/NN_slug.ipynb`` generated from ``lessons/NN_slug/lesson.md``,
and the Chinese edition ``notebooks/zh/NN_slug.ipynb`` from ``lesson.zh.md``.

The lesson's Jupytext Markdown source is the single source of truth; the notebook is built
from it without outputs, and the same source always gives the same file, so that a test can
tell when a committed notebook is out of date (``notebook_is_stale``). ``outline`` reads what
the two editions must share (sections, code cells, exercises), so that a test can tell when
they fall out of step. Jupytext and nbformat are imported only when a notebook is built.
"""

from __future__ import annotations

import io
import json
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from course.folders import SOURCE, LessonError
from simdist.base.files import write_atomic

#: the source of each edition, beside lesson.md
SOURCES = {"en": SOURCE, "zh": "lesson.zh.md"}

#: the notebook metadata every generated notebook gets (nothing that changes between builds)
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def source_path(lesson_dir, lang: str = "en") -> Path:
    """A lesson's source in ``lang``: ``lesson.md`` or ``lesson.zh.md``."""
    if lang not in SOURCES:
        raise LessonError(f"no edition {lang!r}: expected one of {', '.join(SOURCES)}")
    return Path(lesson_dir) / SOURCES[lang]


def notebook_path(lesson_dir, lang: str = "en") -> Path:
    """Where a lesson's generated notebook lives: ``notebooks/NN_slug.ipynb`` beside lessons/
    (``notebooks/zh/NN_slug.ipynb`` for the Chinese edition)."""
    lesson_dir = Path(lesson_dir)
    folder = lesson_dir.parent.parent / "notebooks"
    if lang != "en":
        folder = folder / lang
    return folder / f"{lesson_dir.name}.ipynb"


def editions(lesson_dir) -> list[str]:
    """The languages a lesson has a source for."""
    return [lang for lang in SOURCES if source_path(lesson_dir, lang).is_file()]


def build_notebook(lesson_dir, lang: str = "en"):
    """The lesson's notebook (an ``nbformat.NotebookNode``) built from its ``lesson.md``.

    Outputs and execution counts are empty, cell ids are positional and the metadata holds
    only the kernelspec and where the notebook comes from, so the same source always gives
    the same file, whatever the Jupytext version or the machine.
    """
    import jupytext
    import nbformat

    lesson_dir = Path(lesson_dir)
    source = source_path(lesson_dir, lang)
    if not source.is_file():
        raise LessonError(f"lesson {lesson_dir.name} has no {source.name} (looked at {source})")
    nb = jupytext.reads(source.read_text(encoding="utf-8"), fmt="md")
    cells = []
    for i, cell in enumerate(nb.cells):
        text = cell.source
        if cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(text)
        elif cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(text)
        else:
            new = nbformat.v4.new_raw_cell(text)
        new.id = f"{lesson_dir.name[:2]}-{i:03d}" if lang == "en" else \
            f"{lesson_dir.name[:2]}-{lang}-{i:03d}"
        cells.append(new)
    out = nbformat.v4.new_notebook(cells=cells)
    out.nbformat, out.nbformat_minor = 4, 5
    out.metadata = nbformat.from_dict({
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
        "distlab": {"lesson": lesson_dir.name, "language": lang,
                    "source": f"lessons/{lesson_dir.name}/{source.name}",
                    "generated_by": "simdist lesson build (do not edit: edit the source)"},
    })
    nbformat.validate(out)
    return out


def notebook_text(nb) -> str:
    """The notebook as the exact text written to disk."""
    import nbformat

    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def write_notebook(lesson_dir, path=None, lang: str = "en") -> Path:
    """Build the lesson's notebook and write it (default ``notebook_path(lesson_dir)``)."""
    path = Path(path) if path is not None else notebook_path(lesson_dir, lang)
    return write_atomic(path, notebook_text(build_notebook(lesson_dir, lang)))


def notebook_is_stale(lesson_dir, path=None, lang: str = "en") -> bool:
    """True when the committed notebook is missing or differs from a fresh build."""
    path = Path(path) if path is not None else notebook_path(lesson_dir, lang)
    if not path.is_file():
        return True
    try:
        committed = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return True
    return committed != json.loads(notebook_text(build_notebook(lesson_dir, lang)))


# -- what the editions share ----------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,4}) (.*)$")
_EXERCISE = re.compile(r"^### .*?(★{1,3}).*?`(\w+)")
_LANGUAGE_LINE = re.compile(
    r"^\s*(set_language\(.*\)|from course.lessons import set_language)\s*(#.*)?$")


@dataclass
class Outline:
    """What both editions of a lesson must share, read from a source."""

    sections: list  # (level, number) of every heading: (2, "3"), (3, "3.1"), (3, "")...
    code: list  # every code cell, comments and set_language(...) lines left out
    exercises: list  # (name, stars) of every "### Exercise" heading, in order


def _code_only(source: str) -> str:
    """A code cell without comments and blank lines, and without ``set_language(...)``
    (the Chinese edition's first cell chooses the language of the check reports)."""
    lines = [line for line in source.splitlines() if not _LANGUAGE_LINE.match(line)]
    text = "\n".join(lines) + "\n"
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type != tokenize.COMMENT]
        text = tokenize.untokenize(tokens)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # IPython magics and the like: compare as they are
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def outline(text: str) -> Outline:
    """The sections, code cells and exercises of a lesson source (Jupytext Markdown)."""
    import jupytext

    nb = jupytext.reads(text, fmt="md")
    sections, code, exercises = [], [], []
    for cell in nb.cells:
        if cell.cell_type == "code":
            code.append(_code_only(cell.source))
            continue
        fenced = False
        for line in cell.source.splitlines():
            if line.startswith("```"):
                fenced = not fenced
            m = None if fenced else _HEADING.match(line)
            if m:
                number = re.match(r"[\d.]*", m.group(2)).group(0).rstrip(".")
                sections.append((len(m.group(1)), number))
                ex = _EXERCISE.match(line)
                if ex:
                    exercises.append((ex.group(2), len(ex.group(1))))
    return Outline(sections, code, exercises)
