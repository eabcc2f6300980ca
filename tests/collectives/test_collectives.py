"""Collectives: values equal numpy's, simulated time equals the closed forms, clear errors."""

import numpy as np
import pytest

from simdist import Hardware, HardwareCatalog, Layout, Phantom, simulate
from simdist.collectives import (ALGORITHMS, ALL_REDUCE, CollectiveError, ReduceOp, all_gather,
                                 all_reduce, all_reduce_time, all_to_all, broadcast, formulas,
                                 pack, reduce, reduce_scatter, unpack)
from simdist.base.errors import InvalidArgumentError

from tests.conftest import run_on_workers

MINE = ["reduce-to-one", "ring", "recursive-doubling", "halving-doubling", "hierarchical", "ps"]
HW = Hardware.from_catalog(HardwareCatalog.default(), "cpu")
NUMPY = {ReduceOp.SUM: np.sum, ReduceOp.MEAN: np.mean, ReduceOp.MAX: np.max,
         ReduceOp.MIN: np.min}




def values_for(p, shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return [rng.integers(-50, 50, shape).astype(dtype) for _ in range(p)]
    return [rng.standard_normal(shape).astype(dtype) for _ in range(p)]


@pytest.mark.parametrize("algorithm", MINE)
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 7, 8])
def test_all_reduce_sum_of_ints_is_exact(algorithm, p):
    vals = values_for(p, (3, 7), np.int64, seed=p)  # 21 elements: not divisible by most p
    hw = Hardware.from_catalog(HardwareCatalog.default(), "cpu", Layout(tasks_per_machine=2))
    out, _ = run_on_workers(p, lambda ctx: all_reduce(ctx, range(p), vals[ctx.order],
                                           algorithm=algorithm), hw)
    expected = np.sum(vals, axis=0)
    for value, _ in out:
        assert value.shape == (3, 7) and value.dtype == np.int64
        np.testing.assert_array_equal(value, expected)


@pytest.mark.parametrize("algorithm", MINE)
@pytest.mark.parametrize("op", list(ReduceOp))
def test_every_reduce_op_matches_numpy(algorithm, op):
    p = 5
    vals = values_for(p, (11,), np.float32, seed=3)
    hw = Hardware.from_catalog(HardwareCatalog.default(), "cpu", Layout(tasks_per_machine=2))
    out, _ = run_on_workers(p, lambda ctx: all_reduce(ctx, range(p), vals[ctx.order], op,
                                           algorithm=algorithm), hw)
    expected = NUMPY[op](np.stack(vals), axis=0)
    results = [v for v, _ in out]
    for value in results:
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)
    for value in results[1:]:  # every member holds bit-identical floats
        np.testing.assert_array_equal(value, results[0])


@pytest.mark.parametrize("algorithm", [a for a in MINE if ALGORITHMS[a].formula])
@pytest.mark.parametrize("p", [2, 3, 4, 6, 8])
@pytest.mark.parametrize("n", [8, 64 << 10, 4 << 20])
def test_simulated_time_equals_the_closed_form(algorithm, p, n):
    a, B = HW.network.latency_ns, HW.network.bandwidth
    options = {"num_ps": p} if algorithm == "ps" else {}
    out, _ = run_on_workers(p, lambda ctx: all_reduce(ctx, range(p), Phantom(n),
                                                      algorithm=algorithm, **options))
    took = max(t for _, t in out)
    expected = all_reduce_time(algorithm, p, n, a, B, o=HW.network.message_ns, **options)
    if ALGORITHMS[algorithm].bound and p & (p - 1):
        assert took <= expected * 1.01
    else:
        assert took == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("pieces", [2, 4, 16])
@pytest.mark.parametrize("n", [64 << 10, 4 << 20])
def test_pipelined_ring_equals_its_closed_form_and_hides_latency(pieces, n):
    p = 4
    a, B = HW.network.latency_ns, HW.network.bandwidth
    out, _ = run_on_workers(p, lambda ctx: all_reduce(ctx, range(p), Phantom(n), pieces=pieces))
    took = max(t for _, t in out)
    o = HW.network.message_ns
    assert took == pytest.approx(formulas.ring(p, n, a, B, pieces, o), rel=0.01)
    if n == 64 << 10 and pieces <= 4:  # latency-bound sizes gain from pipelining
        assert took < formulas.ring(p, n, a, B, 1, o)
    elif n == 64 << 10:  # until each 1 KiB piece pays more in messages than it hides
        assert took > formulas.ring(p, n, a, B, 1, o)


def test_ps_with_one_server_and_sharded_servers():
    p, n = 4, 1 << 20
    a, B = HW.network.latency_ns, HW.network.bandwidth
    for num_ps in (1, 4):
        out, _ = run_on_workers(p, lambda ctx: all_reduce(ctx, range(p), Phantom(n), algorithm="ps",
                                               num_ps=num_ps))
        took = max(t for _, t in out)
        assert took == pytest.approx(
            formulas.parameter_server(p, n, a, B, num_ps, o=HW.network.message_ns), rel=0.01)


def test_hierarchical_sends_one_value_per_machine_over_the_network():
    p, n = 8, 1 << 20
    hw = Hardware.from_catalog(HardwareCatalog.default(), "v100-nvlink2-25gbe",
                               Layout(tasks_per_machine=4))
    _, res = run_on_workers(p, lambda ctx: all_reduce(ctx, range(p), Phantom(n),
                                           algorithm="hierarchical"), hw)
    took = res.end_time
    net, intra = hw.network, hw.intra_link
    expected = formulas.hierarchical(2, 4, n, intra.latency_ns, intra.bandwidth,
                                     net.latency_ns, net.bandwidth, intra_o=intra.message_ns,
                                     net_o=net.message_ns)
    assert took == pytest.approx(expected, rel=0.01)
    network_flows = [f for f in res.trace.flows if f.args["link"] == net.name]
    assert len(network_flows) == 2 * 2 * (2 - 1)  # a 2-member ring between the machines
    _, flat = run_on_workers(p, lambda ctx: all_reduce(ctx, range(p), Phantom(n),
                                                       algorithm="ring"), hw)
    assert took < flat.end_time  # the ring crosses the slow network 8 times per step


def test_ring_trace_shows_2_p_minus_1_steps_with_step_chunk_and_peer():
    p = 4
    _, res = run_on_workers(p, lambda ctx: all_reduce(ctx, range(p), np.ones(1000, np.float32)))
    for task in ("worker:0", "worker:3"):
        steps = [s for s in res.trace.spans if s.pid == task and s.lane == "collective"]
        assert [s.args["step"] for s in steps] == list(range(2 * (p - 1)))
        assert {s.args["peer"] for s in steps} == {f"worker:{(int(task[-1]) - 1) % p}"}
        assert all("chunk" in s.args for s in steps)
    sent = [f for f in res.trace.flows if f.src_pid == "worker:1"]
    assert len(sent) == 2 * (p - 1)


def test_reduce_scatter_all_gather_broadcast_reduce_and_all_to_all():
    p = 3
    vals = values_for(p, (10,), np.int32)
    total = np.sum(vals, axis=0)

    def body(ctx):
        rs = yield from reduce_scatter(ctx, range(p), vals[ctx.order])
        ag = yield from all_gather(ctx, range(p), vals[ctx.order][:2])
        bc = yield from broadcast(ctx, range(p), vals[1] if ctx.order == 1 else None, root=1)
        rd = yield from reduce(ctx, range(p), vals[ctx.order], ReduceOp.MAX, root="worker:2")
        blocks = [np.full(ctx.order + 1, 10 * ctx.order + j) for j in range(p)]
        a2a = yield from all_to_all(ctx, range(p), blocks)
        return rs, ag, bc, rd, a2a

    out, _ = run_on_workers(p, body)
    for r, ((rs, ag, bc, rd, a2a), _) in enumerate(out):
        np.testing.assert_array_equal(rs, np.array_split(total, p)[r])
        np.testing.assert_array_equal(ag, np.concatenate([v[:2] for v in vals]))
        np.testing.assert_array_equal(bc, vals[1])
        if r == 2:
            np.testing.assert_array_equal(rd, np.max(vals, axis=0))
        else:
            assert rd is None
        assert [b.tolist() for b in a2a] == [[10 * s + r] * (s + 1) for s in range(p)]


def test_results_are_private_buffers_even_in_process():
    p = 3

    def body(ctx):
        out = yield from all_reduce(ctx, range(p), np.ones(4), algorithm="reduce-to-one")
        out += ctx.order * 100  # must not change what the other members hold
        yield ctx.timeout(10)
        return out

    out, _ = run_on_workers(p, body)
    assert [v[0][0] for v in out] == [3.0, 103.0, 203.0]


def test_packing_round_trip_and_fewer_latencies():
    rng = np.random.default_rng(0)
    tensors = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,), (2, 2, 2), (7,)]]
    packs, spec = pack(tensors, num_packs=2)
    assert len(packs) == 2 and sum(x.size for x in packs) == sum(t.size for t in tensors)
    for a, b in zip(unpack(packs, spec), tensors):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(InvalidArgumentError, match="num_packs=9"):
        pack(tensors, num_packs=9)

    p, sizes = 4, [Phantom(4096)] * 16

    def separate(ctx):
        for t in sizes:
            yield from all_reduce(ctx, range(p), t)

    def packed(ctx):
        bufs, _ = pack(sizes, num_packs=1)
        yield from all_reduce(ctx, range(p), bufs[0])

    _, slow = run_on_workers(p, separate)
    _, fast = run_on_workers(p, packed)
    assert fast.end_time < slow.end_time / 5


def test_mismatched_shapes_name_both_participants():
    def body(ctx):
        value = np.ones(8 if ctx.order == 2 else 12, np.float32)
        return (yield from all_reduce(ctx, range(3), value))

    with pytest.raises(CollectiveError, match=r"worker:2 sent .* where worker:0 expected"):
        run_on_workers(3, body)

    def dtypes(ctx):
        value = np.ones(12, np.float64 if ctx.order == 1 else np.float32)
        return (yield from all_reduce(ctx, range(2), value, algorithm="reduce-to-one"))

    with pytest.raises(CollectiveError, match="worker:1 sent shape .*float64"):
        run_on_workers(2, dtypes)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(InvalidArgumentError, match="unknown all-reduce algorithm 'rign'"):
        run_on_workers(2, lambda ctx: all_reduce(ctx, range(2), np.ones(2), algorithm="rign"))
    with pytest.raises(InvalidArgumentError, match="unknown reduce op 'prod'"):
        run_on_workers(2, lambda ctx: all_reduce(ctx, range(2), np.ones(2), op="prod"))
    with pytest.raises(CollectiveError, match="worker:2 calls it but is not one of its members"):
        run_on_workers(3, lambda ctx: all_reduce(ctx, [0, 1], np.ones(2)))
    with pytest.raises(InvalidArgumentError, match="not a numpy array"):
        run_on_workers(2, lambda ctx: all_reduce(ctx, range(2), [1, 2]))
    with pytest.raises(CollectiveError, match="num_ps=5"):
        run_on_workers(2, lambda ctx: all_reduce(ctx, range(2), np.ones(2), algorithm="ps", num_ps=5))


def test_every_algorithm_is_registered():
    assert set(MINE) <= set(ALL_REDUCE)


def test_devices_of_tasks_take_part_as_members():
    """2 tasks x 4 GPUs: each device runs a replica process; the local link is NVLink."""
    hw = Hardware.from_catalog(HardwareCatalog.default(), "v100-nvlink2-25gbe",
                               Layout(tasks_per_machine=1, devices_per_task=4))
    members = [(t, d) for t in ("worker:0", "worker:1") for d in range(4)]
    vals = {m: np.full(1000, 10 * i + 1, np.int64) for i, m in enumerate(members)}
    n = 1000 * 8

    def main(ctx):
        def replica(d, algorithm):
            return (yield from all_reduce(ctx, members, vals[(ctx.name, d)],
                                          algorithm=algorithm, device=d))

        results = {}
        for algorithm in ("hierarchical", "ring"):
            start = ctx.now
            procs = [ctx.process(replica(d, algorithm), f"GPU:{d}") for d in range(4)]
            done = yield ctx.env.all_of(procs)
            results[algorithm] = ([v.tolist() for v in done.values()], ctx.now - start)
        return results

    res = simulate({"worker": 2}, main, hardware=hw)
    expected = np.sum(list(vals.values()), axis=0).tolist()
    for task_results in res.returns.values():
        for values, _ in task_results.values():
            assert values == [expected] * 4
    took = max(r["hierarchical"][1] for r in res.returns.values())
    net, intra = hw.network, hw.intra_link
    assert took == pytest.approx(formulas.hierarchical(
        2, 4, n, intra.latency_ns, intra.bandwidth, net.latency_ns, net.bandwidth,
        intra_o=intra.message_ns, net_o=net.message_ns), rel=0.01)
    lanes = res.trace.lanes("worker:1")
    assert {"GPU:0 collective", "GPU:3 collective", "GPU:1 nvlink tx", "GPU:0 nvlink rx"} <= \
        set(lanes)
    assert res.trace.metadata["machines"] == 2


def test_ps_servers_spread_over_machines_before_doubling_up():
    """With 4 tasks a machine, 'spread' serves 4 shards from 4 machines (as one ps task a
    machine would), 'first' from machine 0 alone; with a task a machine they are the same."""
    from simdist.collectives.ps import ps_servers

    four_a_machine = [k // 4 for k in range(16)]
    assert ps_servers(four_a_machine, 4) == [0, 4, 8, 12]
    assert ps_servers(four_a_machine, 6) == [0, 4, 8, 12, 1, 5]
    assert ps_servers(four_a_machine, 4, "first") == [0, 1, 2, 3]
    assert ps_servers(list(range(8)), 3) == ps_servers(list(range(8)), 3, "first") == [0, 1, 2]
    with pytest.raises(CollectiveError, match="placement='middle': expected one of spread"):
        ps_servers(four_a_machine, 2, "middle")


@pytest.mark.parametrize("placement, machine_0_busy", [("spread", False), ("first", True)])
def test_ps_placement_decides_which_nics_carry_the_shards(placement, machine_0_busy):
    hardware = Hardware.from_catalog(HardwareCatalog.default(), "cpu", Layout(tasks_per_machine=4))
    n = 1 << 20
    runs, result = run_on_workers(16, lambda ctx: all_reduce(
        ctx, range(16), np.full(n // 4, float(ctx.order), np.float32), algorithm="ps",
        num_ps=4, placement=placement), hardware=hardware)
    expected = np.full(n // 4, float(sum(range(16))), np.float32)
    assert all(np.array_equal(value, expected) for value, _ in runs)
    ingress = {}
    for s in result.trace.spans:
        if s.pid.endswith(" NIC") and s.lane == "ingress":
            ingress[s.pid] = ingress.get(s.pid, 0) + s.args["bytes"]
    assert len(ingress) == 4, ingress
    busiest = max(ingress, key=ingress.get)
    # 'first' puts all 4 servers on machine 0: its NIC takes every push
    assert (busiest == "machine:0 NIC" and ingress[busiest] > 2 * min(ingress.values())) \
        == machine_0_busy, ingress
