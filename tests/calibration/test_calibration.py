"""Calibration (issue 15): the host-side cost fields of a device profile, the fit of a
profile to measured step times (``simdist.calibration.fit``), a user's CSV table
(``simdist calibrate --from-csv``), and ``simdist calibrate`` / ``simdist bench predict`` on
real TF (realtf)."""

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from simdist.calibration.fit import (NAMES, RECORD_FIELDS, SYSTEM, Measurement, catalog_for, fit,
                                     predict, profile_document, simulated_step_ns)
from simdist.calibration.table import read_table
from simdist.commands.cli import main as simdist_main
from simdist.hardware.devices import DeviceProfile, HardwareCatalog, ProfileFileError
from simdist.hardware.host_costs import HOST_COST_NAMES, HostCosts, HostStep
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise

#: each fit simulates its table's exercises a few hundred times (13 s alone on the 2-core
#: machine, several times that beside a loaded suite): more than the default 120 s of slack
pytestmark = pytest.mark.timeout(300)

#: a made-up machine: what the fit must find again from step times simulated with it
TRUE = {"step_overhead_ns": 800_000.0, "replica_overhead_ns": 150_000.0,
        "input_pipeline_overhead_ns": 200_000.0, "distributed_step_overhead_ns": 1_000_000.0,
        "input_kb_ns": 800.0, "packed_tensor_overhead_ns": 40_000.0, "op_overhead_ns": 10_000.0,
        "collective_overhead_ns": 300_000.0, "flop_time": 8_000.0, "intra_latency": 50_000.0,
        "intra_byte_time": 40.0, "network_latency": 3_000_000.0, "network_byte_time": 500.0,
        "multi_worker_step_overhead_ns": 600_000.0, "shared_op_overhead_ns": 150_000.0}


def ex(strategy="mirrored", replicas=1, model="linear", batch=64, workers=1, hidden=32):
    return Exercise(strategy=strategy, model=model,
                    dataset="regression" if model == "linear" else "digits", hidden=hidden,
                    global_batch=batch, steps=3, workers=workers, devices_per_worker=replicas)


def plan():
    """Every kind of cost, each with two sizes: enough exercises to pin the parameters."""
    sizes = [("default", 1), ("one_device", 1), ("mirrored", 1), ("mirrored", 2),
             ("mirrored", 4), ("central_storage", 2), ("central_storage", 4),
             ("multi_worker_mirrored", 2), ("multi_worker_mirrored", 3)]
    out = []
    for strategy, n in sizes:
        multi = strategy == "multi_worker_mirrored"
        for model, batch, hidden in (("linear", 64, 32), ("mlp", 1024, 128)):
            out.append(ex(strategy, 1 if multi else n, model, batch, n if multi else 1, hidden))
    # digits with few FLOPs: else the input's bytes and the MLP's FLOPs grow together
    return out + [ex("default", model="softmax", batch=1024)]


# -- the profile's new fields -----------------------------------------------------------------

def test_host_costs_default_to_zero_so_the_built_in_profiles_are_unchanged():
    from simdist.hardware.host_costs import SCHEDULE_OVERHEAD_NS

    cpu = HardwareCatalog.default().device("cpu-core")
    assert cpu.host_costs == HostCosts() and not cpu.virtual
    assert all(getattr(cpu.host_costs, name) == 0 for name in HOST_COST_NAMES
               if name != "schedule_overhead_ns")
    # the coordinator's cost per function: 100 us, as before it was a profile's cost
    assert cpu.host_costs.schedule_overhead_ns == SCHEDULE_OVERHEAD_NS == 100_000
    assert cpu.compute_time_ns(0, ops=50) == cpu.launch_overhead_ns
    assert cpu.host_costs.step_ns(HostStep(4)) == 0


def test_op_step_and_replica_overheads_add_up():
    dev = DeviceProfile("d", "CPU", peak_flops=1e12, mem_bandwidth=10**9, memory=2**30,
                        launch_overhead_ns=100, efficiency=1.0, host_costs=HostCosts(
                            op_overhead_ns=7, step_overhead_ns=1000, replica_overhead_ns=30))
    assert dev.compute_time_ns(1e6, ops=10) == 1000 + 100 + 70
    assert dev.host_costs.step_ns(HostStep(3)) == 1090
    with pytest.raises(InvalidArgumentError, match="ops must be >= 0, got -1"):
        dev.compute_time_ns(1.0, ops=-1)
    with pytest.raises(InvalidArgumentError, match="step_overhead_ns must be >= 0, got -1"):
        HostCosts(step_overhead_ns=-1)
    with pytest.raises(InvalidArgumentError, match="replicas must be >= 0, got -1"):
        HostStep(-1)
    with pytest.raises(InvalidArgumentError, match="virtual must be true or false, got 'yes'"):
        dataclasses.replace(dev, virtual="yes")


def test_input_bytes_the_dataset_wrapper_and_the_mirrored_machinery_cost_host_time():
    dev = DeviceProfile("d", "CPU", peak_flops=1e12, mem_bandwidth=10**9, memory=2**30,
                        launch_overhead_ns=0, host_costs=HostCosts(
                            step_overhead_ns=100, input_kb_ns=3_000,
                            input_pipeline_overhead_ns=700, distributed_step_overhead_ns=5_000))
    wrapped, mirrored = (("input_pipeline_overhead_ns",),
                         ("input_pipeline_overhead_ns", "distributed_step_overhead_ns"))
    costs = dev.host_costs
    assert costs.step_ns(HostStep(1, input_bytes=64)) == 100 + 192
    assert costs.step_ns(HostStep(1, input_bytes=1)) == 100 + 3  # rounded up to whole ns
    assert costs.step_ns(HostStep(1, 64, wrapped)) == 100 + 192 + 700
    assert costs.step_ns(HostStep(2, 64, mirrored)) == 100 + 192 + 700 + 5_000
    with pytest.raises(InvalidArgumentError, match="unknown host cost 'wrapped': expected one "
                                                   "of step_overhead_ns, replica_overhead_ns"):
        HostStep(1, 64, ("wrapped",))


def test_a_steps_input_costs_its_bytes_features_and_labels():
    """64 float32 pixels and an int32 label are 260 bytes an example; 8 float32 features
    and a float32 target are 36: with only the input's time per KB set, a step of 128
    digits costs 260/36 times a step of 128 regression rows."""
    free = {n: 0.0 for n in NAMES}
    catalogs = catalog_for(free), catalog_for({**free, "input_kb_ns": 1_000.0})  # 1 ns/B
    rows, digits = ([simulated_step_ns(ex("default", model=model, batch=128), c)
                     for c in catalogs] for model in ("linear", "softmax"))
    assert rows[1] - rows[0] == 128 * 36
    assert digits[1] - digits[0] == 128 * 260


def test_only_the_default_strategy_hands_the_dataset_back_unwrapped():
    """OneDeviceStrategy prefetches to its device and the others distribute the dataset:
    each pays the wrapper's work per step; the default strategy does not."""
    wrapper = {**{n: 0.0 for n in NAMES}, "input_pipeline_overhead_ns": 50_000.0}
    catalog = catalog_for(wrapper)
    steps = {s: simulated_step_ns(ex(s), catalog)
             for s in ("default", "one_device", "central_storage", "mirrored")}
    assert steps["one_device"] - steps["default"] == pytest.approx(50_000, abs=100)
    assert steps["central_storage"] == steps["one_device"] == steps["mirrored"]


def test_mirrored_strategies_start_collectives_even_with_one_replica():
    """TF's MirroredStrategy and MultiWorkerMirroredStrategy run CollectiveReduceV2 with a
    group of one; the default and OneDevice strategies reduce nothing. Two reductions per
    step (the gradients and the loss) each pay the start."""
    launch = {**{n: 0.0 for n in NAMES}, "collective_overhead_ns": 100_000.0}
    catalog = catalog_for(launch)
    alone = {s: simulated_step_ns(ex(s), catalog)
             for s in ("one_device", "default", "mirrored", "multi_worker_mirrored")}
    assert alone["one_device"] == alone["default"]
    assert alone["mirrored"] - alone["one_device"] == pytest.approx(200_000, abs=1_000)
    assert alone["multi_worker_mirrored"] == pytest.approx(alone["mirrored"], abs=1_000)


def test_only_the_mirrored_strategies_pay_the_mirrored_machinerys_step():
    """Each strategy names the host costs its steps pay (``Strategy.step_costs``); the
    runtime prices them: ``distributed_step_overhead_ns`` once a step on MirroredStrategy
    and MultiWorkerMirroredStrategy, whatever their replicas, and on no other strategy."""
    free = {n: 0.0 for n in NAMES}
    catalogs = catalog_for(free), catalog_for({**free, "distributed_step_overhead_ns": 70_000.0})
    extra = {(s, r): simulated_step_ns(ex(s, r), catalogs[1]) - simulated_step_ns(ex(s, r),
                                                                                 catalogs[0])
             for s, r in (("default", 1), ("one_device", 1), ("central_storage", 2),
                          ("mirrored", 1), ("mirrored", 2), ("multi_worker_mirrored", 1))}
    assert extra == {("default", 1): 0, ("one_device", 1): 0, ("central_storage", 2): 0,
                     ("mirrored", 1): 70_000, ("mirrored", 2): 70_000,
                     ("multi_worker_mirrored", 1): 70_000}


def test_multi_worker_mirrored_costs_its_own_step_overhead_even_alone():
    """MultiWorkerMirroredStrategy with one worker pays ``multi_worker_step_overhead_ns`` a
    step on top of what MirroredStrategy with one device pays; MirroredStrategy does not."""
    free = {n: 0.0 for n in NAMES}
    catalogs = (catalog_for(free),
                catalog_for({**free, "multi_worker_step_overhead_ns": 250_000.0}))
    alone = {s: [simulated_step_ns(ex(s), c) for c in catalogs]
             for s in ("mirrored", "multi_worker_mirrored")}
    assert alone["mirrored"][1] == alone["mirrored"][0]
    assert alone["multi_worker_mirrored"][1] - alone["multi_worker_mirrored"][0] == 250_000


def test_an_op_costs_more_the_more_worker_processes_share_the_cores():
    """With only ``shared_op_overhead_ns`` set, a step costs it once per TF op (the replica's
    pass and one update op per variable) for each worker but the first: nothing on one
    worker, its double on three workers what it is on two; the MLP pays for its 39 + 4
    ops, softmax for 27 + 2."""
    dev = DeviceProfile("d", "CPU", peak_flops=1e12, mem_bandwidth=10**9, memory=2**30,
                        launch_overhead_ns=0,
                        host_costs=HostCosts(op_overhead_ns=7, shared_op_overhead_ns=5))
    assert dev.compute_time_ns(0, ops=10) == 70
    assert dev.compute_time_ns(0, ops=10, tasks=3) == 70 + 2 * 10 * 5
    with pytest.raises(InvalidArgumentError, match="tasks must be >= 1, got 0"):
        dev.compute_time_ns(0, ops=10, tasks=0)
    free = {n: 0.0 for n in NAMES}
    catalogs = catalog_for(free), catalog_for({**free, "shared_op_overhead_ns": 10_000.0})
    extra = {(model, w): simulated_step_ns(ex("multi_worker_mirrored", model=model,
                                              workers=w), catalogs[1])
             - simulated_step_ns(ex("multi_worker_mirrored", model=model, workers=w),
                                 catalogs[0])
             for model in ("softmax", "mlp") for w in (1, 2, 3)}
    assert [extra["mlp", w] for w in (1, 2, 3)] == [0, 430_000, 860_000]
    assert [extra["softmax", w] for w in (1, 2, 3)] == [0, 290_000, 580_000]


def test_packing_costs_per_tensor_in_the_mirrored_strategies_only():
    """An MLP's four gradient tensors cost two more packing steps than softmax's two (its
    weights and biases), on MirroredStrategy and not on OneDeviceStrategy, which reduces
    nothing."""
    free = {n: 0.0 for n in NAMES}
    catalogs = catalog_for(free), catalog_for({**free, "packed_tensor_overhead_ns": 100_000.0})
    extra = {s: [simulated_step_ns(ex(s, model="mlp"), c)
                 - simulated_step_ns(ex(s, model="softmax"), c) for c in catalogs]
             for s in ("mirrored", "one_device")}
    assert extra["mirrored"][1] - extra["mirrored"][0] == 200_000
    assert extra["one_device"][1] == extra["one_device"][0]


def test_virtual_devices_run_their_replicas_one_after_another():
    """Two logical CPUs of one machine do not compute twice as fast as one: with only the
    FLOP time set, two replicas' step costs what one replica's pass over both halves does."""
    only_flops = {**{n: 0.0 for n in NAMES}, "flop_time": 10_000.0}
    catalog = catalog_for(only_flops)
    one, two = (simulated_step_ns(ex(replicas=r, model="mlp", batch=1024, hidden=256), catalog)
                for r in (1, 2))
    assert two == pytest.approx(one, rel=0.02)
    physical = dataclasses.replace(catalog.devices[f"{SYSTEM}-cpu"], virtual=False)
    catalog.devices[physical.name] = physical
    two_physical = simulated_step_ns(ex(replicas=2, model="mlp", batch=1024, hidden=256),
                                     catalog)
    assert two_physical == pytest.approx(one / 2, rel=0.05)


def test_a_profiles_file_takes_the_new_fields_and_refuses_bad_ones(tmp_path):
    good = tmp_path / "p.json"
    good.write_text(json.dumps({"devices": {"cpu-core": {
        "op_overhead_ns": "20 us", "virtual": True, "collective_overhead_ns": 5}},
        "calibration": {"note": "kept, not read"}}))
    cpu = HardwareCatalog.from_file(good).device("cpu-core")
    assert cpu.host_costs == HostCosts(op_overhead_ns=20_000, collective_overhead_ns=5)
    assert cpu.virtual
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"devices": {"cpu-core": {"virtual": "sometimes"}}}))
    with pytest.raises(ProfileFileError, match="field 'virtual': expected true or false, got "
                                               "'sometimes'"):
        HardwareCatalog.from_file(bad)


# -- the fit ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def synthetic():
    """Step times simulated with TRUE, and the fit of them from the default start."""
    exercises = plan()
    truth = predict(TRUE, exercises)
    return exercises, truth, fit([Measurement(e, t) for e, t in zip(exercises, truth)])


def test_the_fit_finds_the_step_times_it_was_given(synthetic):
    _, truth, result = synthetic
    assert max(abs(e) for e in result.errors) < 0.01
    assert result.simulated_ns == pytest.approx(truth, rel=0.01)


def test_the_fit_finds_the_parameters_that_set_most_of_the_time(synthetic):
    _, _, result = synthetic
    for name in ("step_overhead_ns", "distributed_step_overhead_ns", "network_latency",
                 "multi_worker_step_overhead_ns", "shared_op_overhead_ns"):
        assert result.parameters[name] == pytest.approx(TRUE[name], rel=0.05), name


def test_the_fitted_profile_predicts_exercises_it_never_saw(synthetic):
    _, _, result = synthetic
    unseen = [ex("mirrored", 4, model="softmax", batch=1024),
              ex("multi_worker_mirrored", workers=4, model="mlp", batch=64, hidden=64)]
    assert predict(result.parameters, unseen) == pytest.approx(predict(TRUE, unseen), rel=0.02)


def test_the_profile_document_round_trips_through_a_profiles_file(synthetic, tmp_path):
    _, _, result = synthetic
    path = tmp_path / "calibrated.json"
    document = profile_document(result, machine="test")
    path.write_text(json.dumps(document))
    catalog = HardwareCatalog.from_file(path)
    exercise = ex(replicas=2, model="mlp", batch=512, hidden=128)
    assert simulated_step_ns(exercise, catalog) == simulated_step_ns(exercise, result.catalog)
    recorded = document["calibration"]["parameters"]
    assert {n: recorded[n]["value"] for n in NAMES} == pytest.approx(
        {n: round(v, 3) for n, v in result.parameters.items()})
    assert simdist_main(["run", "mirrored", "--replicas", "2", "--steps", "3", "--profiles-file",
                         str(path), "--profile", SYSTEM, "--quiet"]) == 0


def test_bad_measurements_are_refused():
    with pytest.raises(InvalidArgumentError, match="at least one measured exercise"):
        fit([])
    with pytest.raises(InvalidArgumentError, match="must be a number > 0, got nan"):
        fit([Measurement(ex(), float("nan"))])
    with pytest.raises(InvalidArgumentError, match="finite numbers >= 0: flop_time=-1.0"):
        catalog_for({**TRUE, "flop_time": -1.0})


# -- a user's table ---------------------------------------------------------------------------

def write_table(path, rows, header):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_a_table_of_epoch_times_becomes_step_times(tmp_path):
    path = write_table(tmp_path / "t.csv", [["mirrored", 2, "mlp", 100, 1000, 0.5, "check"],
                                            ["one_device", 1, "linear", 64, 640, "", ""]],
                       ["strategy", "devices", "model", "global_batch", "examples", "epoch_s",
                        "split"])
    first, second = read_table(path)
    assert first.steps == 10 and first.step_ns == pytest.approx(0.05e9)
    assert (first.split, first.exercise.devices_per_worker, first.exercise.dataset) == (
        "check", 2, "digits")
    assert second.step_ns is None and second.split == "fit" and second.line == 3


@pytest.mark.parametrize("header, row, message", [
    (["model", "step_ms", "colour"], ["mlp", 1, "red"], "unknown column(s) 'colour'"),
    (["model"], ["mlp"], "needs a model column and exactly one time column"),
    (["model", "epoch_s"], ["mlp", 1], "epoch_s needs an examples column"),
    (["model", "step_ms"], ["resnet", 1], "line 2: unknown model 'resnet'"),
    (["model", "step_ms", "global_batch"], ["mlp", 1, "lots"],
     "line 2: global_batch 'lots': expected a whole number"),
    (["model", "step_ms"], ["mlp", "-3"], "line 2: step_ms '-3': expected a time > 0"),
    (["model", "step_ms", "split"], ["mlp", 1, "train"], "split 'train': expected fit or check"),
])
def test_bad_tables_are_refused_naming_the_line_and_value(tmp_path, header, row, message):
    path = write_table(tmp_path / "t.csv", [row], header)
    with pytest.raises(InvalidArgumentError) as error:
        read_table(path)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_calibrate_from_csv_predicts_the_rows_it_left_out(tmp_path, capsys):
    # a softmax row tells the input's bytes (digits, the mlp's too) from the mlp's FLOPs
    exercises = plan()[:14] + [ex("one_device", model="softmax", batch=1024)]
    check = [ex("mirrored", 4, model="softmax", batch=512), ex("central_storage", 4)]
    times = predict(TRUE, exercises + check)
    rows = [[e.strategy, e.workers, e.devices_per_worker, e.model, e.hidden, e.global_batch,
             t / 1e6, "fit" if i < len(exercises) else "check"]
            for i, (e, t) in enumerate(zip(exercises + check, times))]
    rows.append(["mirrored", 1, 4, "mlp", 32, 64, "", ""])  # no time: predicted only
    table = write_table(tmp_path / "mine.csv", rows,
                        ["strategy", "workers", "replicas", "model", "hidden", "global_batch",
                         "step_ms", "split"])
    out = tmp_path / "fitted.yaml"
    assert simdist_main(["calibrate", "--from-csv", str(table), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    predicted = text[text.index("predicted (rows marked check"):]
    assert "line 17: mirrored x4 softmax batch 512" in predicted
    assert "line 19: mirrored x4 mlp(32) batch 64" in predicted
    errors = [float(line.split()[-1].rstrip("%")) for line in predicted.splitlines()
              if line.startswith("line ") and line.endswith("%")]
    assert len(errors) == 2 and max(abs(e) for e in errors) < 2.0
    assert SYSTEM in HardwareCatalog.from_file(out).systems


def test_calibrate_and_predict_refuse_bad_input_in_one_line(tmp_path, capsys):
    assert simdist_main(["calibrate", "--from-csv", str(tmp_path / "none.csv")]) == 2
    assert "table file" in capsys.readouterr().err
    assert simdist_main(["calibrate", "-o", str(tmp_path / "p.txt")]) == 2
    assert "expected a .json, .yaml or .yml file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        simdist_main(["calibrate", "--steps", "2"])
    assert "expected a whole number >= 8 (the first 5 of each run are left out)" in \
        capsys.readouterr().err
    assert simdist_main(["bench", "predict", "--profiles-file", str(tmp_path / "x.json")]) == 2
    assert "run 'simdist calibrate' first" in capsys.readouterr().err
    (tmp_path / "x.json").write_text("{}")
    assert simdist_main(["bench", "predict", "--profiles-file", str(tmp_path / "x.json")]) == 2
    assert "has no 'calibrated' system" in capsys.readouterr().err


# -- bench predict ----------------------------------------------------------------------------

def test_each_pass_through_a_plan_has_its_own_order():
    from simdist.calibration.protocol import pass_order

    orders = [pass_order(20, p) for p in range(4)]
    assert orders[0] == list(range(20))
    assert all(sorted(o) == list(range(20)) for o in orders)
    assert len({tuple(o) for o in orders}) == 4 and orders[2] == pass_order(20, 2)


def test_predict_checks_exercises_calibrate_never_measured_within_its_batches():
    """The validation is a prediction: no exercise of bench predict's matrix is one calibrate
    fits, and calibrate's batches bracket the matrix's (a step's time is not a line in the
    batch, so predict must not extrapolate)."""
    from simdist.commands.bench.predict import matrix
    from simdist.calibration.plan import calibration_plan

    def key(e):
        return tuple(getattr(e, k) for k in (*RECORD_FIELDS, "steps_per_execution"))

    for quick in (False, True):
        plan, checked = calibration_plan(100, quick), matrix(100, quick)
        assert not {key(e) for e in plan} & {key(e) for e in checked}
    plan, checked = calibration_plan(100), matrix(100)
    assert len(checked) == 48 and {(e.strategy, e.num_workers, e.devices_per_worker)
                                   for e in checked} == {(e.strategy, e.num_workers,
                                                          e.devices_per_worker) for e in plan}
    # ParameterServerStrategy: 1 and 2 workers with a ps, calibrated at 1 and 4 steps per
    # function (the coordinator's cost per function told from a step's), predicted at 2
    ps = sorted((e.num_workers, e.ps, e.steps_per_execution) for e in plan
                if e.strategy == "parameter_server")
    assert ps == [(1, 1, 1), (1, 1, 4), (2, 1, 1), (2, 1, 4)]
    assert sorted((e.num_workers, e.model, e.steps_per_execution) for e in checked
                  if e.strategy == "parameter_server") == [
        (1, "mlp", 2), (1, "softmax", 2), (2, "mlp", 2), (2, "softmax", 2)]
    batches = [e.global_batch for e in plan]
    assert min(batches) <= min(e.global_batch for e in checked)
    assert max(batches) >= max(e.global_batch for e in checked)


def test_predict_measures_the_calibrations_softmax_exercises_again(tmp_path):
    """bench predict's anchors: the profile record's softmax-at-64 exercises with the time
    calibrate measured, and the machine's drift as the median ratio of now to then."""
    from simdist.commands.bench.predict import anchors, drift

    def row(strategy, model, batch, ns):
        return {"exercise": {"strategy": strategy, "workers": 1, "devices_per_worker": 2,
                             "model": model, "dataset": "digits", "hidden": 32,
                             "global_batch": batch}, "measured_ns": ns}

    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"calibration": {"exercises": [
        row("mirrored", "softmax", 64, 2_000_000), row("mirrored", "mlp", 64, 3_000_000),
        row("central_storage", "softmax", 64, 1_500_000),
        row("central_storage", "softmax", 1024, 2_500_000)]}}))
    found = anchors(profile, 50)
    assert [(e.strategy, e.devices_per_worker, e.steps, ns) for e, ns in found] == [
        ("mirrored", 2, 50, 2e6), ("central_storage", 2, 50, 1.5e6)]
    assert [e.strategy for e, _ in anchors(profile, 50, only=["central_storage"])] == [
        "central_storage"]
    (tmp_path / "bare.json").write_text("{}")
    assert anchors(tmp_path / "bare.json", 50) == []
    assert drift([(3e6, 2e6), (None, 1e6), (1e6, 1e6)]) == pytest.approx(1.25)
    assert drift([(None, 1e6)]) is None


def test_the_errors_table_keeps_its_columns_under_long_labels():
    from simdist.commands.real_measure import errors_table

    rows = [("multi_worker_mirrored x4 workers mlp(64) batch 1024", 50e6, 40e6),
            ("default x1 softmax batch 128", 1.2e6, 1.3e6)]
    lines = errors_table(rows, "t", spread=[(45e6, 55e6), None]).splitlines()
    assert len({len(line) for line in lines[1:5]}) == 1, lines  # head, rule, the two rows
    assert lines[3].split()[-4:] == ["50.00ms", "45.00-55.00ms", "40.00ms", "-20.0%"]
    assert lines[-1] == "median |error| 14.2%, worst 20.0% over 2 exercises"


def test_settled_runs_agree_within_five_percent_standard_error():
    from simdist.calibration.protocol import settled

    assert not settled([1.0e6]) and settled([1.0e6, 1.0e6]) and settled([1.0e6, 1.1e6, 1.05e6])
    assert not settled([1.0e6, 1.5e6]) and not settled([1.0e6, 1.5e6, 1.0e6])


def test_a_run_keeps_its_steps_after_the_protocols_skipped_ones():
    from simdist.calibration.protocol import MIN_STEPS, SKIPPED_STEPS, kept_steps

    assert (SKIPPED_STEPS, MIN_STEPS) == (5, 8)
    assert kept_steps(range(8)) == [5, 6, 7]
    with pytest.raises(InvalidArgumentError, match="7 steps leave 2 to measure after the "
                                                   "first 5: give at least 8 steps"):
        kept_steps(range(7))


def test_the_measuring_helps_give_the_protocols_settled_threshold(capsys):
    """realdist measure's --help (it crashed on the '%' of '5%') and the commands' --extra
    help both read ``protocol.SETTLED``."""
    from realdist.calibration.measure import main as measure_main

    for argv in (["calibrate", "--help"], ["bench", "predict", "--help"]):
        with pytest.raises(SystemExit):
            simdist_main(argv)
        assert "(standard error over 5% of their mean;" in " ".join(
            capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        measure_main(["--help"])
    assert "(standard error over 5% of their mean)" in " ".join(capsys.readouterr().out.split())


def test_the_measuring_commands_import_the_calibration_layer_not_other_commands():
    """bench predict imports no other command (the measuring options, progress and tables
    the two commands share are real_measure's), and realdist's measure no command at all."""
    from tests.cli.test_layering import imported_modules, source_files

    files = source_files("simdist", "realdist")

    def commands(name):
        return {m for m in imported_modules(name, files[name], files)
                if m.startswith("simdist.commands.")}

    assert commands("realdist.calibration.measure") == set()
    assert commands("simdist.commands.bench.predict") == {"simdist.commands.real_measure"}
    assert commands("simdist.commands.calibrate") == {"simdist.commands.real_measure"}
    assert commands("simdist.commands.real_measure") == {"simdist.commands.progress"}


def _mwms_plan(tmp_path, batches):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([Exercise(strategy="multi_worker_mirrored", model="softmax",
                                         dataset="digits", global_batch=b, steps=20).to_dict()
                                for b in batches]))
    return plan


def test_exercises_whose_runs_spread_are_run_again(tmp_path, monkeypatch, capsys):
    from realdist.calibration import measure

    runs = {64: 0, 128: 0}

    def fake_run_steps(exercise, timeout):  # batch 64 steady; batch 128 1 ms, 1.5 ms, ...
        runs[exercise.global_batch] += 1
        slow = exercise.global_batch == 128 and runs[128] % 2 == 0
        return [1.5e6 if slow else 1.0e6] * 10

    monkeypatch.setattr(measure, "run_steps", fake_run_steps)
    plan = _mwms_plan(tmp_path, (64, 128))
    assert measure.main([str(plan), "--repeat", "2", "--extra", "3"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    final = {line["index"]: line for line in lines if "median_ns" in line}
    assert final[0]["runs"] == 2 and final[1]["runs"] == 5 == runs[128]
    assert [line["pass"] for line in lines if line.get("again")] == [1, 2, 3]
    assert final[1]["pass"] == 4 and final[1]["steps"] == 50
    # --extra 0: the statistics come after the planned passes, as before
    assert measure.main([str(plan), "--repeat", "2", "--extra", "0"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line.get("runs") for line in lines if "median_ns" in line] == [2, 2]
    assert measure.main([str(plan), "--extra", "-1"]) == 2
    assert "--extra -1: expected a whole number >= 0" in capsys.readouterr().err


def test_the_progress_bar_and_the_csv_count_the_extra_runs(tmp_path, monkeypatch):
    import io

    from argparse import Namespace

    from simdist.calibration import measuring
    from simdist.commands import real_measure

    lines = ['{"index": 0, "pass": 0, "wall_s": 1}', '{"index": 1, "pass": 0, "wall_s": 1}',
             '{"index": 1, "pass": 1, "again": true, "wall_s": 1}',
             '{"index": 0, "pass": 1, "median_ns": 2000000, "p25_ns": 1, "p75_ns": 3, '
             '"steps": 20, "runs": 2, "wall_s": 1}',
             '{"index": 1, "pass": 2, "median_ns": 3000000, "p25_ns": 1, "p75_ns": 3, '
             '"steps": 30, "runs": 3, "wall_s": 1}']

    class FakeMeasure:  # what `python -m realdist measure` prints, without TensorFlow
        def __init__(self, command, **kwargs):
            assert command[-2:] == ["--extra", "3"]
            self.stdout, self.returncode = iter(line + "\n" for line in lines), 0

        def wait(self):
            return 0

        def poll(self):
            return 0

    monkeypatch.setattr(measuring.subprocess, "Popen", FakeMeasure)
    exercises = [Exercise.from_dict(d) for d in
                 json.loads(_mwms_plan(tmp_path, (64, 128)).read_text())]
    bar = io.StringIO()
    out = real_measure.measure_with_progress(exercises, tmp_path / "m.csv",
                                             Namespace(timeout=300, repeat=2, extra=3),
                                             stream=bar)
    assert [m.median_ns for m in out] == [2000000, 3000000]
    assert bar.getvalue().splitlines()[-1].startswith("[" + "#" * 24 + "] 5/5 points")
    rows = list(csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8")))
    assert [row["runs"] for row in rows] == ["2", "3"]


def test_one_session_fits_the_calibration_rows_and_predicts_the_others(tmp_path, monkeypatch,
                                                                        capsys):
    """bench predict --one-session: one realdist measure process gets the calibration plan
    and the matrix alternating; the profile is fitted to the calibration rows only (the
    machine's times here: simulated with TRUE) and predicts the validation rows."""
    from simdist.calibration import measuring

    seen = []

    class FakeMeasure:  # realdist measure, its times simulated with TRUE, without TensorFlow
        def __init__(self, command, **kwargs):
            plan = [Exercise.from_dict(d) for d in json.loads(Path(command[4]).read_text())]
            seen.extend(plan)
            times = predict(TRUE, plan)
            self.stdout = iter(json.dumps({"index": k, "pass": 0, "median_ns": t,
                                           "p25_ns": t, "p75_ns": t, "runs": 1}) + "\n"
                               for k, t in enumerate(times))
            self.returncode = 0

        def wait(self):
            return 0

        def poll(self):
            return 0

    popen = measuring.subprocess.Popen  # others (platform's uname) run as they are
    monkeypatch.setattr(measuring.subprocess, "Popen", lambda command, **kwargs: (
        FakeMeasure if "realdist" in command else popen)(command, **kwargs))
    out = tmp_path / "predict.csv"
    assert simdist_main(["bench", "predict", "--quick", "--one-session", "--repeat", "1",
                         "--csv", str(out), "--profiles-file", str(tmp_path / "none.json")]) == 0
    text = capsys.readouterr().out
    assert "measuring 3 calibration and 2 validation exercises alternating" in text
    assert [(e.model, e.hidden) for e in seen] == [("linear", 32), ("mlp", 64), ("mlp", 256),
                                                   ("mlp", 64), ("linear", 32)]
    rows = list(csv.DictReader(open(out, encoding="utf-8")))
    assert [r["set"] for r in rows] == ["calibration", "validation"] * 2 + ["calibration"]
    profile = out.with_name("predict_profile.json")
    document = json.loads(profile.read_text())
    assert len(document["calibration"]["exercises"]) == 3  # the validation rows are not fitted
    catalog = HardwareCatalog.from_file(profile)
    for row, exercise in zip(rows, seen):
        simulated = simulated_step_ns(exercise, catalog)
        assert float(row["simulated_ms"]) == pytest.approx(simulated / 1e6)
        measured = float(row["median_ms"]) * 1e6
        assert float(row["error_pct"]) == pytest.approx(100 * (simulated - measured) / measured,
                                                        abs=0.01)
    table = text[text.index("validation: simulated"):]
    line = next(line for line in table.splitlines() if "mirrored x2 mlp(64) batch 64" in line)
    median = float(rows[1]["median_ms"])  # the fake's quartiles are its median
    assert line.split()[5:7] == [f"{median:.2f}ms", f"{median:.2f}-{median:.2f}ms"]
    assert "target: median <= 10%" in table
    assert "the machine's speed" not in text  # nothing to drift between


# -- on real TF -------------------------------------------------------------------------------

@pytest.mark.realtf
@pytest.mark.timeout(600)
def test_calibrate_then_predict_on_real_tf(tmp_path, capsys):
    profile = tmp_path / "calibrated.json"
    # one run each, so each is run once more (one run never settles)
    assert simdist_main(["calibrate", "--quick", "--steps", "8", "--repeat", "1", "--extra",
                         "1", "-o", str(profile)]) == 0
    text = capsys.readouterr().out
    assert "fitted parameters" in text and "median |error|" in text
    with open(tmp_path / "calibrated_measurements.csv") as f:
        measured = list(csv.DictReader(f))
    assert len(measured) == 3 and all(float(r["median_ms"]) > 0 for r in measured)
    assert [r["runs"] for r in measured] == ["2", "2", "2"]
    document = json.loads(profile.read_text())
    assert set(document["calibration"]["parameters"]) == set(NAMES)
    predicted = tmp_path / "predict.csv"
    assert simdist_main(["bench", "predict", "--quick", "--steps", "8", "--repeat", "1",
                         "--extra", "0", "--profiles-file", str(profile), "--csv",
                         str(predicted)]) == 0
    text = capsys.readouterr().out
    assert "validation: simulated (calibrated profile) vs measured" in text
    assert "target: median <= 10%, worst <= 25%" in text
    with open(predicted) as f:
        rows = list(csv.DictReader(f))
    assert [r["strategy"] for r in rows] == ["mirrored", "multi_worker_mirrored"]
    assert all(float(r["simulated_ms"]) > 0 and float(r["median_ms"]) > 0 for r in rows)

