"""Lesson 01 (collectives): wrong rings with what is wrong and a hint, the check cell's
picture, the notebook, and a failing check under mpiexec (test_lesson_checks.py runs its
checks on the solution and the stubs)."""

from pathlib import Path

import pytest

from course import lessons
from course import workspace
from simdist.commands import check as check_command
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


@pytest.mark.notebook
@pytest.mark.timeout(240)
def test_notebook_runs_top_to_bottom(monkeypatch):
    text, images = run_notebook(NOTEBOOK, monkeypatch, cell_timeout=60)
    assert images >= 4  # two timelines and two plots, drawn inline
    assert "ring == numpy sum on every worker: True" in text
    assert "not done yet: exercise ring_all_reduce" in text  # the stubs, checked in a cell


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
