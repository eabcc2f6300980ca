"""Stragglers as distributions in the synchronous tf.distribute strategies (issue 29, item 5):
each worker's forward+backward time times its seeded draw per step, shared by its replicas;
a synchronous step waits for the slowest worker."""

import json

import pytest

from simdist.base.errors import InvalidArgumentError
from simdist.commands.cli import main as simdist_main
from simdist.hardware.stragglers import parse_stragglers
from simdist.training import simulate_exercise
from simdist.training.compare import format_run
from simdist.training.exercises import Exercise, RunResult

from tests.conftest import trace_over_ranks

#: MultiWorkerMirroredStrategy, 4 workers, a model whose compute outweighs its all-reduce
MWMS = dict(strategy="multi_worker_mirrored", workers=4, devices_per_worker=1, model="mlp",
            dataset="classification", hidden=512, global_batch=256, steps=4, seed=3)


def _run(**changes):
    return simulate_exercise(Exercise(**{**MWMS, **changes}))


def test_a_synchronous_step_waits_for_the_slowest_worker():
    plain, slow = _run(), _run(stragglers="lognormal:0.5")
    again = _run(stragglers="lognormal:0.5")
    assert slow.step_times_ns == again.step_times_ns  # deterministic for a seed
    assert slow.losses == plain.losses  # the math is the same, only time moves
    assert sum(slow.step_times_ns) > 1.1 * sum(plain.step_times_ns)
    assert _run(stragglers="lognormal:0.5", seed=4).step_times_ns != slow.step_times_ns
    # each worker's replicas at step s took its draw for (seed, worker) at step s
    draws = parse_stragglers("lognormal:0.5")
    spans = [s for s in slow.trace.spans if s.name == "forward+backward"]
    for worker in range(4):
        mine = [s.args["straggler"] for s in spans if s.pid == f"worker:{worker}"]
        assert mine == [round(f, 4) for f in draws.factors(3, worker, 4)]
    assert "lognormal stragglers (sigma 0.5)" in slow.metadata["stragglers"]
    assert "compute times drawn: lognormal" in format_run(slow)
    assert "stragglers" not in plain.metadata


def test_the_replicas_of_one_worker_share_its_factor():
    run = simulate_exercise(Exercise(strategy="mirrored", devices_per_worker=4, steps=2,
                                     stragglers="exponential:0.5", seed=1))
    spans = [s for s in run.trace.spans if s.name == "forward+backward"]
    assert len(spans) == 8
    for step in range(2):
        assert len({s.args["straggler"] for s in spans[4 * step:4 * step + 4]}) == 1


@pytest.mark.parametrize("spec, expected", [
    ("lognormal:x", "stragglers (--stragglers) 'lognormal:x': expected lognormal:NUMBER"),
    ("weibull:2", "expected none, lognormal:SIGMA"),
    ("empirical:/no/such/file", "stragglers (--stragglers): step times file"),
])
def test_a_bad_spec_is_a_one_line_error(spec, expected):
    with pytest.raises(InvalidArgumentError, match="^[^\n]*$") as error:
        Exercise(stragglers=spec)
    assert expected in str(error.value)


def test_parameter_server_and_realdist_refuse_active_stragglers():
    from realdist import check_runs_on_tf

    with pytest.raises(InvalidArgumentError, match="synchronous strategies, not of "
                                                   "parameter_server"):
        Exercise(strategy="parameter_server", workers=2, stragglers="lognormal:0.3")
    check_runs_on_tf(Exercise())  # none: runs
    with pytest.raises(InvalidArgumentError, match="cannot make them straggle"):
        check_runs_on_tf(Exercise(stragglers="lognormal:0.3"))


def test_an_old_result_without_the_field_still_loads(tmp_path):
    run = simulate_exercise(Exercise(steps=2), trace=False)
    data = run.to_json()
    del data["exercise"]["stragglers"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert RunResult.load(old).exercise.stragglers == "none"
    assert simdist_main(["compare", str(old), str(old)]) == 0
    # a straggling run compares with a plain one: only its times moved
    slow = tmp_path / "slow.json"
    simulate_exercise(Exercise(steps=2, stragglers="lognormal:0.3"), trace=False).save(slow)
    assert simdist_main(["compare", str(old), str(slow)]) == 0


def test_simdist_run_takes_the_option(capsys):
    assert simdist_main(["run", "mirrored", "--replicas", "2", "--steps", "2",
                         "--stragglers", "lognormal:0.3"]) == 0
    assert "compute times drawn: lognormal stragglers (sigma 0.3)" in capsys.readouterr().out


MPI_ARGS = ["run", "multi_worker_mirrored", "--workers", "4", "--steps", "3", "--stragglers",
            "lognormal:0.5", "--seed", "5", "--quiet"]


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_stragglers_trace_is_the_same_at_one_and_two_ranks(tmp_path):
    """One rank in process (tests/sim/test_mpi_parity.py: the same as mpiexec -n 1), and
    mpiexec -n 2: each worker's draws come from its own seeded generator."""
    assert b'"straggler"' in trace_over_ranks(MPI_ARGS, tmp_path)
