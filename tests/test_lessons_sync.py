"""Lessons 02 (MirroredStrategy and friends) and 03 (MultiWorkerMirroredStrategy, TF_CONFIG):
checks against the solutions, the stubs and wrong answers; notebooks fresh and runnable."""

import importlib.util
import os
import re

import pytest

from simdist import lessons

from .conftest import ROOT

LESSON_02 = ROOT / "lessons" / "02_mirrored"

HAS_REALDIST = (importlib.util.find_spec("tensorflow") is not None
                and (ROOT / "realdist" / "cli.py").is_file())

# -- lesson 02: checks --------------------------------------------------------------------------

# the two classic mistakes: np.array_split's split, and a loss scaled by the replica's own batch
WRONG_02 = '''
import numpy as np

def split_batch(x, y, n):
    return list(zip(np.array_split(x, n), np.array_split(y, n)))

def replica_step(model, weights, x, y, global_batch_size):
    per = model.per_example_loss(weights, x, y)
    return np.float32(per.mean()), model.gradients(weights, x, y, 1.0 / len(x))

def predict_step_bytes(strategy, replicas, nbytes):
    return 2 * (replicas - 1) * nbytes, 2 * (replicas - 1) * nbytes / replicas
'''

# TF's split, but the mean over the replica's own examples; and empty replicas give NaN
LOCAL_MEAN_02 = '''
import math
import numpy as np

def split_batch(x, y, n):
    k = math.ceil(len(x) / n)
    return [(x[r * k:(r + 1) * k], y[r * k:(r + 1) * k]) for r in range(n)]

def replica_step(model, weights, x, y, global_batch_size):
    per = model.per_example_loss(weights, x, y)
    if len(x) == 0:
        return np.float32(0), model.gradients(weights, x, y, 0.0)
    return np.float32(per.mean()), model.gradients(weights, x, y, 1.0 / len(x))

def predict_step_bytes(strategy, replicas, nbytes):
    raise NotImplementedError("exercise predict_step_bytes: not yet")
'''

NAN_FOR_EMPTY_02 = LOCAL_MEAN_02.replace(
    '''    if len(x) == 0:
        return np.float32(0), model.gradients(weights, x, y, 0.0)
    return np.float32(per.mean()), model.gradients(weights, x, y, 1.0 / len(x))''',
    '''    loss = np.float32(np.mean(per) * len(x) / global_batch_size)
    return loss, model.gradients(weights, x, y, 1.0 / global_batch_size)''')


def _results(lesson, **kwargs):
    return {r.name: r for r in lessons.run_checks(lesson, **kwargs)}


@pytest.mark.timeout(60)
def test_lesson_02_checks_pass_on_the_solution():
    results = _results("02", solution=True)
    assert len(results) == 9
    failed = [f"{r.name}: {r.message} (hint: {r.hint})" for r in results.values()
              if not r.passed]
    assert not failed, "\n".join(failed)


@pytest.mark.timeout(60)
def test_lesson_02_checks_fail_on_the_stubs_as_not_done(capsys):
    results = _results("02")
    assert not any(r.passed for r in results.values())
    assert all(r.not_done and r.hint for r in results.values())
    assert {r.message for r in results.values()} == {
        "not done yet: exercise split_batch", "not done yet: exercise replica_step",
        "not done yet: exercise predict_step_bytes"}
    assert lessons.check_main(["02"]) == 1
    assert capsys.readouterr().out.rstrip().endswith(
        "0 of 9 checks pass (not done yet: predict_step_bytes, replica_step, split_batch)")


@pytest.mark.timeout(60)
def test_lesson_02_wrong_split_and_wrong_bytes_get_hints(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(WRONG_02)
    results = _results("02", file=mine)
    split = results["split"]
    assert not split.passed
    assert split.message == ("split_batch(x, y, 4) with a global batch of 6: replica batch "
                             "sizes [2, 2, 1, 1], but TensorFlow gives [2, 2, 2, 0]")
    assert "np.array_split's rule" in split.hint
    # the training check needs a right split first, and says so
    assert not results["step_parity"].passed
    assert "your split_batch, which is not right yet" in results["step_parity"].message
    # the ring's bytes are right for NCCL, wrong for reduce-to-one's root and the host
    assert results["bytes_3"].passed and results["bytes_4"].passed
    assert not results["bytes_2"].passed and "(busiest off)" in results["bytes_2"].message
    assert "3.0 MiB from the busiest sender" in results["bytes_2"].message
    assert not results["bytes_6"].passed
    assert "(total and busiest off)" in results["bytes_6"].message


@pytest.mark.timeout(60)
def test_lesson_02_loss_scaled_by_the_local_batch_fails_with_a_hint(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(LOCAL_MEAN_02)
    results = _results("02", file=mine)
    assert results["split"].passed
    # one replica holding the whole batch cannot tell the difference ...
    assert results["step_one_replica"].passed
    # ... two replicas can: twice the loss, wrong weights, and a hint that names the cause
    parity = results["step_parity"]
    assert not parity.passed
    assert parity.message.startswith("MirroredStrategy, 2 replicas: step 0 (global batch 8) "
                                     "reports loss")
    assert "weights differ from the default strategy's" in parity.message
    assert "instead of 1 / the global batch (12)" in parity.hint
    assert "scale = 1 / global_batch_size" in parity.hint


@pytest.mark.timeout(60)
def test_lesson_02_nan_on_an_empty_replica_fails_with_a_hint(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(NAN_FOR_EMPTY_02)
    parity = _results("02", file=mine)["step_parity"]
    assert not parity.passed
    assert "step 5 (global batch 1) reports loss nan" in parity.message
    assert "a replica with no examples" in parity.hint


# -- notebooks ----------------------------------------------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("lesson", ["02_mirrored"])
def test_committed_notebook_is_not_stale(lesson):
    assert not lessons.notebook_is_stale(ROOT / "lessons" / lesson), (
        f"notebooks/{lesson}.ipynb is out of date: run `simdist lesson build {lesson[:2]}`")


def run_notebook(name, monkeypatch, cell_timeout=240):
    """Execute notebooks/NAME.ipynb headless; (text of every output, number of images)."""
    import nbclient
    import nbformat

    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)  # the kernel imports simdist from this checkout
    notebook = ROOT / "notebooks" / f"{name}.ipynb"
    nb = nbformat.read(notebook, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=cell_timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(notebook.parent)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [f"{o.ename}: {o.evalue}" for o in outputs if o.output_type == "error"]
    assert not errors, errors
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                   for o in outputs)
    images = sum("image/png" in o.get("data", {}) for o in outputs)
    return text, images


@pytest.mark.timeout(300)
def test_notebook_02_runs_top_to_bottom(monkeypatch):
    text, images = run_notebook("02_mirrored", monkeypatch)
    assert images >= 3  # two timelines and the step-time plot, drawn inline
    assert "global batch  6 over 4 replicas: [2, 2, 2, 0]" in text
    # four simulated replicas end with one device's weights (float32 rounding only)
    diff = float(re.search(r"largest weight difference: ([0-9.e+-]+)\n", text).group(1))
    assert diff < 1e-6
    assert "with NcclAllReduce(num_packs=1)" in text
    assert "not done yet: exercise split_batch" in text  # the stubs, checked in a cell
    if HAS_REALDIST:  # the real TF run, compared with the simulator
        assert "real TF reduced with: ReductionToOneDevice" in text
        assert "(weights agree: tolerance 1e-05)" in text
