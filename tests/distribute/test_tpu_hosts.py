"""TPUStrategy on a slice of several hosts (a v3-32 is 4 hosts of 8 cores): one task per
host, the values summed across hosts by messages, the all-reduce's time still the torus
formula; and the same trace, byte for byte, in one process and under mpiexec -n 1, 2, 4."""

import numpy as np
import pytest

from simdist.base.errors import InvalidArgumentError
from simdist.commands.cli import main as simdist_main
from simdist.distribute.tpu_strategy import slice_hosts
from simdist.training import simulate_exercise
from simdist.training.exercises import Exercise

from tests.conftest import mpi_simdist

ARGS = ["run", "tpu", "--model", "mlp", "--dataset", "digits", "--global-batch", "64",
        "--steps", "4", "--steps-per-execution", "2", "--replicas", "32", "--quiet"]


def _tpu(cores, **given):
    return Exercise(strategy="tpu", hardware="tpu-v3", devices_per_worker=cores,
                    model="mlp", dataset="digits", global_batch=64, steps=4, **given)


def test_a_slice_is_one_task_per_host():
    assert [slice_hosts(c) for c in (1, 2, 8, 16, 32, 128)] == [
        (1, 1), (1, 2), (1, 8), (2, 8), (4, 8), (16, 8)]
    with pytest.raises(InvalidArgumentError, match="a TPU slice of 12 cores spans hosts of 8 "
                                                   "cores .*expected a multiple of 8"):
        slice_hosts(12)
    with pytest.raises(InvalidArgumentError, match="a TPU slice of 3 cores"):
        slice_hosts(3)


@pytest.fixture(scope="module")
def v3_32():
    return simulate_exercise(_tpu(32, steps_per_execution=2))


def test_every_host_feeds_its_cores_and_the_hosts_agree(v3_32):
    spans = v3_32.trace.spans
    hosts = sorted({s.pid for s in spans if s.lane.startswith("TPU:")})
    assert hosts == ["worker:0", "worker:1", "worker:2", "worker:3"]
    assert v3_32.metadata["hosts"] == 4 and v3_32.exercise.num_replicas == 32
    for host in hosts:  # each host dispatches to its own 8 cores
        assert {s.lane for s in spans if s.pid == host and s.lane.startswith("TPU:")} == {
            f"TPU:{c}" for c in range(8)}
        assert sum(s.lane == "host loop" and s.pid == host for s in spans) == 2
    # the hosts' partial sums travel as messages: every host to every other, per all-reduce
    flows = [f for f in v3_32.trace.flows if f.name.startswith("TPU all-reduce")]
    assert len(flows) == 4 * 3 * 2 * 4  # 4 hosts x 3 others x (gradients, loss) x 4 steps


def test_the_hosts_train_as_one_slice_of_one_task_would(v3_32):
    # the same SGD as MirroredStrategy on 32 replicas: only the order of the sums differs
    mirrored = simulate_exercise(Exercise(strategy="mirrored", devices_per_worker=32,
                                          model="mlp", dataset="digits", global_batch=64,
                                          steps=4), trace=False)
    np.testing.assert_allclose(v3_32.losses, mirrored.losses, rtol=1e-5)
    # the all-reduce still takes the torus formula: on every host's core 0, each span of
    # the 4x4 torus lasts what one host's 2x2 formula gives for a 4x4 torus
    reduces = [s for s in v3_32.trace.spans if s.lane == "TPU:0" and s.cat == "collective"]
    assert len(reduces) == 4 * 2 * 4
    assert {s.args["topology"] for s in reduces} == {"4x4"}
    from simdist.distribute.tpu_strategy import torus_all_reduce_ns
    from simdist.hardware.catalog import LINKS

    ici = next(link for link in LINKS if link["name"] == "ici-v3")
    for s in reduces:
        assert s.dur == int(np.ceil(torus_all_reduce_ns(4, 4, s.args["bytes"],
                                                        ici["latency_ns"], ici["bandwidth"])))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("tpu") / "inprocess.json"
    assert simdist_main([*ARGS, "--trace", str(out)]) == 0
    return out.read_bytes()


@pytest.mark.mpi
@pytest.mark.timeout(180)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_the_hosts_of_a_slice_spread_over_ranks(reference, ranks, tmp_path):
    out = tmp_path / f"mpi{ranks}.json"
    proc = mpi_simdist(ranks, [*ARGS, "--trace", str(out)])
    assert f"mpi, {ranks} rank(s)" in proc.stdout
    assert len(reference) > 1000 and out.read_bytes() == reference
