"""The options commands share are held to one set of rules (``simdist/base/checks.py``,
``simdist/sim/limits.py``): ``simdist ps`` takes ``simdist run``'s limits with the same
defaults and refuses the values ``simdist run`` refuses (seeds, learning rates, times past the
run's simulated time, sizes past their caps), each in one line before anything runs; ``simdist
run`` refuses options its strategy would ignore; ``calibrate --from-csv`` refuses duplicate
columns and ragged rows and warns of a table too small for its costs; ``bench
allreduce-formulas`` refuses a tolerance that is not a percentage."""

import time

import numpy as np
import pytest

from simdist.commands.cli import main as simdist_main

from tests.cli.test_bad_input import one_line_error

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("fresh_tf1")]


def _corrupt_checkpoint(tmp_path, content: bytes):
    folder = tmp_path / "ck"
    folder.mkdir()
    (folder / "model.ckpt-3.npz").write_bytes(content)
    (folder / "checkpoint").write_text(f'model_checkpoint_path: "{folder}/model.ckpt-3"\n')
    return str(folder)


def _cut_checkpoint(tmp_path):
    whole = tmp_path / "whole.npz"
    np.savez(whole, w=np.zeros(100, np.float32), global_step=np.int64(3))
    return _corrupt_checkpoint(tmp_path, whole.read_bytes()[:200])


@pytest.mark.parametrize("argv, expected", [
    (["--step-us", "inf,inf,inf"], "step_us[0] (--step-us) must be a time in us, finite, >= 0"),
    (["--step-us", "1e30,1,1"], "step_us[0] (--step-us) 1e+30 us is longer than the run's "
                                "limit on simulated time, 86400 s (--max-sim-time"),
    (["--stall-us", "inf", "--stall-probability", "0.5"], "stall_us (--stall-us) must be a time"),
    (["--stall-us", "1e30"], "stall_us (--stall-us) 1e+30 us is longer than the run's limit"),
    (["--stall-probability", "2"], "stall_probability (--stall-probability) must be a "
                                   "probability"),
    (["--seed", "-1"], "seed (--seed) must be an int >= 0 and < 2**63, got -1"),
    (["--learning-rate", "nan"], "learning_rate (--learning-rate) must be a finite number > 0 "
                                 "and <= 1000, got nan"),
    (["--learning-rate", "-1"], "learning_rate (--learning-rate) must be a finite number"),
    (["--learning-rate", "inf"], "learning_rate (--learning-rate) must be a finite number"),
    (["--mode", "async", "--warmup-steps", "-3"], "warmup_steps (--warmup-steps) must be an int "
                                                  ">= 0, got -3"),
    (["--fail", "ps:0@1e30s+1ms"], "failure of ps:0 (--fail): its time 1e+30 s is longer"),
    (["--fail", "ps:0@1ms+1e30s"], "failure of ps:0 (--fail): its downtime 1e+30 s is longer"),
    (["--fail", "ps:0@2s", "--max-sim-time", "1 s"], "its time 2 s is longer than the run's "
                                                     "limit on simulated time, 1 s"),
    (["--examples", "100000000", "--workers", "1", "--steps", "1"],
     "workers x examples x features x 4 bytes (1 x 100,000,000 x 8 x 4) = 3 GiB of arrays, "
     "more than simdist's cap of 256 MiB"),
    (["--features", "1000000000"], "(3 x 32 x 1,000,000,000 x 4) = 357.6 GiB of arrays"),
    (["--model", "sparse", "--features", "100000000"], "workers x features x 4 bytes (3 x "
                                                       "100,000,000 x 4: each worker reads"),
    (["--workers", "2000", "--steps", "2"], "workers (--workers) 2,000 is more than 512"),
    (["--ps", "100"], "ps (--ps) 100 is more than 64"),
    (["--steps", "100000000"], "these sizes make about 102,000,002,820 events, more than "
                               "--max-events 10,000,000"),
    (["--max-events", "1000"], "more than --max-events 1,000"),
])
def test_ps_refuses_what_run_refuses_in_one_line_before_it_starts(argv, expected, capsys):
    start = time.monotonic()
    one_line_error(["ps", *argv], capsys, expected)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("make, expected", [
    (lambda tmp: str(_file(tmp)), "(--checkpoint-dir): 'FILE' is a file, expected a folder"),
    (lambda tmp: str(_file(tmp) / "sub"), "(--checkpoint-dir): 'FILE' is a file"),
    (lambda tmp: _corrupt_checkpoint(tmp, b"garbage"), "model.ckpt-3.npz' is corrupt"),
    (_cut_checkpoint, "model.ckpt-3.npz' is corrupt"),
    (lambda tmp: _corrupt_checkpoint(tmp, b"") and _state(tmp, b"\xff\xfe"),
     "the checkpoint state file"),
])
def test_a_bad_checkpoint_dir_is_one_line(tmp_path, capsys, make, expected):
    folder = make(tmp_path)
    one_line_error(["ps", "--checkpoint-dir", folder], capsys,
                   expected.replace("FILE", str(tmp_path / "f")))


def _file(tmp_path):
    path = tmp_path / "f"
    path.write_text("not a folder")
    return path


def _state(tmp_path, content: bytes):
    (tmp_path / "ck" / "checkpoint").write_bytes(content)
    return str(tmp_path / "ck")


def test_ps_has_runs_limits_with_its_defaults(capsys):
    from simdist.commands import ps

    with pytest.raises(SystemExit):
        ps.main(["--help"])
    out = capsys.readouterr().out
    for option in ("--max-events N", "--max-sim-time TIME", "--timeout S", "10,000,000",
                   "86400 s", "default 3600"):
        assert option in out


def test_ps_stops_at_its_simulated_time_limit_in_one_line(capsys):
    one_line_error(["ps", "--steps", "50", "--max-sim-time", "2 ms"], capsys,
                   "simdist ps: error: the run stopped at its limit of 2.0 ms of simulated "
                   "time (--max-sim-time)")


def test_ps_stops_at_its_wall_clock_timeout(capsys):
    start = time.monotonic()
    one_line_error(["ps", "--workers", "8", "--steps", "400", "--timeout", "0.5"], capsys,
                   "the run stopped at its wall-clock timeout of 0.5 s (--timeout)")
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("argv, expected", [
    (["parameter_server", "--replicas", "4"], "--replicas 4: parameter_server has no such "
                                              "option"),
    (["parameter_server", "--cross-device-ops", "nccl"], "--cross-device-ops nccl: "
                                                         "parameter_server has no such option"),
    (["parameter_server", "--cross-device-ops", "auto"], "--cross-device-ops auto"),
    (["one_device", "--replicas", "2"], "--replicas 2: one_device has no such option"),
    (["mirrored", "--communication", "ring"], "--communication ring: mirrored has no such"),
    (["multi_worker_mirrored", "--cross-device-ops", "nccl"], "MirroredStrategy's"),
    (["mirrored", "--seed", "-1"], "--seed must be an int >= 0 and < 2**63, got -1"),
    (["parameter_server", "--fail", "worker:1@2000000s"], "--fail worker:1@2000000s: its time "
                                                          "2e+06 s is longer than the run's "
                                                          "limit on simulated time, 86400 s"),
])
def test_run_refuses_options_its_strategy_would_ignore(argv, expected, capsys):
    one_line_error(["run", *argv], capsys, expected)


def test_the_exercise_refuses_another_strategys_options():
    from simdist.base.errors import InvalidArgumentError
    from simdist.training.exercises import Exercise

    with pytest.raises(InvalidArgumentError, match="cross_device_ops .* is MirroredStrategy's "
                                                   "option, not parameter_server's"):
        Exercise(strategy="parameter_server", cross_device_ops="nccl")
    with pytest.raises(InvalidArgumentError, match="communication .* not mirrored's"):
        Exercise(strategy="mirrored", communication="ring")
    assert Exercise(strategy="mirrored", cross_device_ops="nccl").cross_device_ops == "nccl"


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_bench_formulas_refuses_a_tolerance_that_is_not_a_percentage(value, capsys):
    one_line_error(["bench", "allreduce-formulas", f"--tolerance={value}"], capsys,
                   "--tolerance must be a percentage, finite, >= 0")


# -- calibrate --from-csv ---------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("model,step_ms,model\nmlp,3.1,mlp\n", "column(s) 'model' given more than once"),
    ("model,step_ms\nmlp,3.1,5\n", "line 2: 3 value(s) for the 2 columns of the header "
                                   "(model, step_ms)"),
    ("model,step_ms\nmlp,3.1\n\nmlp\n", "line 4: 1 value(s) for the 2 columns"),
])
def test_calibrate_refuses_duplicate_columns_and_ragged_rows(tmp_path, capsys, text, expected):
    table = tmp_path / "t.csv"
    table.write_text(text)
    one_line_error(["calibrate", "--from-csv", str(table), "-o", str(tmp_path / "p.yaml")],
                   capsys, expected)


def test_calibrate_warns_of_a_table_with_fewer_exercises_than_costs(tmp_path, capsys,
                                                                     monkeypatch):
    from simdist.base.errors import InvalidArgumentError
    from simdist.calibration.table import read_table, underdetermined
    from simdist.commands import calibrate

    table = tmp_path / "t.csv"
    table.write_text("model,step_ms\nmlp,3.1\nmlp,3.2\n")
    warning = underdetermined(table, read_table(table))
    assert "2 row(s) to fit, 1 different exercise(s), for 9 costs they depend on: the fit is " \
           "underdetermined" in warning

    def stop(measurements):  # the fit itself is not what this test is about
        raise InvalidArgumentError("stopped")
    monkeypatch.setattr(calibrate, "fit_with_progress", stop)
    assert simdist_main(["calibrate", "--from-csv", str(table), "-o",
                         str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"simdist calibrate: warning: {warning}" and len(err) == 2
    enough = [f"mirrored,{r},mlp,{b},{r + b / 100}" for r in (1, 2, 4) for b in (32, 64, 128, 256)]
    table.write_text("strategy,replicas,model,global_batch,step_ms\n" + "\n".join(enough))
    assert underdetermined(table, read_table(table)) is None
