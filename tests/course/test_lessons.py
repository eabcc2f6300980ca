"""The lesson format (course.lessons, the workspace, hints, progress) and lesson 01: checks,
wrong answers, notebook, MPI exercise."""

import json
import shutil
from pathlib import Path

import pytest

from course import lessons
from course import notebooks
from course import workspace
from simdist.commands import check as check_command
from simdist.commands import lesson as lesson_command
from simdist.sim.launcher import run_mpi

from tests.conftest import ROOT, run_notebook

LESSON = ROOT / "lessons" / "01_collectives"
NOTEBOOK = ROOT / "notebooks" / "01_collectives.ipynb"
RING_MPI = str(Path("lessons") / "01_collectives" / "ring_mpi.py")

# a ring that forgets the all-gather phase: its values and message counts are wrong
NO_ALL_GATHER = '''
import numpy as np

def ring_all_reduce(ctx, members, value):
    p, r = len(members), members.index(ctx.name)
    chunks = [c.copy() for c in np.array_split(value.reshape(-1), p)]
    for s in range(p - 1):
        ctx.send(members[(r + 1) % p], s, chunks[(r - s) % p])
        msg = yield ctx.recv(members[(r - 1) % p], s)
        chunks[(r - s - 1) % p] = chunks[(r - s - 1) % p] + msg.payload
    return np.concatenate(chunks).reshape(value.shape)

def predict_fastest(p, nbytes, system="cpu", tasks_per_machine=1):
    return "ring"
'''


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

def test_every_check_passes_against_the_solution():
    results = lessons.run_checks("01", solution=True)
    assert len(results) == 9
    failed = [f"{r.name}: {r.message} (hint: {r.hint})" for r in results if not r.passed]
    assert not failed, "\n".join(failed)


def test_every_check_fails_against_the_stubs_as_not_done():
    results = lessons.run_checks("01")
    assert results and not any(r.passed for r in results)
    assert all(r.not_done for r in results)
    assert {r.message for r in results} == {"not done yet: exercise ring_all_reduce",
                                            "not done yet: exercise predict_fastest"}
    assert all(r.hint for r in results)


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


def test_a_wrong_ring_gets_what_is_wrong_and_a_hint(tmp_path, capsys):
    mine = tmp_path / "mine.py"
    mine.write_text(NO_ALL_GATHER)
    results = {r.name: r for r in lessons.run_checks("01", file=mine)}
    assert not results["ring_sums"].passed and "wrong sum" in results["ring_sums"].message
    messages = results["ring_messages"]
    assert not messages.passed
    assert messages.message == ("p = 2: worker:0 sent 1 message; a ring all-reduce sends "
                                "2(p-1) = 2")
    assert messages.hint == "did you forget the all-gather phase?"
    assert "formulas.ring" in results["ring_time"].message
    # "ring" is right for 64 MiB on 5 tasks, wrong for 8 bytes on 8
    assert results["predict_5"].passed and not results["predict_1"].passed
    assert "you predicted ring" in results["predict_1"].message
    assert check_command.main(["01", "--file", str(mine)]) == 1
    assert "hint: did you forget the all-gather phase?" in capsys.readouterr().out


# a ring that writes its sums into the caller's value (np.array_split gives views)
MUTATES = '''
import numpy as np

def ring_all_reduce(ctx, members, value):
    p, r = len(members), members.index(ctx.name)
    if p == 1:
        return value.copy()
    chunks = np.array_split(value.reshape(-1), p)
    right, left = members[(r + 1) % p], members[(r - 1) % p]
    for s in range(p - 1):
        ctx.send(right, f"rs{s}", chunks[(r - s) % p].copy())
        msg = yield ctx.recv(left, f"rs{s}")
        chunks[(r - s - 1) % p] += msg.payload
    for s in range(p - 1):
        ctx.send(right, f"ag{s}", chunks[(r - s + 1) % p].copy())
        msg = yield ctx.recv(left, f"ag{s}")
        chunks[(r - s) % p][:] = msg.payload
    return np.concatenate(chunks).reshape(value.shape)
'''

# the right ring, except that one member alone returns its input itself
RETURNS_INPUT = '''
import numpy as np

def ring_all_reduce(ctx, members, value):
    p, r = len(members), members.index(ctx.name)
    if p == 1:
        return value
    chunks = [c.copy() for c in np.array_split(value.reshape(-1), p)]
    right, left = members[(r + 1) % p], members[(r - 1) % p]
    for s in range(p - 1):
        ctx.send(right, f"rs{s}", chunks[(r - s) % p])
        msg = yield ctx.recv(left, f"rs{s}")
        chunks[(r - s - 1) % p] = chunks[(r - s - 1) % p] + msg.payload
    for s in range(p - 1):
        ctx.send(right, f"ag{s}", chunks[(r - s + 1) % p])
        msg = yield ctx.recv(left, f"ag{s}")
        chunks[(r - s) % p] = msg.payload
    return np.concatenate(chunks).reshape(value.shape)
'''

# the tasks pass their values through a module-level dict: right in one shared module only
GLOBALS = '''
import numpy as np

BOARD = {}

def ring_all_reduce(ctx, members, value):
    BOARD[(ctx.name, value.size, str(value.dtype))] = value.copy()
    for dst in members:
        if dst != ctx.name:
            ctx.send(dst, "hello", np.zeros(1))
    for src in members:
        if src != ctx.name:
            yield ctx.recv(src, "hello")
    return np.sum([BOARD[(m, value.size, str(value.dtype))] for m in members], axis=0,
                  dtype=value.dtype).reshape(value.shape)
'''


@pytest.mark.parametrize("source, message, hint, detail", [
    (MUTATES, "worker:0: your ring changed the value it was given", "leave `value` as it is",
     "returns views into value"),
    (RETURNS_INPUT, "p = 1, int64 values of shape (7, 143): worker:0: the array your ring "
     "returned shares memory with its input", "return a new array", "value.copy()"),
    (GLOBALS, "p = 2: your ring gives the right sum only when every task shares one copy of "
     "your module", "through Python globals", "module-level"),
])
def test_a_ring_that_cheats_fails_with_a_hint_aimed_at_it(tmp_path, source, message, hint,
                                                         detail):
    mine = tmp_path / "mine.py"
    mine.write_text(source)
    sums = lessons.run_checks("01", file=mine, exercise="ring_all_reduce")[0]
    assert not sums.passed and message in sums.message
    assert hint in sums.hint and detail in sums.detail


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

def test_committed_notebook_is_not_stale():
    assert not notebooks.notebook_is_stale(LESSON), (
        "notebooks/01_collectives.ipynb is out of date: run `simdist lesson build 01`")


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


@pytest.mark.notebook
@pytest.mark.timeout(240)
def test_notebook_runs_top_to_bottom(monkeypatch):
    text, images = run_notebook(NOTEBOOK, monkeypatch, cell_timeout=60)
    assert images >= 4  # two timelines and two plots, drawn inline
    assert "ring == numpy sum on every worker: True" in text
    assert "not done yet: exercise ring_all_reduce" in text  # the stubs, checked in a cell


# -- the MPI exercise ---------------------------------------------------------------------------

@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_ring_mpi_passes_with_the_solution():
    proc = run_mpi(4, [RING_MPI, "--solution"], timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "on 4 tasks over 4 MPI rank(s)" in proc.stdout
    assert "4 of 4 checks pass" in proc.stdout


@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_ring_mpi_fails_with_the_stubs():
    proc = run_mpi(4, [RING_MPI], timeout=120, cwd=ROOT)
    assert proc.returncode == 1
    assert "not done yet: exercise ring_all_reduce" in proc.stdout
    assert "MPI_ABORT" not in proc.stdout + proc.stderr


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
    with pytest.raises(lessons.InvalidArgumentError, match="unknown language 'fr'"):
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
    assert "1/3" in rows["02_mirrored"] and "✓ split_batch ★" in rows["02_mirrored"]
    assert "· replica_step ★★" in rows["02_mirrored"]
    assert rows["01_collectives"].startswith("01_collectives *")
    total = sum(len(lessons.load_lesson_checks(d).exercises) for d in lessons.list_lessons())
    assert out[-1].startswith(f"1 of {total} exercises done")


def test_check_cell_runs_one_exercise_and_draws_the_rings(tmp_path, capsys, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    mine = tmp_path / "ws"
    workspace.start(LESSON, mine)[0].write_text(NO_ALL_GATHER)
    assert lessons.check("ring_all_reduce", workspace=mine) is False
    out = capsys.readouterr().out
    assert "ring_all_reduce: every member sends 2(p-1) messages" in out
    assert "predict_fastest" not in out and "0 of 3 checks pass" in out
    assert len(shown) == 1 and len(shown[0].axes) == 2  # yours beside the reference's
    assert lessons.check("ring_all_reduce", workspace=tmp_path / "none") is False
    assert len(shown) == 1  # the stub: nothing to draw
    with pytest.raises(lessons.LessonError, match="checked by no lesson"):
        lessons.check("no_such_exercise")


def test_peek_prints_one_reference_solution(capsys):
    assert check_command.main(["01", "--peek", "predict_fastest"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# lessons/solutions/01_collectives.py: the reference")
    assert "def predict_fastest(" in out and "def ring_all_reduce(" not in out
    assert check_command.main(["01", "--peek", "nothing"]) == 2


# -- the MPI exercise fails cleanly ---------------------------------------------------------------

@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_ring_mpi_reports_a_failed_check_and_exits_1_without_aborting(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(MUTATES)
    proc = run_mpi(4, [RING_MPI, "--file", str(mine)], timeout=120, cwd=ROOT)
    assert proc.returncode == 1
    assert "✗ every task gets numpy's sum (int64)" in proc.stdout
    assert "2 of 4 checks pass" in proc.stdout
    assert "MPI_ABORT" not in proc.stdout + proc.stderr
