"""ParameterServerStrategy over MPI ranks: every task's state on the rank that hosts it,
everything between tasks a message, so ``simdist run parameter_server`` gives the same trace,
byte for byte, in one process and under mpiexec -n 1, 2, 4 (with a worker's or a ps's
failure too, which every rank knows from the start, and with distributed or side-car evaluation)."""

import pytest

from simdist.commands.cli import main as simdist_main

from tests.conftest import mpi_simdist

pytestmark = pytest.mark.mpi

CASES = {
    "default": [],
    "worker_failure": ["--workers", "2", "--steps", "20", "--fail", "worker:1@250us+200us"],
    "ps_failure": ["--model", "embedding", "--dataset", "vocab", "--global-batch", "32",
                   "--workers", "2", "--ps", "2", "--steps", "40", "--steps-per-execution",
                   "2", "--fail", "ps:1@3300us+100us"],
    "evaluation_distributed": ["--workers", "2", "--steps", "20", "--evaluation",
                               "distributed", "--fail", "worker:1@2400us+100us"],
    # the evaluator learns of each complete checkpoint by a message from the chief
    "evaluation_sidecar": ["--workers", "2", "--steps", "20", "--evaluation", "sidecar"],
}


@pytest.fixture(scope="module", params=sorted(CASES))
def reference(request, tmp_path_factory):
    """The in-process trace of one case (what every MPI run must equal)."""
    out = tmp_path_factory.mktemp(request.param) / "inprocess.json"
    assert simdist_main(["run", "parameter_server", *CASES[request.param], "--seed", "3",
                         "--quiet", "--trace", str(out)]) == 0
    return request.param, out.read_bytes()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_parameter_server_trace_is_byte_identical_over_ranks(reference, ranks, tmp_path):
    name, expected = reference
    out = tmp_path / f"mpi{ranks}.json"
    proc = mpi_simdist(ranks, ["run", "parameter_server", *CASES[name], "--seed", "3",
                               "--quiet", "--trace", str(out)])
    assert f"mpi, {ranks} rank(s)" in proc.stdout
    assert proc.stdout.count("simdist: parameter_server on") == 1  # rank 0 alone prints
    assert len(expected) > 1000 and out.read_bytes() == expected


def test_the_failures_show_in_the_traces():
    from simdist.training import simulate_exercise
    from simdist.training.exercises import Exercise

    run = simulate_exercise(Exercise(strategy="parameter_server", workers=2, ps=2, steps=20,
                                     failures=("worker:1@250us+200us", "ps:0@2100us+100us")))
    assert run.metadata["restores"] == 1
    assert [f for f, n in run.metadata["function_runs"].items() if n == 2] == ["step_fn#2"]
    names = {s.name for s in run.trace.spans if s.cat == "ps"}
    assert any(n.startswith("save ") for n in names)  # checkpoints read from the ps
    assert any(n.startswith("restore ") for n in names)  # and restored on them


def test_an_unregistered_function_is_refused_across_ranks():
    """In one process an unregistered function is registered as it is scheduled; across
    ranks it cannot be, and the coordinator says so."""
    import numpy as np

    from simdist.base.errors import InvalidArgumentError
    from simdist.distribute.server import InProcessCluster

    cluster = InProcessCluster()
    cluster.states = {"worker:0": None, "ps:0": None}  # servers on another rank, none here
    with pytest.raises(InvalidArgumentError, match="register it with cluster.register"):
        cluster.name_of(lambda: np.zeros(1), "scheduled function")


@pytest.mark.timeout(120)
def test_a_failure_after_the_end_does_not_stretch_the_run_on_any_rank(capsys):
    """The coordinator's rank posts "training ended" (``ctx.post``): every rank cancels its
    failure waits at the end of that window, so a failure 100 s on neither runs the clock to
    it nor shows in the report, at 2 ranks as in one process."""
    args = ["run", "parameter_server", "--steps", "5", "--fail", "worker:1@100s+1ms"]
    assert simdist_main(args) == 0
    alone = capsys.readouterr().out
    proc = mpi_simdist(2, args)
    for out in (alone, proc.stdout):
        assert "simulated time: 610.5 µs" in out, out
        assert ("failure worker:1@100s+1ms never happened: training ended first, at "
                "610.5 µs of simulated time") in out, out
    assert "simulated time 610505 ns" in alone and "simulated time 610505 ns" in proc.stdout
