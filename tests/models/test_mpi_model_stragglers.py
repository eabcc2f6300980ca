"""data_parallel with a zoo model and lognormal stragglers gives the byte-identical trace in
one process and over 2 MPI ranks: each worker's draws come from its own seeded generator."""

import pytest

from simdist.commands.cli import main as simdist_main

from tests.conftest import mpi_simdist

pytestmark = pytest.mark.mpi

ARGS = ["run", "data_parallel", "--model", "mobilenet_v2", "--workers", "4", "--steps", "3",
        "--stragglers", "lognormal:0.4", "--seed", "5", "--quiet"]


@pytest.mark.timeout(180)
def test_stragglers_trace_is_the_same_over_two_ranks(tmp_path):
    alone, mpi = tmp_path / "inprocess.json", tmp_path / "mpi2.json"
    assert simdist_main([*ARGS, "--trace", str(alone)]) == 0
    proc = mpi_simdist(2, [*ARGS, "--trace", str(mpi)])
    assert "mpi, 2 rank(s)" in proc.stdout
    assert b'"straggler"' in alone.read_bytes()
    assert mpi.read_bytes() == alone.read_bytes()
