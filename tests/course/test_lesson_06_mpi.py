"""Lesson 06, exercises 4 and 5: the queue capacity that carries a trainer through a stall,
checked in one process (wrong answers with their hints) and by pipeline_mpi.py with
loader_trainer's three tasks on 1, 2 and 3 MPI ranks (test_lesson_checks.py runs the checks
on the solution and the stubs, test_lesson_06_queues.py the notebook)."""

from pathlib import Path

import pytest


from tests.conftest import lesson_mpi, ROOT, LessonChecks

FOLDER = ROOT / "lessons" / "06_queues"
LESSON = LessonChecks(FOLDER)
CAPACITY = "def choose_capacity():\n    return {answer!r}\n"


def _result(answer):
    return LESSON.result("choose_capacity", CAPACITY.format(answer=answer))


def test_the_reference_capacity_passes_and_says_what_half_of_it_does():
    r = _result(16)
    assert r.passed and r.message == ("capacity 16: starved 0.3%, and capacity 8 starves it "
                                      "4.0%"), r.message


def test_only_the_reference_capacity_passes():
    # the check runs a capacity and half of it: sound because no smaller queue does it
    passed = [c for c in (2, 4, 8, 16, 32, 64) if _result(c).passed]
    assert passed == [16]


@pytest.mark.parametrize("answer, message, hint", [
    (8, "with capacity 8 the trainer is starved 4.0% of the time (less than 2% wanted); its "
     "longest step took 1.81 ms", "a 5 ms stall stops the only reader"),
    (2, "with capacity 2 the trainer is starved 12.4%", "a 5 ms stall stops the only reader"),
    (32, "capacity 16 starves the trainer only 0.3%: a smaller queue does it too",
     "every element the queue holds is memory on ps:0"),
    (10, "choose_capacity returned 10, expected one of (2, 4, 8, 16, 32, 64)",
     "return the queue's capacity"),
    (16.0, "choose_capacity returned 16.0, expected one of", "return the queue's capacity"),
    ((16, 1), "choose_capacity returned (16, 1), expected one of", "return the queue's"),
])
def test_wrong_capacities_get_what_is_wrong_and_a_hint(answer, message, hint):
    r = _result(answer)
    assert not r.passed and r.message.startswith(message), r.message
    assert r.hint.startswith(hint), r.hint
    assert r.hint.zh and r.hint.zh != r.hint  # the hint speaks Chinese too


def test_a_queue_too_small_gets_the_arithmetic_in_its_detail():
    r = _result(4)
    assert r.detail.startswith("a step takes a little over 0.8 ms and eats 2 elements"), r.detail


# -- exercise 5: pipeline_mpi.py under mpiexec, 1 to 3 ranks ---------------------------------

PIPELINE_MPI = str(Path("lessons") / "06_queues" / "pipeline_mpi.py")


def _pipeline_mpi(ranks, *args):
    return lesson_mpi(PIPELINE_MPI, ranks, *args, timeout=100)


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_pipeline_mpi_passes_with_the_solution(ranks):
    proc = _pipeline_mpi(ranks, "--solution")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"loader_trainer's 3 tasks over {ranks} MPI rank(s)" in proc.stdout
    assert ("  capacity 16: the trainer starved 0.3%, its longest step 0.92 ms\n"
            "  capacity 8: the trainer starved 4.0%, its longest step 1.81 ms\n"
            "  ✓ the queue carries the trainer through a stall: capacity 16: starved 0.3%, "
            "and capacity 8 starves it 4.0%") in proc.stdout, proc.stdout
    if ranks == 3:
        assert ("ps:0 (the queue) on rank 0, worker:0 (the trainer) on rank 1, worker:1 "
                "(the loader) on rank 2") in proc.stdout


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_pipeline_mpi_reports_a_queue_too_small_from_rank_0(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(CAPACITY.format(answer=8))
    proc = _pipeline_mpi(3, "--file", str(mine))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("  ✗ with capacity 8 the trainer is starved 4.0% of the time (less than 2% "
            "wanted)") in proc.stdout, proc.stdout
    assert "hint: a 5 ms stall stops the only reader" in proc.stdout


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_pipeline_mpi_refuses_a_choice_that_differs_between_ranks(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text("import os\n\n\ndef choose_capacity():\n"
                    "    return 16 if os.environ.get('OMPI_COMM_WORLD_RANK', '0') == '0' "
                    "else 32\n")
    proc = _pipeline_mpi(2, "--file", str(mine))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("pipeline_mpi: ✗ choose_capacity returned 16 on rank 0 and 32 on rank 1\nhint: "
            "every rank runs the same program and must make the same choice") in proc.stdout


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_pipeline_mpi_on_more_ranks_than_tasks_says_so_once():
    proc = _pipeline_mpi(4, "--solution")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("pipeline_mpi: ✗ InvalidArgumentError: mpiexec -n 4 is larger than the number of "
            "simulated tasks (3): every MPI rank needs at least one task; use -n 3 or fewer"
            in proc.stdout), proc.stdout
