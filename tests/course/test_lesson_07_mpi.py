"""Lesson 07, exercises 4 and 5: whose gradients the accumulators apply when the chief is
the straggler, checked in one process (wrong predictions with their hints) and by
straggler_mpi.py with the ps and four workers on 1, 2 and 4 MPI ranks (test_lesson_checks.py
runs the checks on the solution and the stubs, test_lesson_07_sync_replicas.py the
notebook)."""

from pathlib import Path

import pytest


from tests.conftest import lesson_mpi, ROOT, LessonChecks

FOLDER = ROOT / "lessons" / "07_sync_replicas"
LESSON = LessonChecks(FOLDER)
PREDICTION = "def predict_applied():\n    return {answer!r}\n"
APPLIED = {0: 0, 1: 12, 2: 12, 3: 12}


def _result(answer):
    return LESSON.result("predict_applied", PREDICTION.format(answer=answer))


def test_the_right_prediction_passes_and_says_what_the_chief_lost():
    r = _result(APPLIED)
    assert r.passed and r.message == ("{0: 0, 1: 12, 2: 12, 3: 12}: the chief's 8 gradients "
                                      "were all dropped, and the job reached global step 12 "
                                      "in 20.98 ms"), r.message


@pytest.mark.parametrize("answer, hint", [
    ({0: 12, 1: 12, 2: 12, 3: 0}, "the chief's gradient comes 2.5 ms into its step"),
    ({0: 9, 1: 9, 2: 9, 3: 9}, "the chief's gradient comes 2.5 ms into its step"),
    ({0: 0, 1: 13, 2: 12, 3: 12}, "each global step applies exactly replicas_to_aggregate "
                                  "gradients: 3 x 12 steps = 36 in all"),
    ({0: 5, 1: 12, 2: 12, 3: 12}, "each global step applies exactly"),
    ({0: 0, 1: 14, 2: 12, 3: 10}, "the three fast workers are alike"),
])
def test_wrong_predictions_get_a_hint_aimed_at_the_mistake(answer, hint):
    r = _result(answer)
    assert not r.passed and r.message == (f"you predicted {answer}; the accumulators applied "
                                          f"{APPLIED}"), r.message
    assert r.hint.startswith(hint), r.hint
    assert r.hint.zh and r.hint.zh != r.hint  # the hint speaks Chinese too
    assert r.detail.startswith("the backup worker is whichever is slowest, the chief too")


@pytest.mark.parametrize("answer", [[0, 12, 12, 12], {"worker:0": 0, "worker:1": 12,
                                                      "worker:2": 12, "worker:3": 12},
                                    {0: 0, 1: 12, 2: 12}, {0: 0.0, 1: 12, 2: 12, 3: 12}])
def test_an_answer_that_is_not_a_count_per_worker_says_what_is_expected(answer):
    r = _result(answer)
    assert not r.passed and r.message == (f"predict_applied returned {answer!r}, expected a "
                                          "dict {worker: gradients applied} for the workers "
                                          "[0, 1, 2, 3]"), r.message
    assert r.hint.startswith("return e.g. {0: 10, 1: 10, 2: 10, 3: 6}")


# -- exercise 5: straggler_mpi.py under mpiexec, 1 to 4 ranks --------------------------------

STRAGGLER_MPI = str(Path("lessons") / "07_sync_replicas" / "straggler_mpi.py")


def _straggler_mpi(ranks, *args):
    return lesson_mpi(STRAGGLER_MPI, ranks, *args, timeout=100)


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_straggler_mpi_passes_with_the_solution(ranks):
    proc = _straggler_mpi(ranks, "--solution")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"1 ps and 4 workers over {ranks} MPI rank(s)" in proc.stdout
    assert ("  worker 0: 8 steps, 0 gradients applied, 8 dropped" in proc.stdout
            and "  worker 1: 15 steps, 12 gradients applied, 3 dropped" in proc.stdout)
    assert ("  ✓ your prediction is the accumulators' tally: {0: 0, 1: 12, 2: 12, 3: 12}: the "
            "chief's 8 gradients were all dropped, and the job reached global step 12 in "
            "20.98 ms") in proc.stdout, proc.stdout
    if ranks == 4:
        assert ("ps:0 on rank 0, worker:0 on rank 0, worker:1 on rank 1, worker:2 on rank 2, "
                "worker:3 on rank 3") in proc.stdout


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_straggler_mpi_reports_a_wrong_prediction_from_rank_0(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(PREDICTION.format(answer={0: 12, 1: 12, 2: 12, 3: 0}))
    proc = _straggler_mpi(4, "--file", str(mine))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("  ✗ you predicted {0: 12, 1: 12, 2: 12, 3: 0}; the accumulators applied "
            "{0: 0, 1: 12, 2: 12, 3: 12}\n      hint: the chief's gradient comes 2.5 ms") \
        in proc.stdout, proc.stdout
