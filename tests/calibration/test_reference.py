"""The reference profile and ``simdist calibrate --anchor``: a shipped calibration scaled to
a machine by a few exercises measured there."""

from __future__ import annotations

import json
import statistics

import pytest

from simdist.calibration.fit import NAMES, START, Measurement, predict
from simdist.calibration.plan import calibration_plan
from simdist.calibration.reference import (ANCHORS, REFERENCE, ReferenceProfile,
                                           anchor_exercises, anchored)
from simdist.commands.cli import main as simdist_main
from simdist.training.exercises import Exercise

#: the demo's exercise (Makefile: EXERCISE, MirroredStrategy on 4 logical CPUs)
DEMO = Exercise(strategy="mirrored", devices_per_worker=4, model="mlp", dataset="digits",
                global_batch=64, steps=20)
MADE_UP = ReferenceProfile("a made-up machine", "2.21.0", "2026-11-27", "made up", 3, 0.1,
                           dict(START))


def test_the_reference_is_a_whole_calibration_of_the_development_machine():
    assert set(REFERENCE.parameters) == set(NAMES)
    assert all(v >= 0 for v in REFERENCE.parameters.values())
    assert REFERENCE.exercises == len(calibration_plan(1))
    assert 0 < REFERENCE.median_abs_error < 0.15


def test_the_anchors_are_short_in_process_exercises_and_not_the_demos():
    anchors = anchor_exercises(40)
    assert len(anchors) == len(ANCHORS) == 3
    assert all(a.num_workers == 1 for a in anchors)
    assert DEMO.strategy not in {a.strategy for a in anchors}


def scaled_measurements(factor: float, reference=MADE_UP) -> list:
    anchors = anchor_exercises(40)
    return [Measurement(e, factor * t) for e, t in zip(anchors, predict(reference.parameters,
                                                                         anchors))]


@pytest.mark.parametrize("factor", [0.5, 1.0, 1.7])
def test_a_uniformly_faster_or_slower_machine_gets_that_factor(factor):
    got = anchored(scaled_measurements(factor), MADE_UP)
    assert got.scale == pytest.approx(factor)
    assert got.fit.parameters == pytest.approx({k: v * factor for k, v in START.items()})
    # and the scaled profile predicts an exercise that no anchor is about that much longer
    there, here = predict(START, [DEMO])[0], predict(got.fit.parameters, [DEMO])[0]
    assert here / there == pytest.approx(factor, rel=0.02)


def test_the_median_ratio_keeps_one_odd_anchor_from_moving_the_scale():
    measurements = scaled_measurements(2.0)
    odd = measurements[0]
    measurements[0] = Measurement(odd.exercise, odd.median_ns * 10)  # a noisy first anchor
    got = anchored(measurements, MADE_UP)
    assert got.scale == pytest.approx(2.0)
    assert got.measured_ns[0] == pytest.approx(20 * got.reference_ns[0])


def test_anchor_refuses_a_table_or_quick(capsys):
    assert simdist_main(["calibrate", "--anchor", "--quick"]) == 2
    assert "--anchor measures its own 3 exercises: not with --quick" in capsys.readouterr().err


@pytest.mark.realtf
@pytest.mark.timeout(240)
def test_anchor_measures_here_and_writes_a_profile_that_predicts(tmp_path, capsys):
    out = tmp_path / "anchored.json"
    assert simdist_main(["calibrate", "--anchor", "--repeat", "1", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("reference profile: fitted by 'simdist calibrate")
    assert "this machine is " in text and "x the reference (the median ratio)" in text
    document = json.loads(out.read_text())
    printed = float(text.split("this machine is ", 1)[1].split("x", 1)[0])  # 2 decimals
    fitted = {k: v["value"] for k, v in document["calibration"]["parameters"].items()}
    # one scale for every parameter: the median ratio the line prints, rounded there (on a
    # fast machine, 0.4x, that rounding alone is over 1%)
    scale = statistics.median(fitted[k] / v for k, v in REFERENCE.parameters.items() if v)
    assert abs(scale - printed) <= 0.005 + 1e-9 and scale > 0
    assert fitted == pytest.approx({k: v * scale for k, v in REFERENCE.parameters.items()},
                                   rel=1e-4, abs=1e-3)
    assert len(document["calibration"]["exercises"]) == 3
    assert (tmp_path / "anchored_measurements.csv").read_text().count("\n") == 4
    assert simdist_main(["run", "mirrored", "--replicas", "4", "--model", "mlp", "--dataset",
                         "digits", "--global-batch", "64", "--steps", "4", "--profiles-file",
                         str(out), "--profile", "calibrated", "--quiet"]) == 0


def test_scaling_is_every_fitted_time():
    # every parameter is a time (ns, ns per MFLOP, ns per KB): scaling them all scales a
    # machine uniformly; a parameter that was not a time would break this
    from simdist.calibration.fit import PARAMETERS

    assert {p.unit for p in PARAMETERS} <= {"ns", "ns/MFLOP", "ns/KB"}
