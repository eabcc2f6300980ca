"""Lesson 12 (Evaluation while training): wrong answers with their hints, and the notebook
(test_lesson_checks.py runs its checks on the solution and the stubs)."""


import re

import pytest

from course import lessons

from tests.conftest import ROOT, LessonChecks, run_notebook

FOLDER = ROOT / "lessons" / "12_evaluation"
LESSON = LessonChecks(FOLDER)
_result = LESSON.result


@pytest.mark.parametrize("answer, hint", [
    ((2, 1), "count examples, not batches"),
    ((0, 0), "distributed evaluation is at-least-once"),
    ((32, 32), "that is the failure at 2400 us of section 3"),
    ((64, 0), "when worker:1 comes back its per-worker dataset is rebuilt"),
    ((0, 32), "two batches count twice"),
    ((96, 64), "list the batches each worker's iterator hands out"),
    ((64.0, 32.0), "return two numbers of examples"),
])
def test_wrong_visit_counts_get_a_hint_aimed_at_the_mistake(answer, hint):
    r = _result("predict_eval_visits", f"def predict_eval_visits():\n    return {answer!r}")
    assert not r.passed and r.hint.startswith(hint), (r.message, r.hint)
    if isinstance(answer, tuple) and all(isinstance(v, int) for v in answer):
        assert r.message == (f"you predicted {answer[0]} examples counted twice and "
                             f"{answer[1]} never; the simulated evaluation counted 64 twice "
                             "and 32 never")
        assert r.detail.startswith("worker:0 ran #21, #23, #24, #26, #28; worker:1 ran #22, "
                                   "#22 (run 2), #25, #27; visits per batch "
                                   "[2, 2, 1, 1, 1, 1, 1, 0]"), r.detail
    else:
        assert "expected a pair of ints" in r.message


@pytest.mark.parametrize("answer, message, hint", [
    (("inline", 2, 1), "style 'inline' does not count every example once on the workers",
     "inline evaluation counts once, but on the coordinator"),
    (("distributed", 4, 9), "style 'distributed'", "distributed evaluation is at-least-once"),
    (("sidecar", 4, 5), "style 'sidecar'", "a side-car evaluator is a task of its own"),
    (("exactly_once", 1, 1), "1 shards: expected 2 to 8", "fewer shards than workers"),
    (("exactly_once", 16, 17), "16 shards: expected 2 to 8", "fewer shards than workers"),
    (("exactly_once", 4, 4), "you predicted 4 evaluation function runs with 4 shards; the "
     "trace shows 5", "the shard worker:1 was running when it failed runs again"),
    (("exactly_once", 8, 9), "you predicted 9 evaluation function runs with 8 shards; the "
     "trace shows 8", "with 8 shards the shard on worker:1 has ended before 2430 us"),
    (("exactly_once", 4, 9), "you predicted 9 evaluation function runs with 4 shards; the "
     "trace shows 5", "count shard functions, not batches"),
    (("exactly_once", 4, 6), "you predicted 6 evaluation function runs with 4 shards",
     "one function per shard, plus one more"),
    (("exact", 4, 5), "choose_exactly_once returned ('exact', 4, 5), expected (style, shards, "
     "runs)", "return a tuple such as"),
])
def test_wrong_styles_and_runs_get_what_is_wrong_and_a_hint(answer, message, hint):
    r = _result("choose_exactly_once", f"def choose_exactly_once():\n    return {answer!r}")
    assert not r.passed and r.message.startswith(message), r.message
    assert r.hint.startswith(hint), r.hint


@pytest.mark.parametrize("answer, runs", [(("exactly_once", 2, 3), "3 runs, eval_shard#22 twice"),
                                          (("exactly_once", 7, 7), "7 runs, none twice"),
                                          (("exactly_once", 8, 8), "8 runs, none twice")])
def test_other_shard_counts_pass_with_their_own_runs(answer, runs):
    r = _result("choose_exactly_once", f"def choose_exactly_once():\n    return {answer!r}")
    assert r.passed and r.message.endswith(runs), r.message


@pytest.mark.parametrize("exercise, source", [
    ("choose_exactly_once", "def choose_exactly_once():\n    return ['exactly_once', 2, 3]"),
    ("predict_eval_visits", "import numpy as np\n"
                            "def predict_eval_visits():\n    return [np.int64(64), 32]"),
])
def test_a_pair_or_triple_may_be_a_list(exercise, source):
    """Issue 28, one rule for the types of answers (course/answers.py): a pair or a triple is
    a tuple or a list, as in every lesson."""
    r = _result(exercise, source)
    assert r.passed, r.message


def test_a_count_is_no_bool():
    r = _result("predict_eval_visits", "def predict_eval_visits():\n    return (True, 0)")
    assert not r.passed and r.message.startswith("predict_eval_visits returned (True, 0), "
                                                 "expected a pair of ints")


def test_tf_keras_is_named_wherever_its_evaluation_apis_are():
    """Issue 28: pss_evaluation_shards and SidecarEvaluator exist in tf_keras only (Keras 3,
    TF 2.21's default, has neither): every section that names one says so."""
    for name in ("lesson.md", "lesson.zh.md"):
        text = (FOLDER / name).read_text(encoding="utf-8")
        for section in re.split(r"\n## ", text):
            if "pss_evaluation_shards" in section or "SidecarEvaluator" in section:
                assert "tf_keras" in section, (name, section[:60])
        assert "Keras 3" in text, name
    assert "tf_keras" in (FOLDER / "exercises.py").read_text(encoding="utf-8")


def _ckpts(*numbers):
    return [f"ckpt-{n}" for n in numbers]


@pytest.mark.parametrize("answer, message, hint", [
    (_ckpts(*range(10)), "includes ['ckpt-2', 'ckpt-5'], which it skips",
     "checkpoints are not queued"),
    (_ckpts(0, 1, 3, 4, 6, 7, 8), "leaves out ['ckpt-9'], which it evaluates",
     "the evaluator keeps looking after training ends"),
    (_ckpts(0, 1, 2, 4, 5, 7, 8, 9), "includes ['ckpt-2', 'ckpt-5'], which it skips; "
     "leaves out ['ckpt-3', 'ckpt-6']", "it evaluates the latest checkpoint, not the "
     "oldest new one"),
    # the save-begin times instead of the complete ones: ckpt-9 begins before the 4.9 ms
    # look and is complete after it
    (_ckpts(0, 1, 3, 4, 6, 7, 9), "leaves out ['ckpt-8'], which it evaluates",
     "a checkpoint counts once its save is complete (the checkpoint file is written last), "
     "32 us after it begins: ckpt-9's save begins at 4.886 ms, before the 4.9 ms look, and "
     "is complete at 4.918 ms"),
    (_ckpts(1, 3, 5, 7, 9), "leaves out ['ckpt-0', 'ckpt-4', 'ckpt-6', 'ckpt-8']",
     "0.7 ms is not two checkpoint intervals"),
    (_ckpts(0, 1, 2, 4, 5, 7, 8), "includes ['ckpt-2', 'ckpt-5'], which it skips",
     "list the looks (every 0.7 ms from 0) and the checkpoints visible before each"),
    ("ckpt-3", "predict_sidecar returned 'ckpt-3', expected a list of checkpoint names",
     "return a list of names"),
    (["ckpt-10"], "expected a list of checkpoint names among ckpt-0 .. ckpt-9",
     "return a list of names"),
])
def test_wrong_checkpoint_lists_get_what_is_wrong_and_a_hint(answer, message, hint):
    r = _result("predict_sidecar", f"def predict_sidecar():\n    return {answer!r}")
    assert not r.passed and message in r.message, r.message
    assert r.hint.startswith(hint), r.hint
    if isinstance(answer, list) and answer != ["ckpt-10"]:
        assert r.detail.startswith("new checkpoints at each look that found one: 0.7 ms: "
                                   "ckpt-0; 1.4 ms: ckpt-1; 2.1 ms: ckpt-2, ckpt-3;"), r.detail


def test_the_right_checkpoints_pass_as_a_set_too():
    r = _result("predict_sidecar", "def predict_sidecar():\n    return {'ckpt-9', 'ckpt-0', "
                "'ckpt-1', 'ckpt-3', 'ckpt-4', 'ckpt-6', 'ckpt-7', 'ckpt-8'}")
    assert r.passed and r.message.endswith("and skips ckpt-2, ckpt-5"), r.message


@pytest.mark.parametrize("exercise, answer", [
    ("predict_eval_visits", (32, 32)), ("predict_eval_visits", (64, 0)),
    ("choose_exactly_once", ("inline", 2, 1)), ("choose_exactly_once", ("exactly_once", 4, 4)),
    ("predict_sidecar", _ckpts(*range(10))), ("predict_sidecar", _ckpts(1, 3, 5, 7, 9)),
])
def test_hints_and_details_come_in_chinese_too(exercise, answer):
    r = _result(exercise, f"def {exercise}():\n    return {answer!r}")
    for text in (r.hint, r.detail):
        chinese = lessons.localize(text, "zh")
        assert chinese != text and re.search(r"[\u4e00-\u9fff]", chinese), text


NOTEBOOK_TEXT = ["loss 0.01145, 256 examples counted, visits per batch [1, 1, 1, 1, 1, 1, 1, 1]",
                 "loss 0.01149, 256 visits, per batch [2, 1, 1, 1, 1, 1, 1, 0]",
                 "worker:1: eval_step#22 (run 2)    2610.1 us ..  2658.4 us",
                 "runs: {'eval_shard#21': 1, 'eval_shard#22': 2, 'eval_shard#23': 1, "
                 "'eval_shard#24': 1}",
                 "skipped: ['ckpt-1', 'ckpt-2', 'ckpt-4', 'ckpt-6', 'ckpt-8']",
                 "look every 1.5 ms:  4 evaluated, 6 skipped",
                 # section 6: real TF with one worker gives simdist's metrics and counts
                 # each example once; the side-car evaluates the last checkpoint (the
                 # others it skips vary with real timings); a worker killed as evaluation
                 # begins
                 "inline        loss simdist 0.011492, real TF 0.011492; real visits per "
                 "batch [1, 1, 1, 1, 1, 1, 1, 1]",
                 "distributed   loss simdist 0.011492, real TF 0.011492; real visits per "
                 "batch [1, 1, 1, 1, 1, 1, 1, 1]",
                 "exactly_once  loss simdist 0.011492, real TF 0.011492; real visits per "
                 "batch [1, 1, 1, 1, 1, 1, 1, 1]",
                 ", within float32 round-off: True",
                 "ckpt-9: loss real TF 0.010597, simdist 0.010597",
                 "exactly_once  visits per batch [1, 1, 1, 1, 1, 1, 1, 1]: 0 examples counted "
                 "twice, 0 never; loss ",
                 "not done yet: exercise predict_eval_visits"]


@pytest.mark.notebook
@pytest.mark.realtf
@pytest.mark.timeout(300)
def test_notebook_runs_top_to_bottom(monkeypatch):
    # five figures: the evaluation lanes of sections 1 to 5
    text, images = run_notebook(ROOT / "notebooks" / "12_evaluation.ipynb", monkeypatch,
                                cell_timeout=200)
    assert [line for line in NOTEBOOK_TEXT if line not in text] == []
    assert images >= 5, f"{images} figures drawn, 5 expected"
    # the killed worker's runs train asynchronously: their losses vary, but exactly_once's
    # metric is its weights' loss with each example once
    loss, once = re.search(r"exactly_once  visits per batch .*; loss ([\d.]+), each "
                           r"example once ([\d.]+)", text).groups()
    assert float(loss) == pytest.approx(float(once), abs=1e-5)  # printed with 5 decimals
