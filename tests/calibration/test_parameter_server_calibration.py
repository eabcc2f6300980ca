"""ParameterServerStrategy in the calibration (issue 29): the coordinator's cost per scheduled
function (``HostCosts.schedule_overhead_ns``) fitted from step times at two numbers of steps
per function, the coordinator's step rate that ``realdist measure`` reports, and ``simdist
bench predict --only parameter_server``. Without TensorFlow: the measurements are simulated."""

import csv
import json
from pathlib import Path

import pytest

from simdist.calibration.fit import (SYSTEM, Fit, Measurement, catalog_for, fit, predict,
                                     profile_document)
from simdist.calibration.plan import label, sized_exercise
from simdist.calibration.profile_file import write_profile
from simdist.commands.cli import main as simdist_main
from simdist.trace.schema import Span
from simdist.training.exercises import Exercise
from tests.calibration.test_calibration import TRUE  # the same made-up machine's costs

#: and its coordinator's cost per scheduled function
PER_FUNCTION = {**TRUE, "schedule_overhead_ns": 20e6}


def ps_plan(steps=8):
    """ParameterServerStrategy on 1 and 2 workers at 1 and 4 steps per function."""
    return [sized_exercise("parameter_server", n, "softmax", 32, 64, steps, k)
            for n in (1, 2) for k in (1, 4)]


def test_the_fit_finds_the_coordinators_cost_per_function():
    """Step times simulated with a known cost per scheduled function (20 ms): the fit,
    started at 1 ms, finds it again, and the network that a step's messages to its ps pay
    (no synchronous exercise fitted it here); the host costs of a synchronous step, which
    no ps step pays, stay as they were; the fitted profile's coordinator pays the cost."""
    exercises = ps_plan()
    times = predict(PER_FUNCTION, exercises)
    assert times[0] > 1.5 * times[1]  # 1 step per function: the cost is most of a step
    result = fit([Measurement(e, t) for e, t in zip(exercises, times)], start=TRUE)
    assert result.parameters["schedule_overhead_ns"] == pytest.approx(20e6, rel=0.01)
    assert result.parameters["network_latency"] == pytest.approx(3e6, rel=0.01)
    for name in ("step_overhead_ns", "replica_overhead_ns", "op_overhead_ns", "input_kb_ns"):
        assert result.parameters[name] == TRUE[name], name
    assert max(abs(e) for e in result.errors) < 0.01
    costs = result.catalog.device(f"{SYSTEM}-cpu").host_costs
    assert costs.schedule_overhead_ns == round(result.parameters["schedule_overhead_ns"])
    record = profile_document(result)["calibration"]
    assert record["parameters"]["schedule_overhead_ns"]["value"] == pytest.approx(20e6)
    assert record["exercises"][1]["exercise"]["steps_per_execution"] == 4


def test_realdist_measure_takes_the_coordinators_step_rate():
    """From the first function's start to the last one's end, over the steps they ran: the
    tracing before the first function and the workers' overlap play no part."""
    from realdist.calibration.measure import coordinator_steps

    spans = [Span("worker:0", "functions", "step_fn#1", "function", 1_000, 400, {"steps": 2}),
             Span("worker:1", "functions", "step_fn#2", "function", 1_100, 500, {"steps": 2}),
             Span("worker:0", "functions", "step_fn#3", "function", 1_500, 300, {"steps": 2}),
             Span("chief:0", "train", "epoch 0", "step", 0, 2_000, {})]
    assert coordinator_steps(spans) == [(1_800 - 1_000) // 6] * 6


def test_predict_only_parameter_server_predicts_and_measures_its_rows(tmp_path, monkeypatch,
                                                                       capsys):
    """bench predict --only parameter_server: its 4 rows, predicted with the calibrated
    profile's cost per function, measured by realdist measure (a fake here, whose times are
    the same machine's), the errors 0."""
    from simdist.calibration import measuring

    seen = []

    class FakeMeasure:  # realdist measure, its times simulated with PER_FUNCTION
        def __init__(self, command, **kwargs):
            plan = [Exercise.from_dict(d) for d in json.loads(Path(command[4]).read_text())]
            seen.extend(plan)
            self.stdout = iter(json.dumps({"index": k, "pass": 0, "median_ns": t, "p25_ns": t,
                                           "p75_ns": t, "runs": 1}) + "\n"
                               for k, t in enumerate(predict(PER_FUNCTION, plan)))
            self.returncode = 0

        def wait(self):
            return 0

        def poll(self):
            return 0

    popen = measuring.subprocess.Popen
    monkeypatch.setattr(measuring.subprocess, "Popen", lambda command, **kwargs: (
        FakeMeasure if "realdist" in command else popen)(command, **kwargs))
    anchor = Exercise(strategy="mirrored", model="mlp", dataset="digits", global_batch=128)
    profile = tmp_path / "calibrated.json"
    write_profile(profile, profile_document(Fit(PER_FUNCTION, catalog_for(PER_FUNCTION),
                                                [Measurement(anchor, 1e6)], [1e6])))
    out = tmp_path / "predict.csv"
    assert simdist_main(["bench", "predict", "--only", "parameter_server", "--steps", "8",
                         "--repeat", "1", "--extra", "0", "--csv", str(out),
                         "--profiles-file", str(profile)]) == 0
    text = capsys.readouterr().out
    assert [(e.num_workers, e.model, e.steps_per_execution, e.ps) for e in seen] == [
        (1, "softmax", 2, 1), (1, "mlp", 2, 1), (2, "softmax", 2, 1), (2, "mlp", 2, 1)]
    assert "parameter_server x2 workers mlp(64) batch 64 spe 2" in text
    assert "target: median <= 10%, worst <= 25%: met (median 0.0%, worst 0.0%)" in text
    rows = list(csv.DictReader(open(out, encoding="utf-8")))
    assert [r["steps_per_execution"] for r in rows] == ["2"] * 4
    assert label(seen[0]) == "parameter_server x1 worker softmax batch 128 spe 2"
