"""data_parallel with a zoo model and lognormal stragglers gives the byte-identical trace in
one process and over 2 MPI ranks: each worker's draws come from its own seeded generator."""

import pytest

from tests.conftest import trace_over_ranks

pytestmark = pytest.mark.mpi

ARGS = ["run", "data_parallel", "--model", "mobilenet_v2", "--workers", "4", "--steps", "3",
        "--stragglers", "lognormal:0.4", "--seed", "5", "--quiet"]


@pytest.mark.timeout(180)
def test_stragglers_trace_is_the_same_over_two_ranks(tmp_path):
    assert b'"straggler"' in trace_over_ranks(ARGS, tmp_path)
