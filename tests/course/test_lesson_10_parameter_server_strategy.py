"""Lesson 10 (ParameterServerStrategy and the ClusterCoordinator): wrong answers with their
hints, and the notebook (test_lesson_checks.py runs its checks on the solution and the
stubs)."""


import pytest


from tests.conftest import ROOT, LessonChecks, assert_notebook_shows

FOLDER = ROOT / "lessons" / "10_parameter_server_strategy"
LESSON = LessonChecks(FOLDER)
_result = LESSON.result


PARTITIONERS = "from simdist.distribute.sharded_variable import *\n"


@pytest.mark.parametrize("answer, message, hint", [
    ("None", "with no partitioner ps:0 stores 64,000 bytes, 2.97x the average 21,560",
     "without a partitioner each variable goes whole to one ps"),
    ("FixedShardsPartitioner(2)", "with FixedShardsPartitioner(num_shards=2) ps:0 stores "
     "32,320 bytes, 1.50x", "shards go to the ps in turn"),
    ("FixedShardsPartitioner(4)", "ps:0 stores 32,172 bytes, 1.49x",
     "shards go to the ps in turn"),
    ("MinSizePartitioner()", "with MinSizePartitioner(min_shard_bytes=262144, max_shards=1, "
     "bytes_per_string=16) ps:0 stores 64,000 bytes", "MinSizePartitioner makes at most"),
    ("MinSizePartitioner(256 << 10, max_shards=3)", "ps:0 stores 64,000 bytes",
     "MinSizePartitioner's shards are at least min_shard_bytes"),
    ("MaxSizePartitioner(32_000)", "ps:0 stores 32,040 bytes, 1.49x",
     "the big table decides"),
    ("3", "choose_partitioner returned 3, expected a partitioner", "return a partitioner"),
])
def test_wrong_partitioners_get_what_is_wrong_and_a_hint(answer, message, hint):
    r = _result("choose_partitioner",
                f"{PARTITIONERS}def choose_partitioner():\n    return {answer}")
    assert not r.passed and message in r.message, r.message
    assert r.hint.startswith(hint), r.hint


@pytest.mark.parametrize("answer", ["MinSizePartitioner(1000, max_shards=3)",
                                    "MaxSizePartitioner(22_000)", "FixedShardsPartitioner(6)"])
def test_other_balanced_partitioners_pass(answer):
    r = _result("choose_partitioner",
                f"{PARTITIONERS}def choose_partitioner():\n    return {answer}")
    assert r.passed, r.message


@pytest.mark.parametrize("answer, hint", [
    (5, "the function worker:1 was running when it failed is put back in the queue"),
    (20, "count functions, not steps"),
    (21, "count functions, not steps"),
    (10, "only the function in flight on the failed worker runs again"),
    (4, "every scheduled function runs at least once"),
    (6.0, "return the number of function runs"),
])
def test_wrong_run_counts_get_a_hint_aimed_at_the_mistake(answer, hint):
    r = _result("predict_function_runs", f"def predict_function_runs():\n    return {answer!r}")
    assert not r.passed and r.hint.startswith(hint), (r.message, r.hint)
    if not isinstance(answer, float):
        assert r.message == f"you predicted {answer} function runs; the simulation started 6"


@pytest.mark.parametrize("answer, message, hint", [
    (1, "steps_per_execution=1 trains the 40 steps in 4.29 ms (at most 2.5 ms wanted)",
     "each function costs the coordinator 100 us"),
    (2, "steps_per_execution=2 trains the 40 steps in 2.89 ms", "each function costs"),
    (10, "steps_per_execution=10 trains the 40 steps in 3.24 ms", "4 long functions on 2"),
    (40, "steps_per_execution=40 trains the 40 steps in 2.88 ms", "1 long function on 2"),
    (8, "steps_per_execution=4 also trains within 2.5 ms (2.29 ms)", "the smallest that does"),
    (3, "choose_steps_per_execution returned 3, expected one of", "return a divisor"),
])
def test_wrong_steps_per_execution_get_what_is_wrong_and_a_hint(answer, message, hint):
    r = _result("choose_steps_per_execution",
                f"def choose_steps_per_execution():\n    return {answer!r}")
    assert not r.passed and r.message.startswith(message), r.message
    assert r.hint.startswith(hint), r.hint
    if "returned" not in message:
        assert r.detail.startswith("measured: 1: 4.29 ms, 2: 2.89 ms, 4: 2.29 ms"), r.detail


NOTEBOOK_TEXT = ["no partitioner                           {'ps:0': 64000, 'ps:1': 640",
                 "20 functions, 2.20 ms",
                 "bytes moved per step: {'ps:0': 163, 'ps:1': 54}",
                 "20 functions, 21 runs: {'step_fn#2': 2}",
                 "step_fn#2 back in the queue (worker:1 failed)",
                 "steps_per_execution= 4: 10 functions, 2.29 ms",
                 "distributed   loss 0.01149  visits [2 1 1 1 1 1 1 0]",
                 # section 6: real TF (one worker, in process) gives simdist's losses and
                 # shard layout
                 "simdist  losses [0.68271, 0.68227, 0.67432, 0.66962, 0.66392, 0.67354, "
                 "0.66413, 0.65907]",
                 "real TF  losses [0.68271, 0.68227, 0.67432, 0.66962, 0.66392, 0.67354, "
                 "0.66413, 0.65907]\n         embedding    /job:ps/task:0 [4, 16], "
                 "/job:ps/task:1 [4, 16]\n         dense/kernel /job:ps/task:0 [16, 1]",
                 ", within float32 round-off: True",
                 "not done yet: exercise choose_partitioner"]


@pytest.mark.notebook
@pytest.mark.realtf
@pytest.mark.timeout(300)
def test_notebook_runs_top_to_bottom(monkeypatch):
    # one figure: the scheduled functions on the workers and the coordinator
    assert_notebook_shows(ROOT / "notebooks" / "10_parameter_server_strategy.ipynb",
                          monkeypatch, NOTEBOOK_TEXT, images=1, cell_timeout=200)
