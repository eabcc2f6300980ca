"""The course's format, for every lesson (the lead's lessons 07+ included): a difficulty and a
check cell per exercise, the Chinese edition in step with the English one, fresh notebooks
in both languages, a glossary."""

import re

import pytest

from course import lessons
from course import notebooks

from tests.conftest import ROOT

LESSONS = lessons.list_lessons()
IDS = [d.name for d in LESSONS]


def _sections(lesson_dir, lang="en"):
    """{exercise heading: the code cells of its section}, from the lesson's source."""
    import jupytext

    nb = jupytext.reads(notebooks.source_path(lesson_dir, lang).read_text(encoding="utf-8"),
                        fmt="md")
    sections, current = {}, None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    current = line if line.startswith("### ") and "★" in line else None
                    if current:
                        sections[current] = []
        elif current is not None:
            sections[current].append(cell.source)
    return sections


@pytest.mark.parametrize("lesson_dir", LESSONS, ids=IDS)
def test_every_exercise_has_its_stars_and_a_check_cell_under_it(lesson_dir):
    declared = lessons.load_lesson_checks(lesson_dir)  # DIFFICULTY is 1-3 for every exercise
    outline = notebooks.outline(notebooks.source_path(lesson_dir).read_text(encoding="utf-8"))
    headed = {name: stars for name, stars in outline.exercises}
    for name in declared.exercises:
        assert headed.get(name) == declared.difficulty[name], (
            f"{lesson_dir.name}: exercise {name} needs a heading '### Exercise N "
            f"{lessons.stars(declared.difficulty[name])} · `{name}(...)`'")
    for heading, cells in _sections(lesson_dir).items():
        name = re.search(r"`(\w+)", heading).group(1)
        if name in declared.difficulty:
            assert cells and cells[0].strip().startswith(f'check("{name}")'), (
                f"{lesson_dir.name}: the first cell under {heading!r} must be "
                f'check("{name}")')
        else:  # an mpiexec exercise: its cell runs the program
            assert any("run_mpi(" in c for c in cells), heading
    stub = (lesson_dir / lessons.EXERCISES).read_text(encoding="utf-8")
    for name in declared.exercises:
        doc = re.search(rf"def {name}\(.*?\"\"\"(.*?)\"\"\"", stub, re.S)
        assert doc and f"({lessons.stars(declared.difficulty[name])})" in doc.group(1), (
            f"{lesson_dir.name}: the stub of {name} must say its stars")


@pytest.mark.parametrize("lesson_dir", LESSONS, ids=IDS)
def test_the_chinese_edition_is_in_step(lesson_dir):
    zh_source = notebooks.source_path(lesson_dir, "zh")
    assert zh_source.is_file(), f"{lesson_dir.name} has no lesson.zh.md"
    en = notebooks.outline(notebooks.source_path(lesson_dir).read_text(encoding="utf-8"))
    zh = notebooks.outline(zh_source.read_text(encoding="utf-8"))
    assert zh.sections == en.sections, "the two editions have different sections"
    assert zh.exercises == en.exercises, "the two editions have different exercises"
    assert len(zh.code) == len(en.code), "the two editions have different code cells"
    for i, (a, b) in enumerate(zip(en.code, zh.code)):
        assert a == b, f"code cell {i} differs between the editions:\n{a}\n---\n{b}"
    text = zh_source.read_text(encoding="utf-8")
    assert 'set_language("zh")' in text  # the check reports of the Chinese notebook
    assert len(re.findall(r"[\u4e00-\u9fff]", text)) > 1000  # written in Chinese


def test_the_sync_test_sees_a_missing_section_and_a_changed_cell(tmp_path):
    source = notebooks.source_path(LESSONS[0], "zh").read_text(encoding="utf-8")
    en = notebooks.outline(notebooks.source_path(LESSONS[0]).read_text(encoding="utf-8"))
    dropped = notebooks.outline(re.sub(r"\n## 5\..*?\n", "\n", source, count=1))
    assert dropped.sections != en.sections
    changed = notebooks.outline(source.replace("p, n = 8, 1 << 20", "p, n = 4, 1 << 20"))
    assert changed.code != en.code
    commented = notebooks.outline(source.replace("p, n = 8, 1 << 20",
                                                 "p, n = 8, 1 << 20  # 注释"))
    assert commented.code == en.code  # comments may be translated


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("lesson_dir", LESSONS, ids=IDS)
def test_committed_notebooks_are_not_stale(lesson_dir, lang):
    path = notebooks.notebook_path(lesson_dir, lang)
    assert not notebooks.notebook_is_stale(lesson_dir, lang=lang), (
        f"{path.relative_to(ROOT)} is out of date: run `simdist lesson build "
        f"{lesson_dir.name[:2]}`")


def test_the_glossary_has_the_fields_terms():
    text = (ROOT / "lessons" / "GLOSSARY.md").read_text(encoding="utf-8")
    for en, zh in [("parameter server (ps)", "参数服务器"), ("in-graph replication", "图内复制"),
                   ("between-graph replication", "图间复制"),
                   ("synchronous / asynchronous updates", "同步更新 / 异步更新"),
                   ("token queue", "令牌队列"), ("backup worker", "备份工作器"),
                   ("sharding", "分片"), ("fault tolerance", "容错"), ("replica", "副本")]:
        assert re.search(rf"^\| {re.escape(en)} \| {re.escape(zh)}", text, re.M), en


@pytest.mark.notebook
@pytest.mark.timeout(240)
def test_a_chinese_notebook_runs_and_reports_in_chinese(monkeypatch):
    from tests.conftest import run_notebook

    monkeypatch.delenv("DISTLAB_LANG", raising=False)
    text, images = run_notebook(notebooks.notebook_path(LESSONS[0], "zh"), monkeypatch,
                                cell_timeout=120)
    assert images >= 4
    assert "尚未完成：练习 ring_all_reduce" in text and "提示:" in text
