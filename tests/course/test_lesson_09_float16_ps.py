"""Lesson 09, exercises 4 and 5: the fewest ps tasks for float16 gradients, wrong answers with
their hints, the figures the hint's detail quotes, and ps_nic_mpi.py at 1, 2 and 4 MPI ranks
(test_lesson_checks.py runs every check on the solution and the stubs)."""

from pathlib import Path

import pytest

from course.lessons import load_module
from simdist.training.ps_training import train_on_ps

from tests.conftest import lesson_mpi, ROOT, LessonChecks

FOLDER = ROOT / "lessons" / "09_network"
LESSON = LessonChecks(FOLDER)
_result = LESSON.result
ANSWER = "def choose_ps_for_float16():\n    return {answer!r}\n"


@pytest.fixture(scope="module")
def checks():
    return load_module(FOLDER / "checks.py", "_lesson09_checks")


@pytest.mark.parametrize("answer, message, hint", [
    (3, "with 3 ps tasks the busiest ps NIC is busy 50% of the time (out 50%, in 25%); at most "
     "45% wanted", "float16 halves the pushes only"),
    (2, "with 2 ps tasks the busiest ps NIC is busy 62% of the time (out 62%, in 31%)",
     "float16 halves the pushes only"),
    (1, "with 1 ps task the busiest ps NIC is busy 82%", "float16 halves the pushes only"),
    (5, "4 ps tasks also keep every ps NIC at most 45% busy (41%)", "the fewest that do"),
    (True, "choose_ps_for_float16 returned True, expected an int 1..8", "return the number"),
    (0, "choose_ps_for_float16 returned 0, expected an int 1..8", "return the number"),
])
def test_wrong_ps_counts_get_what_is_wrong_and_a_hint(answer, message, hint):
    r = _result("choose_ps_for_float16", ANSWER.format(answer=answer))
    assert not r.passed and r.message.startswith(message), r.message
    assert r.hint.startswith(hint), r.hint
    assert r.hint.zh and r.hint.zh != r.hint  # the hint speaks Chinese too
    if "busy" in message and answer < 4:
        assert r.detail.startswith("one worker alone makes an update every 3.75 ms"), r.detail


def test_four_ps_tasks_pass_in_one_process():
    r = _result("choose_ps_for_float16", ANSWER.format(answer=4))
    assert r.passed and r.message == ("with 4 ps tasks the busiest ps NIC is busy 41% of the "
                                      "time (out 41%, in 21%); with 3, 50%"), r.message


def test_the_answer_stands_clear_of_the_limit_and_the_closed_form_agrees(checks):
    """3 and 4 ps tasks sit a few points either side of 45%, so that a small change of the
    cost model cannot flip the answer silently; the detail's figures hold (one worker alone:
    an update every 3.75 ms, its pull of 2 MB 1.6 ms on the wire, the egress the busier
    direction), and the closed form they make picks the same answer."""
    limit = checks.FLOAT16_AT_MOST
    assert checks.float16_load(3).busy > limit + 0.03
    assert checks.float16_load(4).busy < limit - 0.03
    for ps in (3, 4):
        load = checks.float16_load(ps)
        assert load.busy == load.busy_out == pytest.approx(2 * load.busy_in, rel=0.01)
    alone = train_on_ps(**{**checks.FLOAT16, "workers": 1, "step_us": (500,)})
    t1_ms = (alone.trained_ns - alone.started_ns) / alone.global_step / 1e6
    assert t1_ms == pytest.approx(3.75, abs=0.02)
    assert alone.nic_loads()["ps:0"].busy_out == pytest.approx(1.6 / t1_ms, rel=0.01)
    offered = 4 * 1.6 / t1_ms  # NICs' worth of egress
    assert offered / 3 > limit >= offered / 4


# -- exercise 5: ps_nic_mpi.py under mpiexec, 1 to 4 ranks -------------------------------------

PS_NIC_MPI = str(Path("lessons") / "09_network" / "ps_nic_mpi.py")


def _ps_nic_mpi(ranks, *args):
    return lesson_mpi(PS_NIC_MPI, ranks, *args)


@pytest.mark.mpi
@pytest.mark.timeout(150)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_ps_nic_mpi_passes_with_the_solution(ranks):
    proc = _ps_nic_mpi(ranks, "--solution")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (f"returned 4; 4 workers with float16 gradients over {ranks} MPI rank(s)"
            in proc.stdout)
    assert ("✓ the fewest ps tasks that keep every ps NIC at most 45% busy: with 4 ps tasks the "
            "busiest ps NIC is busy 41% of the time (out 41%, in 21%); with 3, 50%"
            in proc.stdout), proc.stdout
    if ranks == 4:
        assert ("  4 ps (rank 0: worker:0, worker:1; rank 1: worker:2, worker:3; rank 2: ps:0, "
                "ps:1; rank 3: ps:2, ps:3): the busiest ps NIC busy 41% out, 21% in"
                in proc.stdout), proc.stdout


@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_ps_nic_mpi_reports_too_few_ps_tasks_from_rank_0(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(ANSWER.format(answer=3))
    proc = _ps_nic_mpi(4, "--file", str(mine))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "  2 ps (rank 0: worker:0, worker:1; rank 1: worker:2, worker:3; rank 2: ps:0; " \
           "rank 3: ps:1)" in proc.stdout, proc.stdout
    assert ("  ✗ with 3 ps tasks the busiest ps NIC is busy 50% of the time (out 50%, in 25%); "
            "at most 45% wanted\n      hint: float16 halves the pushes only") in proc.stdout
