"""simdist's ParameterServerStrategy: partitioners with TF 2.21's numbers, shard shapes and
devices as TF gives them, round-robin placement, ShardedVariable read / assign / lookup, and
each ps's load in the trace. (The partition numbers were read off real TF 2.21; the realtf
test in test_parameter_server_strategy_realtf.py compares whole layouts.)"""

import numpy as np
import pytest

from simdist import simulate
from simdist.distribute.cluster_coordinator import ClusterCoordinator
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
from simdist.distribute.server import InProcessCluster, SimpleClusterResolver
from simdist.distribute.sharded_variable import (FixedShardsPartitioner, MaxSizePartitioner,
                                                 IndexedSlices, MinSizePartitioner, ShardedVariable,
                                                 shard_offsets)
from simdist.base.errors import FailedPreconditionError, InvalidArgumentError

F32 = np.float32


# TF 2.21: partitioner(tf.TensorShape(shape), dtype) for these shapes and dtypes
@pytest.mark.parametrize("shape, dtype, fixed3, min16_4, max64, max64_2", [
    ((10, 4), F32, [3, 1], [4, 1], [3, 1], [2, 1]),
    ((3, 4), F32, [3, 1], [3, 1], [1, 1], [1, 1]),
    ((1000,), F32, [3], [4], [63], [2]),
    ((100, 64), F32, [3, 1], [4, 1], [100, 1], [2, 1]),
    ((7,), np.str_, [3], [4], [2], [2]),
    ((5, 2, 3), np.float64, [3, 1, 1], [4, 1, 1], [5, 1, 1], [2, 1, 1]),
    ((1,), F32, [1], [1], [1], [1]),
])
def test_partitioners_give_tf_numbers(shape, dtype, fixed3, min16_4, max64, max64_2):
    assert FixedShardsPartitioner(3)(shape, dtype) == fixed3
    assert MinSizePartitioner()(shape, dtype) == [1] * len(shape)  # 256 KiB, one shard
    assert MinSizePartitioner(min_shard_bytes=16, max_shards=4)(shape, dtype) == min16_4
    assert MaxSizePartitioner(64)(shape, dtype) == max64
    assert MaxSizePartitioner(64, max_shards=2)(shape, dtype) == max64_2


def test_bytes_per_string_sets_a_string_elements_size():
    assert MaxSizePartitioner(64, bytes_per_string=4)((7,), np.str_) == [1]
    assert MinSizePartitioner(16, max_shards=8, bytes_per_string=32)((7,), np.str_) == [7]


@pytest.mark.parametrize("make, message", [
    (lambda: FixedShardsPartitioner(2.0), "num_shards` must be an int, got 2.0"),
    (lambda: MinSizePartitioner(0), "min_shard_bytes` must be an int >= 1, got 0"),
    (lambda: MinSizePartitioner(max_shards=0), "max_shards` must be an int >= 1, got 0"),
    (lambda: MaxSizePartitioner(0), "max_shard_bytes` must be an int >= 1, got 0"),
    (lambda: MaxSizePartitioner(8, bytes_per_string=0), "bytes_per_string` must be"),
    (lambda: MaxSizePartitioner(8)((0, 4), F32), r"shape \(0, 4\) has no rows"),
    (lambda: FixedShardsPartitioner(2)((), F32), r"cannot partition a scalar"),
])
def test_bad_partitioners_say_what_is_wrong(make, message):
    with pytest.raises(InvalidArgumentError, match=message):
        make()


def test_the_first_shards_get_the_extra_rows():
    assert shard_offsets(10, 3) == [0, 4, 7, 10]
    assert shard_offsets(7, 3) == [0, 3, 5, 7]


def _on_chief(body, jobs=None, partitioner=None):
    """Run ``body(ctx, strategy, cluster)`` (a generator) on the chief of a cluster whose
    worker and ps tasks serve; returns its value and the trace."""
    jobs = jobs or {"chief": 1, "worker": 2, "ps": 2}
    cluster = InProcessCluster()

    def main(ctx):
        if ctx.task_type != "chief":
            return cluster.server(ctx).join()
        strategy = ParameterServerStrategy(ctx, cluster.resolver(ctx), partitioner)
        return body(ctx, strategy, cluster)

    result = simulate(jobs, main)
    return result.returns["chief:0"], result.trace


def test_variables_go_round_robin_and_shards_as_tf_places_them():
    # the same variables under real TF 2.21, FixedShardsPartitioner(3), two ps
    def body(ctx, strategy, cluster):
        with strategy.scope():
            a = strategy.variable("a", np.arange(20, dtype=F32).reshape(10, 2))
            b = strategy.variable("b", 1.0)
            c = strategy.variable("c", np.zeros(5, F32))
            d = strategy.variable("d", np.zeros((2, 3), F32))
        return [[(p.name, p.device, p.shape) for p in getattr(v, "variables", [v])]
                for v in (a, b, c, d)]
        yield

    layout, _ = _on_chief(body, partitioner=FixedShardsPartitioner(3))
    ps0, ps1 = "/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0"
    assert layout == [
        [("a/part_0:0", ps0, (4, 2)), ("a/part_1:0", ps1, (3, 2)), ("a/part_2:0", ps0, (3, 2))],
        [("b:0", ps1, ())],
        [("c/part_0:0", ps0, (2,)), ("c/part_1:0", ps1, (2,)), ("c/part_2:0", ps0, (1,))],
        [("d/part_0:0", ps1, (1, 3)), ("d/part_1:0", ps0, (1, 3))]]


def test_a_sharded_variable_acts_as_one_tensor():
    shards = []

    def body(ctx, strategy, cluster):
        with strategy.scope():
            a = strategy.variable("a", np.arange(20, dtype=F32).reshape(10, 2))
        assert isinstance(a, ShardedVariable) and a.name == "ShardedVariable"
        assert a.shape == (10, 2) and a.dtype == F32
        np.testing.assert_array_equal(a.numpy(), np.arange(20).reshape(10, 2))
        a.assign(np.ones((10, 2), F32))
        shards.extend(v.numpy() for v in a.variables)
        with pytest.raises(InvalidArgumentError, match=r"shape \(9, 2\) to a ShardedVariable "
                                                       r"of shape \(10, 2\)"):
            a.assign(np.ones((9, 2)))
        return True
        yield

    assert _on_chief(body, partitioner=FixedShardsPartitioner(3))[0]
    assert [s.shape for s in shards] == [(4, 2), (3, 2), (3, 2)]
    assert all((s == 1).all() for s in shards)


def _with_one_function(fn_of, partitioner=FixedShardsPartitioner(3)):
    """Schedule one function made by ``fn_of(strategy, variables)`` and fetch it."""
    def body(ctx, strategy, cluster):
        with strategy.scope():
            table = strategy.variable("table", np.arange(30, dtype=F32).reshape(10, 3))
        coordinator = ClusterCoordinator(strategy)
        value = coordinator.schedule(fn_of(strategy, table))
        got = yield from value.fetch()
        return got, table.numpy()

    return _on_chief(body, partitioner=partitioner)


def test_embedding_lookup_asks_each_shard_only_for_its_rows():
    def fn_of(strategy, table):
        def lookup():
            return (yield from strategy.embedding_lookup(table, np.array([[0, 9], [4, 0]])))
        return lookup

    (rows, _), trace = _with_one_function(fn_of)
    np.testing.assert_array_equal(rows, np.arange(30).reshape(10, 3)[[[0, 9], [4, 0]]])
    lookups = [s for s in trace.spans if s.cat == "ps" and s.name.startswith("lookup")]
    # rows 0, 0 from shard 0 (ps 0), row 4 from shard 1 (ps 1), row 9 from shard 2 (ps 0)
    assert sorted((s.pid, s.name) for s in lookups) == [
        ("ps:0", "lookup table/part_0"), ("ps:0", "lookup table/part_2"),
        ("ps:1", "lookup table/part_1")]
    assert sum(f.args["bytes"] for f in trace.flows if f.dst_pid == "chief:0") < 200


def test_update_applies_on_each_shards_ps():
    def fn_of(strategy, table):
        def step():
            values = yield from strategy.read([table])
            yield from strategy.extended.update({"t": table}, {"t": np.ones((10, 3), F32)},
                                                lambda v, g: v - g)
            return values[0].sum()
        return step

    (total, after), trace = _with_one_function(fn_of)
    assert total == sum(range(30))
    np.testing.assert_array_equal(after, np.arange(30).reshape(10, 3) - 1)
    updates = sorted(s.pid for s in trace.spans if s.name.startswith("update"))
    assert updates == ["ps:0", "ps:1"]  # one request per ps, with its shards


def test_a_sparse_update_sums_the_values_of_repeated_rows():
    # real TF 2.21: SGD(1.0) of table (10, 3) with IndexedSlices(values, [9, 0, 9]) subtracts
    # rows 1 and 3 of the values together from row 9 (ResourceScatterSub adds repeats)
    def fn_of(strategy, table):
        def step():
            values = np.array([[1, 1, 1], [2, 2, 2], [3, 3, 3]], F32)
            yield from strategy.extended.update(
                {"t": table}, {"t": IndexedSlices(values, np.array([9, 0, 9]))},
                lambda v, g: v - g)
        return step

    (_, after), trace = _with_one_function(fn_of)
    want = np.arange(30, dtype=F32).reshape(10, 3)
    want[9] -= 4
    want[0] -= 2
    np.testing.assert_array_equal(after, want)
    assert sorted(s.pid for s in trace.spans if s.name.startswith("scatter")) == ["ps:0"]


def test_each_ps_load_is_in_the_trace():
    def fn_of(strategy, table):
        def read():
            return (yield from strategy.read({"t": table}))["t"].shape
        return read

    (shape, _), trace = _with_one_function(fn_of)
    assert shape == (10, 3)
    load = {c.pid: c.values for c in trace.counters if c.name == "ps load"}
    assert load["ps:0"]["bytes_stored"] == 4 * 3 * 4 + 3 * 3 * 4  # shards 0 and 2
    assert load["ps:1"]["bytes_stored"] == 3 * 3 * 4
    assert load["ps:0"]["bytes_moved"] > load["ps:1"]["bytes_moved"] > 0


@pytest.mark.parametrize("jobs, message", [
    ({"chief": 1, "worker": 2}, r"There must be at least one ps: the cluster is"),
    ({"chief": 1, "ps": 2}, r"There must be at least one worker: the cluster is"),
])
def test_a_cluster_without_ps_or_workers_is_refused(jobs, message):
    def body(ctx, strategy, cluster):
        yield ctx.timeout(1)

    with pytest.raises(InvalidArgumentError, match=message):
        _on_chief(body, jobs=jobs)


def test_a_partitioner_asking_more_shards_than_rows_is_refused():
    def too_many(shape, dtype):
        return [shape[0] + 1] + [1] * (len(shape) - 1)

    def body(ctx, strategy, cluster):
        with strategy.scope():
            strategy.variable("w", np.zeros((3, 2), F32))
        yield ctx.timeout(1)

    with pytest.raises(InvalidArgumentError, match=r"asks for 4 shards of variable 'w', which "
                                                   r"has only 3 rows .*TensorFlow accepts this"):
        _on_chief(body, partitioner=too_many)


def test_variables_outside_scope_and_steps_outside_functions_are_refused():
    def body(ctx, strategy, cluster):
        with pytest.raises(InvalidArgumentError, match="inside `with strategy.scope\\(\\):`"):
            strategy.variable("w", np.zeros(3))
        with strategy.scope():
            w = strategy.variable("w", np.zeros(3))
        with pytest.raises(FailedPreconditionError, match="call it inside a function given to "
                                                          "ClusterCoordinator.schedule"):
            yield from strategy.read([w])
        return True

    assert _on_chief(body)[0]


def test_the_resolver_must_come_from_an_in_process_cluster():
    def main(ctx):
        with pytest.raises(InvalidArgumentError, match="SimpleClusterResolver of an "
                                                       "InProcessCluster"):
            ParameterServerStrategy(ctx, SimpleClusterResolver(ctx.cluster))
        return True
        yield

    assert simulate({"chief": 1, "worker": 1, "ps": 1}, main).returns["chief:0"]
