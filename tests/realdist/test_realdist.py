"""realdist on real TensorFlow, in-process strategies: runs, weight parity with simdist, TF's
split of a global batch, device set-up and bad input.

TF allows one logical-device set-up per process, so the real runs happen in ONE subprocess
(4 logical CPUs) that saves every RunResult; the tests read them. pytest's own process never
imports TensorFlow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from simdist.distribute.input_lib import split_global_batch
from simdist.training import simulate_exercise
from simdist.training.exercises import Exercise, RunResult, max_weight_difference
from tests.conftest import ROOT

from realdist.cli import main as realdist_main
from realdist.runtime.processes import kill_group

pytestmark = pytest.mark.realtf

PARITY_TOLERANCE = 1e-5

#: name -> exercise run on real TF (4 logical CPUs), each 20 steps
EXERCISES = {
    "default": Exercise(strategy="default"),
    "one_device": Exercise(strategy="one_device"),
    "mirrored": Exercise(strategy="mirrored", devices_per_worker=4),
    "central_storage": Exercise(strategy="central_storage", devices_per_worker=4),
    "mirrored_reduction_to_one": Exercise(strategy="mirrored",
                                          cross_device_ops="reduction_to_one"),
    "mirrored_hierarchical_copy": Exercise(strategy="mirrored",
                                           cross_device_ops="hierarchical_copy"),
    # partial global batches, cut by TF: digits' 1797 examples leave 97 for step 17, vocab's
    # 1024 leave 24 for step 10, and 1024 in batches of 60 leave 4 for step 17: [2, 2, 0]
    "mirrored_mlp_partial": Exercise(strategy="mirrored", model="mlp", dataset="digits",
                                     global_batch=100, devices_per_worker=4),
    "mirrored_embedding_partial": Exercise(strategy="mirrored", model="embedding",
                                           dataset="vocab", global_batch=100),
    "central_storage_softmax_3": Exercise(strategy="central_storage", model="softmax",
                                          dataset="classification", global_batch=60,
                                          devices_per_worker=3),
}

SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from simdist.training.exercises import Exercise
    from simdist.base.errors import SimdistError
    from realdist import run_exercise
    from realdist.runtime import devices

    out = Path(sys.argv[1]); jobs = json.loads(sys.argv[2]); report = {}
    report["devices"] = devices.configure_cpus(4)
    report["gpus"] = devices.gpus()
    for name, spec in jobs.items():
        run_exercise(Exercise.from_dict(spec), timeout=120).save(out / f"{name}.json")
    if len(report["gpus"]) >= 2:
        run_exercise(Exercise(strategy="mirrored", cross_device_ops="nccl",
                              devices_per_worker=2), timeout=120).save(out / "gpu_nccl.json")

    from realdist.distribute.split import received_ids
    from realdist.runtime.tfenv import tf
    strategy = tf.distribute.MirroredStrategy(report["devices"])
    report["split"] = {b: received_ids(strategy, 16, b) for b in (7, 6, 5)}

    def error_of(call):
        try:
            call()
        except SimdistError as error:
            return [type(error).__name__, str(error)]
    report["too_many_cpus"] = error_of(lambda: devices.configure_cpus(8))
    report["nccl_on_cpu"] = error_of(
        lambda: run_exercise(Exercise(strategy="mirrored", cross_device_ops="nccl")))
    report["timeout"] = error_of(lambda: run_exercise(Exercise(strategy="mirrored"), timeout=0))
    print("REPORT " + json.dumps(report))
""")


def run_python(args, timeout, env=None, cwd=ROOT):
    """Run ``python ARGS`` in its own process group; kill the group on timeout or error."""
    proc = subprocess.Popen([sys.executable, *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, **(env or {})})
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        kill_group(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """(results by name, report) of the real runs, made once for this module."""
    out = tmp_path_factory.mktemp("realdist")
    jobs = json.dumps({name: ex.to_dict() for name, ex in EXERCISES.items()})
    proc = run_python(["-c", SCRIPT, str(out), jobs], timeout=170)
    assert proc.returncode == 0, f"real runs failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    report = json.loads(proc.stdout.split("REPORT ", 1)[1])
    names = list(EXERCISES) + (["gpu_nccl"] if len(report["gpus"]) >= 2 else [])
    return {name: RunResult.load(out / f"{name}.json") for name in names}, report


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", list(EXERCISES))
def test_weights_match_the_simulator(real, name):
    results, _ = real
    sim, got = simulate_exercise(EXERCISES[name]), results[name]
    diff = max_weight_difference(sim, got)
    print(f"{name}: max weight difference simdist vs real TF after 20 steps = {diff:.3g}")
    assert diff <= PARITY_TOLERANCE
    np.testing.assert_allclose(got.losses, sim.losses, rtol=1e-5, atol=1e-6)
    assert got.source == "realdist" and got.exercise == EXERCISES[name]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", ["default", "one_device", "mirrored", "central_storage"])
def test_regression_loss_decreases(real, name):
    losses = real[0][name].losses
    assert len(losses) == 20
    assert losses[-1] < losses[0] / 100
    assert sum(b < a for a, b in zip(losses, losses[1:])) >= 15


@pytest.mark.timeout(180)
def test_metadata_names_the_real_strategy_and_reduction(real):
    results, _ = real
    meta = {name: r.metadata for name, r in results.items()}
    assert meta["mirrored"]["strategy_class"] == "MirroredStrategy"
    # TF 2.21 all-reduces between CPU devices with collective ring ops by default
    assert meta["mirrored"]["cross_device_ops"] == "CollectiveAllReduce (RING)"
    assert meta["mirrored_reduction_to_one"]["cross_device_ops"].startswith(
        "ReductionToOneDevice")
    assert meta["mirrored_hierarchical_copy"]["cross_device_ops"] == "HierarchicalCopyAllReduce"
    assert meta["central_storage"]["strategy_class"] == "CentralStorageStrategy"
    assert meta["central_storage"]["parameter_device"] == "/device:CPU:0"
    assert [d[-5:] for d in meta["mirrored"]["devices"]] == ["CPU:0", "CPU:1", "CPU:2",
                                                             "CPU:3"]
    assert len(meta["one_device"]["devices"]) == 1 and meta["one_device"]["tensorflow"]


@pytest.mark.timeout(180)
def test_trace_has_a_span_per_step_with_its_phases(real):
    result = real[0]["mirrored"]
    trace = result.trace
    steps = [s for s in trace.spans if s.lane == "steps"]
    assert [s.name for s in steps] == [f"step {k}" for k in range(20)]
    assert {s.pid for s in trace.spans} == {"worker:0"}
    for k, step in enumerate(steps):
        phases = [s for s in trace.spans if s.lane == "ops" and s.args["step"] == k]
        assert [p.name for p in phases] == ["input", "compute", "all-reduce + update"]
        assert sum(p.dur for p in phases) == step.dur == result.step_times_ns[k] > 0
        assert phases[0].start == step.start and phases[-1].end == step.end
    assert steps[0].start == 0 and all(a.end <= b.start for a, b in zip(steps, steps[1:]))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("batch", [7, 6, 5])
def test_tf_splits_a_global_batch_as_simdist_says(real, batch):
    steps = real[1]["split"][str(batch)]
    ids = list(range(16))
    expected = []
    for start in range(0, 16, batch):
        chunk, replicas = ids[start:start + batch], []
        for size in split_global_batch(len(chunk), 4):
            replicas.append(chunk[:size])
            chunk = chunk[size:]
        expected.append(replicas)
    assert steps == expected  # 7: [2, 2, 2, 1]; last batch of 2: [1, 1, 0, 0]


@pytest.mark.timeout(180)
def test_device_and_option_errors_are_clear(real):
    report = real[1]
    assert report["too_many_cpus"][0] == "FailedPreconditionError"
    assert "needs 8 logical CPU devices" in report["too_many_cpus"][1]
    assert "already started in this process with 4" in report["too_many_cpus"][1]
    if not report["gpus"]:
        assert report["nccl_on_cpu"][0] == "UnimplementedError"
        assert "needs GPUs" in report["nccl_on_cpu"][1]
        assert "--cross-device-ops auto, reduction_to_one" in report["nccl_on_cpu"][1]
    assert report["timeout"] == ["DeadlineExceededError",
                                 "the run passed its timeout after 0 of 20 steps"]


@pytest.mark.timeout(180)
def test_gpu_parity_with_nccl(real):
    if len(real[1]["gpus"]) < 2:
        pytest.skip("NCCL parity needs 2 GPUs visible to TensorFlow; this machine has "
                    f"{len(real[1]['gpus'])} (tensorflow-cpu): run it where GPUs are present")
    result = real[0]["gpu_nccl"]
    assert result.metadata["cross_device_ops"].startswith("NcclAllReduce")
    assert max_weight_difference(simulate_exercise(result.exercise), result) <= PARITY_TOLERANCE


def test_tpu_parity_is_skipped_without_a_tpu():
    if not os.environ.get("TPU_NAME") and not any(n.startswith("accel")
                                                  for n in os.listdir("/dev")):
        pytest.skip("no TPU reachable (no TPU_NAME, no /dev/accel*): TPU runs are "
                    "simulator-only here")
    pytest.fail("a TPU is attached, but realdist has no TPUStrategy runner yet")


def test_realdist_run_tpu_says_no_tpu_is_reachable(capsys):
    from realdist.runtime.devices import tpu_status

    if tpu_status()[0] is not None:
        pytest.skip(f"a TPU is reachable ({tpu_status()[1]}): realdist's TPU runner then "
                    "says it has no TPUStrategy loop yet")
    assert realdist_main(["run", "tpu", "--steps", "1"]) != 0
    err = capsys.readouterr().err
    assert "realdist run tpu: TPU: none reachable here" in err and "simdist run tpu" in err


@pytest.mark.parametrize("argv, expected", [
    (["run", "foo"], "realdist: error: unknown strategy 'foo': expected one of default,"),
    (["run", "mirrored", "--replicas", "4", "--global-batch", "3"],
     "realdist: error: global batch 3 is smaller than the 4 replicas of mirrored"),
    (["run", "one_device", "--model", "softmax"],
     "realdist: error: model 'softmax' is a classification model but dataset 'regression'"),
    (["run", "mirrored", "--steps", "0"], "realdist: error: steps must be an int >= 1, got 0"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, expected):
    assert realdist_main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(expected) and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err and captured.out == ""


@pytest.mark.timeout(60)
def test_realdist_devices():
    proc = run_python(["-m", "realdist", "devices"], timeout=50)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("TensorFlow 2.")
    assert lines[1].startswith("CPU: 1 physical") and lines[2].startswith("GPU: ")
    assert lines[3].startswith("TPU: none reachable") and "simulator-only" in lines[3]
    assert proc.stderr == ""  # TF's start-up chatter is kept out of the output


@pytest.mark.timeout(60)
def test_realdist_split_prints_what_each_replica_received():
    proc = run_python(["-m", "realdist", "split", "mirrored", "--replicas", "4",
                       "--global-batch", "7", "--examples", "9"], timeout=50)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "TF's split of global batches of 7 over 4 replicas "
        "(simdist.distribute.input_lib.split_global_batch: [2, 2, 2, 1])",
        "step 0: worker:0 replica 0: [0, 1]; worker:0 replica 1: [2, 3]; "
        "worker:0 replica 2: [4, 5]; worker:0 replica 3: [6]",
        "step 1: worker:0 replica 0: [7]; worker:0 replica 1: [8]; worker:0 replica 2: []; "
        "worker:0 replica 3: []"]
    assert realdist_main(["split", "mirrored", "--global-batch", "0"]) == 2
