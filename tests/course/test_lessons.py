"""The lesson format (course.lessons): finding lessons, ``simdist check`` and its report,
building notebooks, the workspace, two-level hints, the language, progress and peeking, on
lessons 01 and 02 (test_lesson_checks.py runs every lesson's checks on its solution and its
stubs; test_lesson_01_collectives.py has lesson 01's own tests)."""

import json
import shutil

import pytest

from course import lessons
from course import notebooks
from course import workspace
from simdist.base.errors import InvalidArgumentError
from simdist.commands import check as check_command
from simdist.commands import lesson as lesson_command

from tests.conftest import ROOT

LESSON = ROOT / "lessons" / "01_collectives"
NOTEBOOK = ROOT / "notebooks" / "01_collectives.ipynb"


# -- finding lessons ----------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["01", "1", 1, "01_collectives", str(LESSON)])
def test_find_lesson_accepts_number_name_and_path(key):
    assert lessons.find_lesson(key) == LESSON


def test_unknown_lesson_lists_the_lessons():
    with pytest.raises(lessons.LessonError, match=r"unknown lesson '99'.*01 \(01_collectives\)"):
        lessons.find_lesson("99")


def test_lessons_dir_is_next_to_the_package_and_can_be_given(tmp_path):
    assert lessons.LESSONS_DIR == ROOT / "lessons"
    assert LESSON in lessons.list_lessons()
    assert lessons.list_lessons(tmp_path) == []
    with pytest.raises(lessons.LessonError, match="--lessons-dir"):
        lessons.lessons_dir(tmp_path / "missing")


def test_every_lesson_has_its_files_and_its_solution_out_of_sight():
    for lesson in lessons.list_lessons():
        for name in (lessons.SOURCE, lessons.EXERCISES, lessons.CHECKS):
            assert (lesson / name).is_file(), f"{lesson.name} has no {name}"
        assert not (lesson / "solution.py").exists(), "solutions live in lessons/solutions/"
        assert lessons.solution_path(lesson) == ROOT / "lessons" / "solutions" / \
            f"{lesson.name}.py"
        assert lessons.solution_path(lesson).is_file()


# -- checks -------------------------------------------------------------------------------------

def test_check_main_reports_and_returns_status(capsys):
    assert check_command.main(["01", "--solution"]) == 0
    out = capsys.readouterr().out
    assert "lessons/solutions/01_collectives.py" in out and "9 of 9 checks pass" in out
    assert "✗" not in out

    assert check_command.main(["01"]) == 1
    out = capsys.readouterr().out
    assert "not done yet: exercise ring_all_reduce" in out
    assert "not done yet: exercise predict_fastest" in out
    assert "hint: run `simdist lesson start 01` to copy the stubs into your workspace, then " \
        "open my_exercises/01_collectives/exercises.py" in out
    assert out.rstrip().endswith(
        "0 of 9 checks pass (not done yet: predict_fastest, ring_all_reduce)")


def test_check_main_unknown_lesson_is_a_clean_error(capsys):
    assert check_command.main(["42"]) == 2
    assert "unknown lesson '42'" in capsys.readouterr().err


def test_errors_in_the_learners_code_are_reported_not_raised(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def ring_all_reduce(ctx, members, value):\n"
                      "    yield ctx.recv(members[0], 'x')\n"
                      "    return value\n"
                      "def predict_fastest(p, nbytes, system, tasks_per_machine):\n"
                      "    return 1 / 0\n")
    results = {r.name: r for r in lessons.run_checks("01", file=broken)}
    assert results["ring_sums"].message.startswith("p = 1, int64 values: the simulation "
                                                   "deadlocked")
    assert "waits on recv(src=worker:0, tag='x')" in results["ring_sums"].message
    assert "p = 1" in results["ring_sums"].hint
    assert "ZeroDivisionError" in results["predict_1"].message
    assert "broken.py line 5" in results["predict_1"].message
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def ring_all_reduce(:\n")
    results = lessons.run_checks("01", file=syntax)
    assert all(not r.passed and "SyntaxError" in r.message for r in results)


# -- notebooks ----------------------------------------------------------------------------------

def test_built_notebook_has_no_outputs_and_stable_metadata():
    nb = notebooks.build_notebook(LESSON)
    assert nb.metadata.kernelspec.name == "python3"
    assert "jupytext" not in nb.metadata
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert notebooks.notebook_text(nb) == notebooks.notebook_text(notebooks.build_notebook(LESSON))
    assert "tensorflow" not in "\n".join(c.source for c in code)  # TF only in prose here


def test_build_main_writes_and_checks_notebooks(tmp_path, capsys):
    shutil.copytree(LESSON, tmp_path / "lessons" / LESSON.name)
    folder = str(tmp_path / "lessons")
    assert lesson_command.build(["--check", "--lessons-dir", folder]) == 1
    assert "OUT OF DATE" in capsys.readouterr().out
    assert lesson_command.build(["--all", "--lessons-dir", folder]) == 0
    written = tmp_path / "notebooks" / "01_collectives.ipynb"
    assert json.loads(written.read_text()) == json.loads(NOTEBOOK.read_text())
    assert lesson_command.build(["01", "--check", "--lessons-dir", folder]) == 0
    assert "up to date" in capsys.readouterr().out
    source = tmp_path / "lessons" / LESSON.name / "lesson.md"
    source.write_text(source.read_text() + "\nOne more line.\n")
    assert notebooks.notebook_is_stale(source.parent)
    assert lesson_command.build(["--check", "--lessons-dir", folder]) == 1


# -- the workspace, two-level hints, progress ----------------------------------------------------

RIGHT_SPLIT = '''
import math

def split_batch(x, y, n):
    k = math.ceil(len(x) / n)
    return [(x[r * k:(r + 1) * k], y[r * k:(r + 1) * k]) for r in range(n)]
'''

ARRAY_SPLIT = '''
import numpy as np

def split_batch(x, y, n):
    return list(zip(np.array_split(x, n), np.array_split(y, n)))
'''


def test_lesson_start_copies_the_stubs_into_an_ignored_workspace(tmp_path, capsys):
    mine = tmp_path / "ws"
    assert lesson_command.main(["start", "02", "--workspace", str(mine)]) == 0
    copy = mine / "02_mirrored" / "exercises.py"
    assert copy.read_text() == (ROOT / "lessons" / "02_mirrored" / "exercises.py").read_text()
    assert (mine / ".gitignore").read_text().splitlines()[-1] == "*"
    assert "copied the stubs to" in capsys.readouterr().out
    copy.write_text(RIGHT_SPLIT)  # the learner's work is never overwritten ...
    assert lesson_command.main(["start", "02", "--workspace", str(mine)]) == 0
    assert copy.read_text() == RIGHT_SPLIT and "already exists" in capsys.readouterr().out
    # ... and is what the checks read
    results = lessons.run_checks("02", workspace=mine, exercise="split_batch")
    assert results[0].passed
    assert lessons.target_file(lessons.find_lesson("02"), workspace=mine) == copy
    assert "my_exercises/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_detail_of_a_hint_comes_with_the_second_failure(tmp_path, capsys):
    mine = tmp_path / "ws"
    workspace.start(lessons.find_lesson("02"), mine)[0].write_text(ARRAY_SPLIT)
    assert check_command.main(["02", "split_batch", "--workspace", str(mine)]) == 1
    first = capsys.readouterr().out
    assert "hint: that is np.array_split's rule" in first
    assert "in detail:" not in first and "a more detailed hint comes" in first
    assert check_command.main(["02", "split_batch", "--workspace", str(mine)]) == 1
    second = capsys.readouterr().out
    assert "in detail: TensorFlow gives every replica ceil(B / N) examples" in second
    assert workspace.Progress(mine).failures("02_mirrored", "split_batch") == 2
    (mine / "02_mirrored" / "exercises.py").write_text(RIGHT_SPLIT)  # fixed: the count restarts
    assert check_command.main(["02", "split_batch", "--workspace", str(mine)]) == 0
    assert workspace.Progress(mine).entry("02_mirrored", "split_batch") == \
        {"failures": 0, "passed": True}


def test_hints_speak_the_learners_language(tmp_path, capsys):
    mine = tmp_path / "ws"
    workspace.start(lessons.find_lesson("02"), mine)[0].write_text(ARRAY_SPLIT)
    assert check_command.main(["02", "split_batch", "--lang", "zh", "--detail",
                               "--workspace", str(mine)]) == 1
    out = capsys.readouterr().out
    assert "提示：" not in out and "提示: 这是 np.array_split 的规则" in out
    assert "详细提示: TensorFlow 依次给每个副本" in out
    assert "1 项检查中通过 0 项" in out
    check_command.main(["01", "--lang", "zh"])
    assert "尚未完成：练习 ring_all_reduce" in capsys.readouterr().out


def test_language_comes_from_the_option_then_the_environment(monkeypatch):
    from course import lang as lesson_lang

    monkeypatch.delenv("DISTLAB_LANG", raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert lesson_lang.language() == "zh" and lesson_lang.language("en") == "en"
    monkeypatch.setenv("LANG", "C.UTF-8")
    assert lesson_lang.language() == "en"
    lesson_lang.set_language("zh")
    try:
        assert lesson_lang.language() == "zh"
    finally:
        lesson_lang.set_language(None)
    with pytest.raises(InvalidArgumentError, match="unknown language 'fr'"):
        lesson_lang.language("fr")


def test_check_all_prints_a_progress_table(tmp_path, capsys):
    mine = tmp_path / "ws"
    copy = workspace.start(lessons.find_lesson("02"), mine)[0]
    copy.write_text(copy.read_text() + RIGHT_SPLIT)  # split_batch done, the others not yet
    assert check_command.main(["--all", "--workspace", str(mine)]) == 1
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out[1:-1]}
    assert list(rows) == [d.name for d in lessons.list_lessons()]
    assert "02_mirrored " in rows["02_mirrored"] and " *" not in rows["02_mirrored"]
    done = f"1/{len(lessons.load_lesson_checks(lessons.find_lesson('02')).exercises)}"
    assert done in rows["02_mirrored"] and "✓ split_batch ★" in rows["02_mirrored"]
    assert "· replica_step ★★" in rows["02_mirrored"]
    assert rows["01_collectives"].startswith("01_collectives *")
    total = sum(len(lessons.load_lesson_checks(d).exercises) for d in lessons.list_lessons())
    assert out[-1].startswith(f"1 of {total} exercises done")


def test_peek_prints_one_reference_solution(capsys):
    assert check_command.main(["01", "--peek", "predict_fastest"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# lessons/solutions/01_collectives.py: the reference")
    assert "def predict_fastest(" in out and "def ring_all_reduce(" not in out
    assert check_command.main(["01", "--peek", "nothing"]) == 2
    capsys.readouterr()
    assert check_command.main(["01", "--peek", "predict_fastest", "--lang", "zh"]) == 0
    assert capsys.readouterr().out.startswith(
        "# lessons/solutions/01_collectives.py: predict_fastest 的参考答案")
