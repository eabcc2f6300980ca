"""Lesson 08, exercises 4 and 5: the master's RegisterGraph and RunGraph requests of an
in-graph job, their wrong answers with hints, and in_graph_mpi.py at 1, 2 and 4 MPI ranks
(test_lesson_checks.py runs every check on the solution and the stubs)."""

from pathlib import Path

import pytest


from tests.conftest import lesson_mpi, ROOT, LessonChecks

FOLDER = ROOT / "lessons" / "08_replication"
LESSON = LessonChecks(FOLDER)
_result = LESSON.result

ANSWER = "def master_requests(workers, mode, steps):\n    {body}\n"
RIGHT = "r = workers if mode == 'sync' else 2 * workers - 1\n    return r, r * steps"
#: (mistake, the body of master_requests, the start of the message, the start of the hint)
WRONG = [
    ("responses counted", "r = workers if mode == 'sync' else 2 * workers - 1\n    "
     "return 2 * r, 2 * r * steps",
     "master_requests(3, 'sync', 4) returned (6, 24); the master sent 3 RegisterGraph and 12 "
     "RunGraph requests", "count the master's requests only"),
    ("registered every run", "r = workers if mode == 'sync' else 2 * workers - 1\n    "
     "return r * steps, r * steps",
     "master_requests(3, 'sync', 4) returned (12, 12)", "RegisterGraph goes once per plan"),
    ("its own task too", "r = workers + 1 if mode == 'sync' else 3 * workers - 1\n    "
     "return r, r * steps",
     "master_requests(3, 'sync', 4) returned (4, 16)", "the master's own task, worker:0"),
    ("async as one plan", "return workers, workers * steps",
     "master_requests(4, 'async', 3) returned (4, 12); the master sent 7 RegisterGraph and 21 "
     "RunGraph requests", "asynchronous: each tower's train op is a plan of its own"),
    ("the ps forgotten", "return workers - 1, (workers - 1) * steps",
     "master_requests(3, 'sync', 4) returned (2, 8)", "the ps holds w and the average"),
    ("three numbers", "return workers, workers * steps, 0",
     "master_requests(3, 'sync', 4) returned (3, 12, 0), expected a pair of ints",
     "return a tuple of two ints"),
]


@pytest.mark.parametrize("body, message, hint", [w[1:] for w in WRONG],
                         ids=[w[0] for w in WRONG])
def test_wrong_request_counts_get_what_is_wrong_and_a_hint(body, message, hint):
    r = _result("master_requests", ANSWER.format(body=body))
    assert not r.passed and r.message.startswith(message), r.message
    assert r.hint.startswith(hint), r.hint
    assert r.hint.zh and r.hint.zh != r.hint  # the hint speaks Chinese too


def test_the_right_counts_pass_in_one_process():
    r = _result("master_requests", ANSWER.format(body=RIGHT))
    assert r.passed and r.message == ("right for 3 workers sync, 4 workers sync, 4 workers "
                                      "async"), r.message
    as_list = RIGHT.replace("return r, r * steps", "return [r, r * steps]")
    assert _result("master_requests", ANSWER.format(body=as_list)).passed  # a pair as a list


# -- exercise 5: in_graph_mpi.py under mpiexec, 1 to 4 ranks -----------------------------------

IN_GRAPH_MPI = str(Path("lessons") / "08_replication" / "in_graph_mpi.py")


def _in_graph_mpi(ranks, *args):
    return lesson_mpi(IN_GRAPH_MPI, ranks, *args)


@pytest.mark.mpi
@pytest.mark.timeout(150)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_in_graph_mpi_passes_with_the_solution(ranks):
    proc = _in_graph_mpi(ranks, "--solution")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"in_graph_training over {ranks} MPI rank(s)" in proc.stdout
    assert "the master sent 7 RegisterGraph and 21 RunGraph requests" in proc.stdout
    assert ("✓ your predictions match the requests counted on rank 0: right for 3 workers "
            "sync, 4 workers sync, 4 workers async") in proc.stdout, proc.stdout
    spread = {1: "0 of the 15", 2: "10 of the 15", 4: "15 of the 15"}[ranks]
    assert "3 workers, sync, 4 steps (worker:0 on rank 0" in proc.stdout
    assert f"requests, {spread} to a task on another rank" in proc.stdout, proc.stdout
    if ranks == 4:
        assert ("(worker:0 on rank 0, worker:1 on rank 1, worker:2 on rank 2, ps:0 on rank 3)"
                in proc.stdout)


@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_in_graph_mpi_reports_a_wrong_count_from_rank_0(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(ANSWER.format(body=WRONG[0][1]))
    proc = _in_graph_mpi(4, "--file", str(mine))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "over 4 MPI rank(s)" in proc.stdout
    assert ("  ✗ master_requests(3, 'sync', 4) returned (6, 24); the master sent 3 RegisterGraph "
            "and 12 RunGraph requests\n      hint: count the master's requests only"
            in proc.stdout), proc.stdout


@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_in_graph_mpi_refuses_a_bad_answer_on_every_rank_before_simulating(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(ANSWER.format(body=WRONG[-1][1]))
    proc = _in_graph_mpi(2, "--file", str(mine))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("in_graph_mpi: ✗ master_requests(3, 'sync', 4) returned (3, 12, 0), expected a "
            "pair of ints (register_graph, run_graph)") in proc.stdout, proc.stdout
