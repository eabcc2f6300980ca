"""Lessons 02 (MirroredStrategy and friends) and 03 (MultiWorkerMirroredStrategy, TF_CONFIG):
checks against the solutions, the stubs and wrong answers; notebooks fresh and runnable."""

import importlib.util
import re
from pathlib import Path

import pytest

from simdist import lessons, notebooks
from simdist.commands import check as check_command
from simdist.mpirun import run_mpi

from .conftest import ROOT, run_notebook

MWMS_MPI = str(Path("lessons") / "03_multi_worker" / "mwms_mpi.py")

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


def _results_of(lesson, source, tmp_path):
    """The checks of a lesson run against ``source``, a learner's exercises file."""
    mine = tmp_path / "mine.py"
    mine.write_text(source)
    return _results(lesson, file=mine)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("lesson, count", [("02", 9), ("03", 5)])
def test_every_check_passes_on_the_solution(lesson, count):
    results = _results(lesson, solution=True)
    assert len(results) == count
    failed = [f"{r.name}: {r.message} (hint: {r.hint})" for r in results.values()
              if not r.passed]
    assert not failed, "\n".join(failed)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("lesson, summary", [
    ("02", "0 of 9 checks pass (not done yet: predict_step_bytes, replica_step, split_batch)"),
    ("03", "0 of 5 checks pass (not done yet: is_chief, predict_step_ns, tf_configs)"),
])
def test_every_check_fails_on_the_stubs_as_not_done(lesson, summary, capsys):
    results = _results(lesson)
    assert not any(r.passed for r in results.values())
    assert all(r.not_done and r.hint for r in results.values())
    names = {r.message.removeprefix("not done yet: exercise ") for r in results.values()}
    assert names == set(re.search(r"not done yet: (.*)\)", summary).group(1).split(", "))
    assert check_command.main([lesson]) == 1
    assert capsys.readouterr().out.rstrip().endswith(summary)


@pytest.mark.timeout(60)
def test_lesson_02_wrong_split_and_wrong_bytes_get_hints(tmp_path):
    results = _results_of("02", WRONG_02, tmp_path)
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
    results = _results_of("02", LOCAL_MEAN_02, tmp_path)
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
    parity = _results_of("02", NAN_FOR_EMPTY_02, tmp_path)["step_parity"]
    assert not parity.passed
    assert "step 5 (global batch 1) reports loss nan" in parity.message
    assert "a replica with no examples" in parity.hint


# -- lesson 03: checks --------------------------------------------------------------------------

# the index as a string; the chief rule that forgets the chief job; the step without the loss
WRONG_03 = '''
import json, math
from simdist.collectives import formulas

def tf_configs(addresses):
    return [json.dumps({"cluster": {"worker": addresses},
                        "task": {"type": "worker", "index": i + 1}})
            for i in range(len(addresses))]

def is_chief(tf_config):
    task = json.loads(tf_config)["task"]
    return task["type"] == "worker" and task["index"] == 0

def predict_step_ns(workers, hw, model, global_batch):
    compute = hw.device.compute_time_ns(model.flops(math.ceil(global_batch / workers)))
    update = hw.device.compute_time_ns(2 * model.num_params, 3 * model.nbytes)
    if workers == 1:
        return compute + update
    a, b = hw.network.latency_ns, hw.network.bandwidth
    return compute + update + formulas.ring(workers, model.nbytes, a, b)
'''

# every worker puts its own address first and calls itself worker 0
SELF_FIRST_03 = '''
import json

def tf_configs(addresses):
    out = []
    for a in addresses:
        cluster = {"worker": [a] + [b for b in addresses if b != a]}
        out.append(json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    return out
'''


@pytest.mark.timeout(60)
def test_lesson_03_predictions_show_where_scaling_stops():
    results = _results("03", solution=True)
    # 10 GbE stops near 1.4x (a fourth worker is slower than three); 100 GbE reaches 2.8x
    assert "3: 1.42x, 4: 1.38x" in results["predict_10gbe"].message
    assert "4: 2.82x" in results["predict_100gbe"].message


@pytest.mark.timeout(60)
def test_lesson_03_wrong_answers_get_hints(tmp_path):
    results = _results_of("03", WRONG_03, tmp_path)
    assert not results["tf_config_parse"].passed
    assert "task index 3 out of range for job 'worker'" in results["tf_config_parse"].message
    train = results["tf_config_train"]
    assert not train.passed
    assert train.message.startswith("MultiWorkerMirroredStrategy refused a TF_CONFIG")
    chief = results["is_chief"]
    assert not chief.passed
    assert chief.message == ("task chief:0 of a cluster with chief x1, worker x2: you said "
                             "False, but it is the chief")
    for name in ("predict_10gbe", "predict_100gbe"):
        assert not results[name].passed
        assert "you left out the loss" in results[name].hint
    assert results["predict_10gbe"].message.startswith("2 worker(s) on 10 GbE")


@pytest.mark.timeout(60)
def test_lesson_03_a_cluster_that_differs_between_tasks_is_refused(tmp_path):
    results = _results_of("03", SELF_FIRST_03, tmp_path)
    parse = results["tf_config_parse"]
    assert not parse.passed and "worker 1's TF_CONFIG describes the cluster" in parse.message
    assert "the same on every task" in parse.hint
    train = results["tf_config_train"]
    assert not train.passed
    assert "does not match the cluster this task runs in" in train.message
    assert "but this is worker:1 of" in train.message


# -- lesson 03 under mpiexec --------------------------------------------------------------------

@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_mwms_mpi_passes_with_the_solution():
    proc = run_mpi(3, [MWMS_MPI, "--solution"], timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 workers (10.0.0.1:2222, 10.0.0.2:2222, 10.0.0.3:2222) over 3 MPI rank(s)" \
        in proc.stdout
    assert '"task": {"type": "worker", "index": 2}' in proc.stdout
    assert "✓ every worker created MultiWorkerMirroredStrategy from its TF_CONFIG" in proc.stdout


@pytest.mark.mpi
@pytest.mark.timeout(150)
@pytest.mark.parametrize("ranks, source, expected", [
    (3, None, "not done yet: exercise tf_configs"),  # the untouched stubs
    (2, SELF_FIRST_03, "MultiWorkerMirroredStrategy refused a TF_CONFIG"),
])
def test_mwms_mpi_fails_with_stubs_and_wrong_tf_configs(tmp_path, ranks, source, expected):
    args = [MWMS_MPI]
    if source is not None:
        (tmp_path / "mine.py").write_text(source)
        args += ["--file", str(tmp_path / "mine.py")]
    proc = run_mpi(ranks, args, timeout=120, cwd=ROOT)
    assert proc.returncode != 0
    assert expected in proc.stdout, proc.stdout + proc.stderr


# -- notebooks ----------------------------------------------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("lesson", ["02_mirrored", "03_multi_worker"])
def test_committed_notebook_is_not_stale(lesson):
    assert not notebooks.notebook_is_stale(ROOT / "lessons" / lesson), (
        f"notebooks/{lesson}.ipynb is out of date: run `simdist lesson build {lesson[:2]}`")


@pytest.mark.notebook
@pytest.mark.timeout(300)
def test_notebook_02_runs_top_to_bottom(monkeypatch):
    text, images = run_notebook(ROOT / "notebooks" / "02_mirrored.ipynb", monkeypatch)
    assert images >= 3  # two timelines and the step-time plot, drawn inline
    assert "global batch  6 over 4 replicas: [2, 2, 2, 0]" in text
    # four simulated replicas end with one device's weights (float32 rounding only)
    diff = float(re.search(r"largest weight difference: ([0-9.e+-]+)\n", text).group(1))
    assert diff < 1e-6
    assert "with NcclAllReduce" in text
    assert "not done yet: exercise split_batch" in text  # the stubs, checked in a cell
    if HAS_REALDIST:  # the real TF run, compared with the simulator
        assert "real TF reduced with: ReductionToOneDevice" in text
        assert "(weights agree: tolerance 1e-05)" in text


@pytest.mark.notebook
@pytest.mark.timeout(300)
def test_notebook_03_runs_top_to_bottom(monkeypatch):
    text, images = run_notebook(ROOT / "notebooks" / "03_multi_worker.ipynb", monkeypatch)
    assert images >= 3  # two timelines and the speed-up plot, drawn inline
    assert "worker:0: chief=True" in text and "worker:1: chief=False" in text
    diffs = [float(d) for d in re.findall(r"largest difference from one device ([0-9.e+-]+)",
                                          text)]
    assert len(diffs) == 3 and max(diffs) < 1e-6  # three simulated workers = one device
    assert "InvalidArgumentError: TF_CONFIG does not match the cluster" in text
    assert "combined by CollectiveAllReduce" in text
    assert "same losses as in one process: True | same step times: True" in text  # mpiexec
    assert "not done yet: exercise tf_configs" in text  # the stubs, checked in a cell
    if HAS_REALDIST:  # two real TF worker processes, compared with the simulator
        assert "real TF reduced with: CollectiveAllReduce" in text
        assert "(weights agree: tolerance 1e-05)" in text
