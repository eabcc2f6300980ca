"""Lesson 13 (Failures and recovery): wrong answers with their hints, the mpiexec exercise
with its solution, and the notebook (test_lesson_checks.py runs its checks on the solution
and the stubs; test_lesson_mpi_stubs.py runs restart_mpi.py on the stub)."""

import re
from pathlib import Path

import pytest

from course import lessons

from tests.conftest import ROOT, LessonChecks, lesson_mpi, run_notebook

FOLDER = ROOT / "lessons" / "13_failures"
LESSON = LessonChecks(FOLDER)
_result = LESSON.result


def _answer(exercise, answer):
    return _result(exercise, f"def {exercise}():\n    return {answer!r}")


@pytest.mark.parametrize("answer, message, hint", [
    ({"b"}, "it leaves out c, e, f, which need one", "c (the chief (worker:0) of a TF1"),
    ({"a", "b", "c", "e", "f"}, "it includes a, which need no restore",
     "a (worker:1 of a TF1 between-graph job): a TF1 worker holds no variables"),
    ({"b", "c", "d", "e", "f"}, "it includes d", "d (worker:1 of a ParameterServerStrategy "
     "job): under ParameterServerStrategy a failed worker's function is put back"),
    ({"b", "c", "e"}, "it leaves out f", "f (the coordinator (chief) of a "
     "ParameterServerStrategy job): the coordinator holds the training loop itself"),
    ({"b", "e", "f"}, "it leaves out c", "c (the chief (worker:0) of a TF1 between-graph "
     "job): a restarted chief's MonitoredTrainingSession restores"),
    ("bcef", "expected a set of letters among 'a', 'b', 'c', 'd', 'e', 'f'",
     "return a set such as"),
    ({"g"}, "expected a set of letters", "return a set such as"),
])
def test_wrong_sets_of_failures_name_the_first_mistake(answer, message, hint):
    r = _answer("which_failures_restore", answer)
    assert not r.passed and message in r.message, r.message
    assert r.hint.startswith(hint), r.hint


@pytest.mark.parametrize("answer", [{"b", "c", "e", "f"}, ["F", "e", "c", "b"]])
def test_the_right_failures_pass_as_any_collection_of_letters(answer):
    assert _answer("which_failures_restore", answer).passed


@pytest.mark.parametrize("answer, hint", [
    ("b", "the ps never failed"), ("c", "global_step is a variable like the weights"),
    ("d", "the others ask nothing"), (1, "return the letter of the option")])
def test_wrong_reasons_get_a_hint_aimed_at_the_mistake(answer, hint):
    r = _answer("why_the_chief_restores", answer)
    assert not r.passed and r.hint.startswith(hint), (r.message, r.hint)


@pytest.mark.parametrize("answer, hint", [
    ((6, 0), "a restarted chief is not a plain worker"),
    ((4, 0), "the steps redone are those applied after the checkpoint"),
    ((0, 6), "the chief saved a checkpoint every 4 steps"),
    ((8, 0), "a checkpoint after the failure was never written"),
    ((3, 3), "checkpoints are written at steps 0, 4, 8"),
    ((4, 2.0), "return two numbers of steps"),
])
def test_wrong_chief_restarts_get_a_hint_aimed_at_the_mistake(answer, hint):
    r = _answer("predict_chief_restart", answer)
    assert not r.passed and r.hint.startswith(hint), (r.message, r.hint)
    if all(isinstance(v, int) for v in answer):
        assert r.message == (f"you predicted a restore of step {answer[0]} and {answer[1]} "
                             "steps redone; the simulated chief restored step 4 and 2 steps "
                             "were redone")
        assert r.detail.startswith("global steps each worker's runs reached: {0: [1, 1, 2, 3, "
                                   "4, 5, 6, 5, 6,"), r.detail


def test_the_chief_restart_passes_as_a_list_and_says_who_made_a_session():
    r = _answer("predict_chief_restart", [4, 2])
    assert r.passed and r.message.endswith("(sessions made again: {0: 1, 1: 0, 2: 0})")


@pytest.mark.parametrize("answer, hint", [
    ((4, 28), "epoch 3's checkpoint was still being saved"),
    ((4, 32), "epoch 3's checkpoint was still being saved"),
    ((1, 32), "the starting epoch is the restored checkpoint's iterations // 4"),
    ((3, 24), "the functions cancelled by the failure and the epochs redone are scheduled "
              "again"),
    ((3, 28), "the coordinator had already scheduled epoch 4's functions"),
    ((3, 30), "one function per step: 24, plus the 4 of every epoch"),
    ("3,32", "return an epoch and a number of functions"),
])
def test_wrong_restart_epochs_get_a_hint_aimed_at_the_mistake(answer, hint):
    r = _answer("predict_restart_epoch", answer)
    assert not r.passed and r.hint.startswith(hint), (r.message, r.hint)
    if isinstance(answer, tuple):
        assert r.message.endswith("the coordinator started again at epoch 3 and scheduled 32")
        assert r.detail.startswith("checkpoints completed before the failure: epoch 0, epoch "
                                   "1, epoch 2; "), r.detail


@pytest.mark.parametrize("exercise, answer", [
    ("which_failures_restore", {"b"}), ("which_failures_restore", {"a", "b", "c", "e", "f"}),
    ("why_the_chief_restores", "c"), ("predict_chief_restart", (6, 0)),
    ("predict_restart_epoch", (4, 28)), ("predict_restart_epoch", (3, 28)),
])
def test_messages_hints_and_details_come_in_chinese_too(exercise, answer):
    r = _answer(exercise, answer)
    for text in (r.message, r.hint) + ((r.detail,) if r.detail else ()):
        chinese = lessons.localize(text, "zh")
        assert chinese != text and re.search(r"[\u4e00-\u9fff]", chinese), text


def test_tf_keras_is_named_where_backup_and_restore_is():
    """BackupAndRestore with Model.fit under ParameterServerStrategy is tf_keras's: every
    section that names it says so, and that Keras 3 does not support the strategy."""
    for name in ("lesson.md", "lesson.zh.md"):
        text = (FOLDER / name).read_text(encoding="utf-8")
        for section in re.split(r"\n## ", text):
            if "BackupAndRestore" in section and "Model.fit" in section:
                assert "tf_keras" in section and "Keras 3" in section, (name, section[:60])


@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_restart_mpi_passes_with_the_solution():
    """The coordinator, the 2 workers and the ps on 4 ranks of their own: the functions, the
    failed ps's errors and the checkpoint's reads are MPI messages; the same restart as in
    one process."""
    proc = lesson_mpi(Path("lessons") / "13_failures" / "restart_mpi.py", 4, "--solution")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("(chief:0 on rank 0, worker:0 on rank 1, worker:1 on rank 2, ps:0 on rank 3)"
            in proc.stdout), proc.stdout
    assert "  checkpoints complete before the failure: epoch 0, epoch 1, epoch 2" in proc.stdout
    assert ("✓ where the coordinator starts again: the coordinator starts again at epoch 3 "
            "(iterations 12 // 4) and schedules 32 step functions in all") in proc.stdout


NOTEBOOK_TEXT = [
    # section 1: a worker failure, nothing goes back
    "sessions made again after a failure: worker 0: 0, worker 1: 1",
    "{0: [0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8], 1: [1, 3, 4, 5, 6, 7, 8]}",
    # section 2: the ps fails at step 5, the chief restores step 3
    "ps:0: task failed at 1000.00 ms",
    "{0: [0, 1, 1, 2, 3, 4, 5, 3, 4, 4, 5, 6, 7, 8], 1: [1, 2, 3, 4, 5, 4, 5, 6, 7, 8]}",
    # section 3: the chief fails, restores, and only it makes a new session
    "worker:0: task failed at 1000.00 ms",
    "sessions made again after a failure: worker 0: 1, worker 1: 0",
    # section 5: the ps failure under ParameterServerStrategy
    "24 functions scheduled for 20 steps, 1 restore",
    "step_fn#11 failed: UnavailableError  {'cancelled': 1}",
    "restored: start again at epoch 2  {'iterations': 8}",
    # section 5 on real TF: a killed ps fails the running function, cancels the others
    "join raised: UnavailableError",
    # section 4 on real TF: worker 1's next run comes after the chief's restore
    "worker 1's next run ended at",
    ", after it: True",
    # section 6 on real TF: tf_keras's Model.fit with BackupAndRestore through a killed worker
    "ClusterCoordinator",
    "backup folder after each epoch: [['chief'], ['chief'], ['chief']] ; after fit: []",
    "not done yet: exercise which_failures_restore",
]


@pytest.mark.notebook
@pytest.mark.realtf
@pytest.mark.timeout(400)
def test_notebook_runs_top_to_bottom(monkeypatch):
    # six figures: the timelines of sections 1, 2, 3, 4 and 5 and the loss of section 2
    text, images = run_notebook(ROOT / "notebooks" / "13_failures.ipynb", monkeypatch,
                                cell_timeout=300)
    assert [line for line in NOTEBOOK_TEXT if line not in text] == []
    assert images >= 6, f"{images} figures drawn, 6 expected"
    # real TF: the killed ps made the chief restore a checkpoint, as did the killed chief
    restored = re.search(r"simdist restored model\.ckpt-(\d+) ; real TF restored "
                         r"model\.ckpt-(\d+)", text)
    assert restored, text[-3000:]
    chief = re.search(r"the chief restored model\.ckpt-(\d+): global step (\d+) -> (\d+)", text)
    # the chief restored the checkpoint of a step it had reached (it may have died right
    # after saving it: then nothing went back)
    assert chief and int(chief.group(2)) >= int(chief.group(3)) == int(chief.group(1)), text
    assert int(chief.group(1)) % 3 == 0, text
    assert "sessions made again: {0: 1, 1: 0}" in text
    fetched = re.search(r"fetch of the 12 pending functions: (\{.*\})", text).group(1)
    assert "'CancelledError'" in fetched, fetched
