"""Collectives on real data over MPI ranks: the values are numpy's sums on every task (the
ring's all-gather lands its chunks straight in the result buffer there), and the trace is the
one the in-process run writes."""

import pytest

from simdist.commands.cli import main as simdist_main

from tests.conftest import mpi_simdist

pytestmark = pytest.mark.mpi

CASES = [(2, ["--algorithm", "ring", "-p", "4", "--pieces", "3"]),
         (4, ["--algorithm", "ring", "-p", "5", "--size", "40004"]),
         (4, ["--algorithm", "double-binary-tree", "-p", "6", "--pieces", "2"]),
         (2, ["--algorithm", "hierarchical", "-p", "4", "--tasks-per-machine", "2"])]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("ranks,options", CASES, ids=lambda c: str(c))
def test_values_and_trace_over_mpi(ranks, options, tmp_path, capsys):
    proc = mpi_simdist(ranks, ["run", "allreduce", *options, "--trace", str(tmp_path / "mpi.json")])
    assert "values: every task holds the sum (ok)" in proc.stdout, proc.stdout
    assert simdist_main(["run", "allreduce", *options, "--quiet",
                         "--trace", str(tmp_path / "one.json")]) == 0
    assert (tmp_path / "mpi.json").read_bytes() == (tmp_path / "one.json").read_bytes()


def test_a_landing_buffer_is_used_only_for_the_one_receive_it_fits():
    import numpy as np

    from simdist import simulate
    from simdist.sim.network import MessageHeader

    seen = {}

    def main(ctx):
        if ctx.task_id == 0:
            ctx.send(1, "t", np.arange(4, dtype=np.float32))
            yield ctx.timeout(1)
            return None
        wrong_shape = np.zeros(3, np.float32)
        recv = ctx.recv(0, "t", into=wrong_shape)
        header = MessageHeader(0, 0, 1, 1, "t", 16, ("array", (("<f4", (4,)),)), None, None)
        seen["wrong shape"] = ctx.landing_buffer(header)
        recv.into = buf = np.zeros(4, np.float32)
        seen["fits"] = ctx.landing_buffer(header) is buf
        seen["only once"] = ctx.landing_buffer(header)
        msg = yield recv
        return msg.payload.tolist()

    res = simulate({"worker": 2}, main)
    assert res.returns["worker:1"] == [0.0, 1.0, 2.0, 3.0]  # in-process: as it was sent
    assert seen == {"wrong shape": None, "fits": True, "only once": None}
