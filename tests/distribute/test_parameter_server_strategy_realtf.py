"""Shard layouts against real TF 2.21: the same variables, created in the same order under a
real in-process ParameterServerStrategy with the same partitioner, get the same shard names,
devices and shapes in simdist (one real cluster for the module, ~25 s)."""

import numpy as np
import pytest

from simdist import simulate
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
from simdist.distribute.server import InProcessCluster
from simdist.distribute.sharded_variable import MaxSizePartitioner

pytestmark = pytest.mark.realtf

VARIABLES = [("embedding", (10, 4), "float32"), ("bias", (), "float32"),
             ("kernel", (7, 3), "float32"), ("rows", (5,), "float64")]
PARTITIONER = ("MaxSizePartitioner", {"max_shard_bytes": 36})
NUM_PS = 3


def _simdist_layout():
    cluster = InProcessCluster()

    def main(ctx):
        if ctx.task_type != "chief":
            return cluster.server(ctx).join()
        return chief(ctx)

    def chief(ctx):
        strategy = ParameterServerStrategy(ctx, cluster.resolver(ctx),
                                           MaxSizePartitioner(**PARTITIONER[1]))
        layout = {}
        with strategy.scope():
            for name, shape, dtype in VARIABLES:
                v = strategy.variable(name, np.zeros(shape, dtype))
                layout[name] = [[p.name, p.device, list(p.shape)]
                                for p in getattr(v, "variables", [v])]
        return layout
        yield

    jobs = {"chief": 1, "worker": 1, "ps": NUM_PS}
    return simulate(jobs, main, trace=False).returns["chief:0"]


@pytest.fixture(scope="module")
def real_layout():
    from realdist.distribute.parameter_server import shard_layout

    return shard_layout(VARIABLES, PARTITIONER, workers=1, ps=NUM_PS)


def test_shard_names_devices_and_shapes_match_real_tf(real_layout):
    mine = _simdist_layout()
    assert mine == real_layout
    # the layout is worth comparing: sharded, round robin over three ps, uneven shards
    assert len(real_layout["embedding"]) > 1
    assert {d for parts in real_layout.values() for _, d, _ in parts} == {
        f"/job:ps/replica:0/task:{i}/device:CPU:0" for i in range(NUM_PS)}
