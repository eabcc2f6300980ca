"""Lesson 14 (Measured speed-ups): wrong answers with their hints, the mpiexec exercise with
its solution, and the notebook (test_lesson_checks.py runs its checks on the solution and the
stubs; test_lesson_mpi_stubs.py runs grouped_mpi.py on the stub)."""

import re
from pathlib import Path

import pytest

from course import lessons

from tests.conftest import ROOT, LessonChecks, lesson_mpi, run_notebook

FOLDER = ROOT / "lessons" / "14_speedups"
LESSON = LessonChecks(FOLDER)
_result = LESSON.result


def _answer(exercise, answer):
    return _result(exercise, f"def {exercise}():\n    return {answer!r}")


@pytest.mark.parametrize("answer, message, hint", [
    (512, "global batch 512: the smallest that gives 7x on 8 GPUs is 256",
     "a smaller global batch already reaches 7x"),
    (2048, "global batch 2048: the smallest that gives 7x", "a smaller global batch already"),
    (128, "global batch 128: the smallest", "at 128 the 8 GPUs reach only 6.77x"),
    (64, "global batch 64: the smallest", "at 64 the 8 GPUs reach only 5.86x"),
    (100, "choose_global_batch returned 100, expected one of 32, 64", "return a global batch"),
    (256.0, "choose_global_batch returned 256.0", "return a global batch"),
])
def test_wrong_global_batches_get_a_hint_aimed_at_the_mistake(answer, message, hint):
    r = _answer("choose_global_batch", answer)
    assert not r.passed and r.message.startswith(message), r.message
    assert r.hint.startswith(hint), r.hint
    if isinstance(answer, int) and answer != 100:
        assert r.detail.startswith("speed-up on 8 GPUs by global batch: 32: 4.63x, 64: 5.86x, "
                                   "128: 6.77x, 256: 7.33x, 512: 7.65x"), r.detail


def test_the_right_global_batch_passes_with_its_neighbour():
    r = _answer("choose_global_batch", 256)
    assert r.passed and r.message == ("global batch 256: 8 GPUs run an epoch 7.33x faster "
                                      "than one (at 128: 6.77x)"), r.message


@pytest.mark.parametrize("answer, hint", [
    ("b", "logical devices are one process's"), ("c", "num_replicas_in_sync is 2"),
    ("d", "MirroredStrategy cuts a global batch of 64"), ("e", "return the letter"),
    (1, "return the letter"),
])
def test_wrong_reasons_get_a_hint_aimed_at_the_mistake(answer, hint):
    r = _answer("why_logical_devices", answer)
    assert not r.passed and r.hint.startswith(hint), (r.message, r.hint)


@pytest.mark.parametrize("answer, hint", [
    (0.1, "the same rate: a batch 4x larger"),
    (0.2, "that is the square-root rule"),
    (0.8, "scale by how much the global batch grew (64 to 256), not by the number of "
          "replicas"),
    (0.025, "a larger batch gives a less noisy gradient"),
    (1.6, "the linear scaling rule: the rate times the global batch's growth"),
    ("0.4", "return a float"), (0.0, "return a float"),
])
def test_wrong_learning_rates_get_a_hint_aimed_at_the_mistake(answer, hint):
    r = _answer("scale_learning_rate", answer)
    assert not r.passed and r.hint.startswith(hint), (r.message, r.hint)
    if isinstance(answer, float) and answer > 0:
        assert r.message.endswith("the linear scaling rule gives 0.4"), r.message
        assert r.detail.startswith("loss every 256 examples: batch 64 at 0.1 [2.636, "), r.detail


@pytest.mark.parametrize("answer", [0.4, 0.41, 2 / 5])
def test_the_linear_rule_passes_within_five_percent(answer):
    r = _answer("scale_learning_rate", answer)
    assert r.passed and "follows the batch of 64's example for example" in r.message, r.message


@pytest.mark.parametrize("answer, hint", [
    ((969, 690), "that is 8 machines of one GPU"),
    ((553, 572), "a ring of p members sends 2(p-1)/p"),
    ((1107, 700), "a ring of p members sends 2(p-1)/p"),  # 2x the gradients
    ((415, 676), "each machine's leader sends the whole machine's reduced gradients"),
    ((830, 410), "the step is the compute"),
    ((830, 690.5), "the step is the compute"),  # 8 x 1's step, 5.7% long
    ((100, 600), "the gradients are 553 MB"),
    ("830", "return two numbers"), ((830, 676, 1), "return two numbers"),
])
def test_wrong_grouped_predictions_get_a_hint_aimed_at_the_mistake(answer, hint):
    r = _answer("predict_grouped", answer)
    assert not r.passed and r.hint.startswith(hint), (r.message, r.hint)
    if isinstance(answer, tuple) and len(answer) == 2:
        assert r.message.endswith("machine 0's NIC sends 830 MB a step, and a step takes "
                                  "653.5 ms"), r.message


@pytest.mark.parametrize("answer", [(830, 676), [830.1, 640.0]])
def test_grouped_predictions_within_the_tolerances_pass(answer):
    assert _answer("predict_grouped", answer).passed


@pytest.mark.parametrize("exercise, answer", [
    ("choose_global_batch", 512), ("choose_global_batch", 128), ("why_logical_devices", "b"),
    ("scale_learning_rate", 0.1), ("scale_learning_rate", 0.8),
    ("predict_grouped", (969, 690)), ("predict_grouped", (830, 410)),
])
def test_messages_hints_and_details_come_in_chinese_too(exercise, answer):
    r = _answer(exercise, answer)
    for text in (r.message, r.hint) + ((r.detail,) if r.detail else ()):
        chinese = lessons.localize(text, "zh")
        assert chinese != text and re.search(r"[\u4e00-\u9fff]", chinese), text


@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_grouped_mpi_passes_with_the_solution():
    """8 workers of 4 machines on 4 ranks, a machine each: the hierarchical all-reduce's
    ring between the leaders crosses ranks; the same bytes and step as in one process."""
    proc = lesson_mpi(Path("lessons") / "14_speedups" / "grouped_mpi.py", 4, "--solution")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(worker:0 on rank 0, worker:1 on rank 0, worker:2 on rank 1," in proc.stdout
    assert ("✓ machine 0's NIC bytes and the step: machine 0's NIC sends 830 MB a step, and a "
            "step takes 653.5 ms") in proc.stdout, proc.stdout


NOTEBOOK_TEXT = [
    # section 1: simulated epochs of ResNet-50 on 1 to 8 GPUs
    "global batch   32: epoch 1 GPU 206.2 s, 2 GPU 113.8 s, 4 GPU  67.6 s, 8 GPU  44.5 s; "
    "speed-up on 8: 4.63x",
    "speed-up on 8: 7.65x",
    # section 2 on real TF: MirroredStrategy's Model.fit on 1 and 2 logical CPUs
    "MirroredStrategy x2, global batch  64: 24 steps, fastest epoch",
    "MirroredStrategy x1, global batch 512:  3 steps, fastest epoch",
    # section 3 on real TF: the localhost cluster, and the calibrated simulator
    "2 workers, global batch 512: epoch",
    "mirrored               x2 batch 512: measured",
    "multi_worker_mirrored  x2 batch 512: measured",
    # section 4: the rate scaled with the batch, simulated and on real TF
    "batch 64, rate 0.1: loss 1.506 after 3520 examples",
    "batch 512, rate 0.8 (x8): loss 1.610 after 3072 examples",
    "global batch 512, rate 0.8: loss",
    # section 5: GPUs grouped on machines
    "hierarchical 8 machine(s) x 1 GPU(s): step  690.5 ms, machine 0's NIC sends   969 MB",
    "hierarchical 2 machine(s) x 4 GPU(s): step  572.3 ms, machine 0's NIC sends   553 MB",
    "not done yet: exercise choose_global_batch",
    "grouped_mpi: ✗ not done yet: exercise predict_grouped",
]


@pytest.mark.notebook
@pytest.mark.realtf
@pytest.mark.timeout(300)
def test_notebook_runs_top_to_bottom(monkeypatch):
    # four figures: section 1's speed-ups, section 3's measured and calibrated steps,
    # section 4's losses and section 5's steps
    text, images = run_notebook(ROOT / "notebooks" / "14_speedups.ipynb", monkeypatch,
                                cell_timeout=200)
    assert [line for line in NOTEBOOK_TEXT if line not in text] == []
    assert images >= 4, f"{images} figures drawn, 4 expected"
    # real TF: every fit trained; at 8 times the rate the batch of 512 is back with the
    # batch of 64 after 4 epochs, at the same rate it lags
    loss = {(int(b), float(r)): float(v) for b, r, v in re.findall(
        r"global batch +(\d+), rate ([\d.]+): loss ([\d.]+) after 4 epochs", text)}
    assert loss[512, 0.1] > loss[64, 0.1] + 0.5, loss
    assert abs(loss[512, 0.8] - loss[64, 0.1]) < 0.1, loss
