"""docs/guides/concepts.md, the map of the concept checklist to the lessons, holds to the
lessons: every section it names is a heading of that lesson, every exercise a function of
its exercises.py (or its mpiexec program), every lesson is named, a full row has prose, a
simulated run, a real-TF run (or n/a) and an exercise, and the counts at the top are the
rows'."""

import re
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "guides" / "concepts.md"
COLUMNS = ["#", "Concept", "Taught in", "Exercise", "Simulated", "Real TF", "Status"]
COUNTS = re.compile(r"^Status: \*\*(\d+) full\*\*, \*\*(\d+) partial\*\*, of (\d+) concepts\.$",
                    re.M)
#: "04 §2 *`tf.device` scopes and device functions*": a section by number and heading
TITLED = re.compile(r"(\d\d) §(\d+) \*([^*]+)\*")
#: "04 §2": a section by number
SECTION = re.compile(r"\b(\d\d) §(\d+)\b")
#: "04 `split_devices`" or "05 `tf_config_mpi.py`"
EXERCISE = re.compile(r"\b(\d\d) `([\w.]+)`")
#: a code cell that runs real TensorFlow (realdist, TF, a ``real_*`` function or a lesson's
#: ``real_*`` module of real runs)
REAL = re.compile(r"realdist|tensorflow|\breal_\w+(\.\w+)?\(")


class Row(NamedTuple):
    """One concept of the table."""
    number: int
    concept: str
    taught: str
    exercise: str
    simulated: str
    real: str
    status: str


class Lesson(NamedTuple):
    """What the map may name in one lesson."""
    folder: Path
    sections: dict  # {number: (heading, code of the section's executed cells)}
    functions: set


def rows(text: str) -> list[Row]:
    """The table rows of the page (every table has the same columns)."""
    found = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0].isdigit():
            assert len(cells) == len(COLUMNS), f"row {cells[0]}: {len(cells)} cells"
            found.append(Row(int(cells[0]), *cells[1:]))
        elif line.startswith("| #"):
            assert cells == COLUMNS
    return found


def sections(lesson_md: str) -> dict:
    """{number: (heading, code)} of a lesson's "## N. heading" sections, the code being that
    of its python cells (an unexecuted <!-- #region --> cell left out), subsections included."""
    found, number, region, fence = {}, None, False, None
    for line in lesson_md.splitlines():
        if fence is None:
            heading = re.match(r"## (\d+)\. (.+)$", line)
            if heading:
                number = int(heading.group(1))
                found[number] = (heading.group(2), [])
            elif line.startswith("<!-- #region"):
                region = True
            elif line.startswith("<!-- #endregion"):
                region = False
            elif line.startswith("```"):
                fence = [] if line.strip() == "```python" and not region else False
        elif line.startswith("```"):
            if fence and number is not None:
                found[number][1].append("\n".join(fence))
            fence = None
        elif fence is not False:
            fence.append(line)
    return {n: (heading, "\n".join(code)) for n, (heading, code) in found.items()}


def lessons() -> dict[str, Lesson]:
    found = {}
    for folder in sorted((ROOT / "lessons").glob("[0-9][0-9]_*")):
        stubs = (folder / "exercises.py").read_text(encoding="utf-8")
        found[folder.name[:2]] = Lesson(
            folder, sections((folder / "lesson.md").read_text(encoding="utf-8")),
            set(re.findall(r"^def (\w+)\(", stubs, re.M)))
    return found


def problems(text: str, known: dict[str, Lesson]) -> list[str]:
    """What in the page does not match the lessons, one line each."""
    table, found = rows(text), []
    if [r.number for r in table] != list(range(1, len(table) + 1)):
        found.append(f"rows numbered {[r.number for r in table]}, not 1 to {len(table)}")
    counts = COUNTS.search(text)
    full = sum(r.status == "full" for r in table)
    partial = sum(r.status.startswith("partial: ") for r in table)
    if full + partial != len(table):
        found.append("a status that is neither 'full' nor 'partial: what is missing'")
    if counts is None:
        found.append("no 'Status: **N full**, **M partial**, of K concepts.' line")
    elif tuple(map(int, counts.groups())) != (full, partial, len(table)):
        found.append(f"the counts say {counts.group(0)!r}; the rows: {full} full, {partial} "
                     f"partial, of {len(table)}")
    for row in table:
        where = f"row {row.number}"
        titled = TITLED.findall(row.taught)
        if not titled:
            found.append(f"{where}: no section in 'Taught in'")
        for lesson, number, heading in titled:
            actual = known[lesson].sections.get(int(number)) if lesson in known else None
            if actual is None or actual[0] != heading:
                found.append(f"{where}: {lesson} §{number} is "
                             f"{actual[0] if actual else 'no section'!r}, not {heading!r}")
        for column, cell in (("Simulated", row.simulated), ("Real TF", row.real)):
            if not re.match(r"(yes: |no$|n/a: )", cell):
                found.append(f"{where}: {column} is {cell!r}, not 'yes: ...', 'no' or 'n/a: ...'")
            if cell.startswith("yes: ") and not SECTION.search(cell):
                found.append(f"{where}: {column} says yes and names no section")
            for lesson, number in SECTION.findall(cell):
                code = known[lesson].sections.get(int(number), (None, None))[1] \
                    if lesson in known else None
                if code is None:
                    found.append(f"{where}: {column} names {lesson} §{number}: no such section")
                elif not code:
                    found.append(f"{where}: {column} names {lesson} §{number}: it runs no cell")
                elif column == "Real TF" and not REAL.search(code):
                    found.append(f"{where}: Real TF names {lesson} §{number}: no cell of it "
                                 "runs realdist or TensorFlow")
        for lesson, name in EXERCISE.findall(row.exercise):
            exists = lesson in known and (
                (known[lesson].folder / name).is_file() if name.endswith(".py")
                else name in known[lesson].functions)
            if not exists:
                found.append(f"{where}: no exercise {name} in lesson {lesson}")
        if row.exercise != "—" and not EXERCISE.search(row.exercise):
            found.append(f"{where}: Exercise is {row.exercise!r}, not '04 `name`, ...' or '—'")
        if row.status == "full" and (row.exercise == "—" or not row.simulated.startswith("yes")
                                     or row.real == "no"):
            found.append(f"{where}: full, but without an exercise, a simulated run or a "
                         "real-TF run")
    named = {lesson for r in table for lesson, _, _ in TITLED.findall(r.taught)}
    found += [f"lesson {lesson} is in no row's 'Taught in'" for lesson in known
              if lesson not in named]
    return found


def test_the_concept_map_matches_the_lessons():
    assert problems(PAGE.read_text(encoding="utf-8"), lessons()) == []


LESSON = """# Lesson 01

## 1. First

```python
x = 1
```

<!-- #region -->
```python
import tensorflow as tf
```
<!-- #endregion -->

## 2. Real

```text
realdist run
```

```python
from realdist.graph.tf1 import real_placement
```
"""
HEAD = ("| # | Concept | Taught in | Exercise | Simulated | Real TF | Status |\n"
        "|---|---|---|---|---|---|---|\n")


@pytest.fixture
def toy(tmp_path):
    (tmp_path / "ring_mpi.py").write_text("")
    return {"01": Lesson(tmp_path, sections(LESSON), {"ring"})}


def test_a_page_that_matches_its_lessons_passes(toy):
    page = ("Status: **1 full**, **1 partial**, of 2 concepts.\n\n" + HEAD
            + "| 1 | A | 01 §1 *First* | 01 `ring`, 01 `ring_mpi.py` | yes: 01 §1 | yes: 01 §2 "
              "| full |\n"
            + "| 2 | B | 01 §2 *Real* | — | yes: 01 §2 | no | partial: an exercise |\n")
    assert problems(page, toy) == []


def test_a_wrong_section_exercise_cell_status_or_count_is_found(toy):
    page = ("Status: **1 full**, **1 partial**, of 2 concepts.\n\n" + HEAD
            + "| 1 | A | 01 §1 *Frist*; 01 §3 *Gone* | 01 `rign` | yes: 01 §2 | yes: 01 §1 "
              "| full |\n"
            + "| 2 | B | 01 §2 *Real* | — | yes: 01 §2 | no | full |\n")
    assert problems(page, toy) == [
        "the counts say 'Status: **1 full**, **1 partial**, of 2 concepts.'; the rows: 2 full, "
        "0 partial, of 2",
        "row 1: 01 §1 is 'First', not 'Frist'",
        "row 1: 01 §3 is 'no section', not 'Gone'",
        "row 1: Real TF names 01 §1: no cell of it runs realdist or TensorFlow",
        "row 1: no exercise rign in lesson 01",
        "row 2: full, but without an exercise, a simulated run or a real-TF run"]


def test_a_lesson_named_nowhere_is_found(toy, tmp_path):
    toy["02"] = Lesson(tmp_path, {}, set())
    page = ("Status: **0 full**, **1 partial**, of 1 concepts.\n\n" + HEAD
            + "| 1 | A | 01 §1 *First* | — | yes: 01 §1 | no | partial: all |\n")
    assert problems(page, toy) == ["lesson 02 is in no row's 'Taught in'"]
