"""data_parallel's overlapped buckets give the byte-identical trace in one process and over
2 MPI ranks: parameter servers, whose buckets' all-reduces run at once (a process each), their
pushes crossing ranks as messages."""

import pytest

from tests.conftest import trace_over_ranks

pytestmark = pytest.mark.mpi

ARGS = ["run", "data_parallel", "--model", "mobilenet_v2", "--fusion-mb", "1", "--workers",
        "4", "--steps", "2", "--algorithm", "ps", "--num-ps", "2", "--seed", "3", "--quiet",
        "--profile", "v100-nvlink2-25gbe"]


@pytest.mark.timeout(180)
def test_overlapped_buckets_trace_is_the_same_over_two_ranks(tmp_path):
    assert b'"all-reduce bucket 9/9"' in trace_over_ranks(ARGS, tmp_path)
