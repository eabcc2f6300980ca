"""The same program and seed give byte-identical traces in-process and under mpiexec -n 1/2/4."""

import pytest

from simdist.commands.cli import main as simdist_main

from tests.conftest import PROGRAMS, mpi_simdist

pytestmark = pytest.mark.mpi

CASES = {
    "token_ring": ["token_ring", "--large-bytes", "1048576"],
    "chatter": [str(PROGRAMS / "chatter.py"), "--messages", "40"],
    # flow fidelity: the flows are a state machine every rank runs on the same joins
    "data_parallel_flow": ["data_parallel", "--workers", "6", "--steps", "3", "--fidelity",
                           "flow", "--algorithm", "ps"],
    # a capped trace is cut at the same time whatever the ranks
    "token_ring_capped": ["token_ring", "--large-bytes", "1048576", "--trace-max-mb", "0.05"],
}


@pytest.fixture(scope="module", params=sorted(CASES))
def reference(request, tmp_path_factory):
    """The in-process trace of one program (the reference every MPI run must equal)."""
    out = tmp_path_factory.mktemp(request.param) / "inprocess.json"
    assert simdist_main(["run", *CASES[request.param], "--seed", "3", "--quiet",
                         "--trace", str(out)]) == 0
    return request.param, out.read_bytes()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_mpi_trace_is_byte_identical_to_inprocess(reference, ranks, tmp_path):
    name, expected = reference
    out = tmp_path / f"mpi{ranks}.json"
    proc = mpi_simdist(ranks, ["run", *CASES[name], "--seed", "3", "--quiet",
                               "--trace", str(out)])
    assert f"mpi, {ranks} rank(s)" in proc.stdout
    assert len(expected) > 1000
    assert out.read_bytes() == expected


def test_a_different_seed_gives_a_different_trace(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for seed, path in ((1, a), (2, b)):
        assert simdist_main(["run", *CASES["chatter"], "--seed", str(seed), "--quiet",
                             "--trace", str(path)]) == 0
    assert a.read_bytes() != b.read_bytes()


@pytest.mark.timeout(120)
def test_more_ranks_than_tasks_is_a_clear_error():
    from simdist.sim.launcher import run_mpi

    proc = run_mpi(4, ["-m", "simdist", "run", "token_ring", "--tasks", "2",
                       "--tasks-per-machine", "1", "--quiet"], timeout=100)
    assert proc.returncode != 0
    assert "mpiexec -n 4 is larger than the number of simulated tasks (2)" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.timeout(120)
def test_an_error_on_one_rank_ends_the_whole_job(tmp_path):
    """A task on rank 1 sends to a task that does not exist: the job must end, not hang."""
    prog = tmp_path / "bad.py"
    prog.write_text(
        "from simdist.hardware.cluster import ClusterSpec\n"
        "from simdist.hardware.devices import Layout\n"
        "from simdist.training.programs import Program\n"
        "def main(ctx, args):\n"
        "    yield ctx.timeout(10)\n"
        "    if ctx.order == 3:\n"
        "        ctx.send('worker:9', 'x', None)\n"
        "    yield ctx.recv(tag='never')\n"
        "PROGRAM = Program('bad', 'sends to a missing task', "
        "lambda a: (ClusterSpec({'worker': 4}), Layout()), main)\n")
    from simdist.sim.launcher import run_mpi

    proc = run_mpi(2, ["-m", "simdist", "run", str(prog), "--quiet"], timeout=100)
    assert proc.returncode != 0
    assert "worker:9" in proc.stderr
