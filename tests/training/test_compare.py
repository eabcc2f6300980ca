"""simdist compare and the parity check never say "weights agree" about a run that diverged
(NaN or inf) or stopped short; non-finite or absurd hyper-parameters are refused up front."""

import subprocess
import sys

import numpy as np
import pytest

from simdist.commands.cli import main as simdist_main
from simdist.commands.compare import main as compare_main
from simdist.training.compare import format_comparison, parity
from simdist.training import simulate_exercise
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise, RunResult, max_weight_difference, result_problems

from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def run():
    return simulate_exercise(Exercise(strategy="default", steps=3))


def spoiled(run, **changes) -> RunResult:
    weights = {k: v.copy() for k, v in run.weights.items()}
    fields = dict(losses=list(run.losses), weights=weights,
                  step_times_ns=list(run.step_times_ns))
    fields.update(changes)
    return RunResult(run.source, run.exercise, fields["losses"], fields["weights"],
                     fields["step_times_ns"], dict(run.metadata))


def nan_weights(run):
    w = {k: v.copy() for k, v in run.weights.items()}
    next(iter(w.values())).flat[0] = np.nan
    return w


def inf_weights(run):
    w = {k: np.full_like(v, np.inf) for k, v in run.weights.items()}
    return w


@pytest.mark.parametrize("change, expected", [
    (lambda r: dict(weights=nan_weights(r)), "holds NaN or inf"),
    (lambda r: dict(weights=inf_weights(r)), "holds NaN or inf"),
    (lambda r: dict(losses=[np.nan] * 3), "its loss is nan at step 0 (and 2 more steps)"),
    (lambda r: dict(losses=[1.0, np.inf, 1.0]), "its loss is inf at step 1"),
    (lambda r: dict(losses=[], step_times_ns=[]), "it holds 0 losses for the 3 steps"),
    (lambda r: dict(losses=r.losses[:2]), "it holds 2 losses for the 3 steps"),
], ids=["nan-weight", "inf-weights", "nan-losses", "inf-loss", "no-steps", "short"])
def test_a_spoiled_run_never_agrees(run, change, expected, tmp_path, capsys):
    bad = spoiled(run, **change(run))
    assert expected in " ".join(result_problems(bad))
    for a, b in ((run, bad), (bad, run), (bad, bad)):
        ok, line = parity(a, b)
        assert not ok and "weights NOT compared" in line and expected in line
        assert "agree" not in format_comparison(a, b)
        with pytest.raises(InvalidArgumentError, match="the weights cannot be compared"):
            max_weight_difference(a, b)
    first, second = run.save(tmp_path / "a.json"), bad.save(tmp_path / "b.json")
    assert compare_main([str(first), str(second)]) == 1
    out = capsys.readouterr().out
    assert "NOT compared, the simdist run (second)" in out and expected in out


def test_a_complete_finite_run_agrees_with_itself(run):
    assert result_problems(run) == []
    assert parity(run, run) == (True, "largest weight difference: 0.000e+00  (weights agree: "
                                      "tolerance 1e-05)")


@pytest.mark.parametrize("rate", [float("inf"), float("-inf"), float("nan"), 0.0, -0.1, 1e4,
                                  True, "0.1"])
def test_an_exercise_refuses_a_non_finite_or_absurd_learning_rate(rate):
    with pytest.raises(InvalidArgumentError, match="learning_rate .* must be a finite number"):
        Exercise(learning_rate=rate)


@pytest.mark.parametrize("rate", ["inf", "nan", "-1", "1e400"])
def test_both_halves_refuse_a_bad_learning_rate_before_running(rate, capsys):
    assert simdist_main(["run", "mirrored", f"--learning-rate={rate}", "--quiet"]) == 2
    assert "learning_rate (--learning-rate) must be a finite number" in capsys.readouterr().err
    proc = subprocess.run([sys.executable, "-m", "realdist", "run", "mirrored",
                           f"--learning-rate={rate}"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "learning_rate (--learning-rate) must be a finite number" in proc.stderr
    assert "starting TensorFlow" not in proc.stdout
