"""Binary tree and double binary tree all-reduce: numpy's values, bit-identical results on
every member, simulated times equal to the closed forms, clear errors, trace spans."""

import numpy as np
import pytest

from simdist import Hardware, HardwareCatalog, Phantom, simulate
from simdist.collectives import (ALGORITHMS, ALL_REDUCE, CollectiveError, ReduceOp, all_reduce,
                                 all_reduce_time, formulas)
from simdist.collectives.tree import binary_tree_all_reduce, double_binary_tree_all_reduce
from simdist.base.errors import InvalidArgumentError

from tests.conftest import run_on_workers

HW = Hardware.from_catalog(HardwareCatalog.default(), "cpu")
A, B, O = HW.network.latency_ns, HW.network.bandwidth, HW.network.message_ns
TREES = {"binary-tree": binary_tree_all_reduce,
         "double-binary-tree": double_binary_tree_all_reduce}
FORMULA = {"binary-tree": formulas.binary_tree,
           "double-binary-tree": formulas.double_binary_tree}
NUMPY = {ReduceOp.SUM: np.sum, ReduceOp.MEAN: np.mean, ReduceOp.MAX: np.max,
         ReduceOp.MIN: np.min}




def ints(p, shape, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-1000, 1000, shape).astype(np.int64) for _ in range(p)]


@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("p", range(1, 10))
@pytest.mark.parametrize("pieces", [1, 4])
def test_sum_of_ints_is_exact_on_every_member(algorithm, p, pieces):
    vals = ints(p, (3, 7), seed=p)  # 21 elements: divisible by neither p nor the pieces
    out, _ = run_on_workers(p, lambda ctx: TREES[algorithm](ctx, range(p), vals[ctx.order],
                                                 pieces=pieces))
    expected = np.sum(vals, axis=0)
    for value, _ in out:
        assert value.shape == (3, 7) and value.dtype == np.int64
        np.testing.assert_array_equal(value, expected)


@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("op", list(ReduceOp))
@pytest.mark.parametrize("p", [5, 6])
def test_every_reduce_op_matches_numpy_with_identical_floats(algorithm, op, p):
    rng = np.random.default_rng(7)
    vals = [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(p)]
    out, _ = run_on_workers(p, lambda ctx: TREES[algorithm](ctx, range(p), vals[ctx.order], op,
                                                 pieces=3))
    expected = NUMPY[op](np.stack(vals), axis=0)
    results = [v for v, _ in out]
    for value in results:
        assert value.shape == (4, 5)
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)
    for value in results[1:]:  # each half is finalized once, by its root: same bits
        np.testing.assert_array_equal(value, results[0])


@pytest.mark.parametrize("algorithm", TREES)
def test_max_min_of_ints_exact_and_mean_divides_once(algorithm):
    p = 7
    vals = ints(p, (10,), seed=1)
    for op, expected in [("max", np.max(vals, axis=0)), ("min", np.min(vals, axis=0))]:
        out, _ = run_on_workers(p, lambda ctx: TREES[algorithm](ctx, range(p), vals[ctx.order], op,
                                                     pieces=3))
        for value, _ in out:
            np.testing.assert_array_equal(value, expected)
    out, _ = run_on_workers(p, lambda ctx: TREES[algorithm](ctx, range(p), vals[ctx.order], "mean"))
    for value, _ in out:
        np.testing.assert_allclose(value, np.mean(vals, axis=0))


@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("p", [1, 2, 3, 6, 9])
def test_phantoms_of_any_size(algorithm, p):
    for n, pieces in [(1001, 1), (1001, 4), (3, 8)]:
        out, _ = run_on_workers(p, lambda ctx: TREES[algorithm](ctx, range(p), Phantom(n),
                                                     ReduceOp.MEAN, pieces=pieces))
        assert [v for v, _ in out] == [Phantom(n)] * p


@pytest.mark.parametrize("algorithm", TREES)
def test_one_member_gets_a_private_finalized_copy(algorithm):
    value = np.arange(6, dtype=np.int64).reshape(2, 3)
    out, _ = run_on_workers(1, lambda ctx: TREES[algorithm](ctx, [0], value, "mean"))
    result = out[0][0]
    assert result is not value and out[0][1] == 0
    np.testing.assert_array_equal(result, value)
    result[0, 0] = 99
    assert value[0, 0] == 0


@pytest.mark.parametrize("algorithm", TREES)
def test_results_are_private_buffers_even_in_process(algorithm):
    p = 5

    def body(ctx):
        out = yield from TREES[algorithm](ctx, range(p), np.ones(6), pieces=2)
        out += ctx.order * 100  # must not change what the other members hold
        yield ctx.timeout(10)
        return out

    out, _ = run_on_workers(p, body)
    assert [v[0][0] for v in out] == [5.0, 105.0, 205.0, 305.0, 405.0]


@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("pieces", [1, 4])
@pytest.mark.parametrize("p", [2, 3, 4, 7, 8, 15, 16])
@pytest.mark.parametrize("n", [8, 64 << 10, 4 << 20])
def test_simulated_time_equals_the_closed_form(algorithm, pieces, p, n):
    out, _ = run_on_workers(p, lambda ctx: TREES[algorithm](ctx, range(p), Phantom(n),
                                                            pieces=pieces))
    took = max(t for _, t in out)
    assert took == pytest.approx(FORMULA[algorithm](p, n, A, B, pieces, O), rel=0.01)


@pytest.mark.parametrize("algorithm", TREES)
def test_closed_form_holds_for_float32_arrays_and_many_pieces(algorithm):
    p, n = 7, 64 << 10
    vals = [np.full(n // 4, i, np.float32) for i in range(p)]
    for pieces in (1, 16):
        out, _ = run_on_workers(p, lambda ctx: all_reduce(ctx, range(p), vals[ctx.order],
                                               algorithm=algorithm, pieces=pieces))
        took = max(t for _, t in out)
        assert took == pytest.approx(all_reduce_time(algorithm, p, n, A, B, O, pieces=pieces),
                                     rel=0.01)
        assert all(v[0] == 21.0 for v, _ in out)


def test_trees_trade_latency_against_bandwidth():
    def took(algorithm, p, n, **options):
        out, _ = run_on_workers(p, lambda ctx: all_reduce(ctx, range(p), Phantom(n),
                                               algorithm=algorithm, **options))
        return max(t for _, t in out)

    # small values, many members: 2 log2(p) latencies beat the ring's 2(p-1)
    assert took("binary-tree", 16, 8) < took("ring", 16, 8) / 3
    assert took("double-binary-tree", 16, 8) < took("ring", 16, 8) / 3
    # a large value: pipelining pays, and the double tree halves the data per level
    n = 4 << 20
    single = took("binary-tree", 15, n)
    assert took("binary-tree", 15, n, pieces=16) < single / 2
    assert took("double-binary-tree", 15, n) < 0.5 * single
    assert took("double-binary-tree", 16, n, pieces=16) < took("binary-tree", 16, n,
                                                               pieces=16)


@pytest.mark.parametrize("algorithm", TREES)
def test_mismatched_shapes_name_both_participants(algorithm):
    def body(ctx):
        value = np.ones(8 if ctx.order == 2 else 12, np.float32)
        return (yield from all_reduce(ctx, range(3), value, algorithm=algorithm))

    with pytest.raises(CollectiveError, match=r"worker:\d sent shape .* where worker:\d "
                                              r"expected shape") as err:
        run_on_workers(3, body)
    message = str(err.value)
    assert "worker:2" in message and ("worker:0" in message or "worker:1" in message)

    def dtypes(ctx):
        value = np.ones(12, np.float64 if ctx.order == 1 else np.float32)
        return (yield from all_reduce(ctx, range(2), value, algorithm=algorithm))

    with pytest.raises(CollectiveError, match=r"worker:\d sent shape .* where worker:\d"):
        run_on_workers(2, dtypes)


@pytest.mark.parametrize("algorithm", TREES)
def test_bad_pieces_is_a_clear_error(algorithm):
    with pytest.raises(InvalidArgumentError, match="pieces must be an int >= 1"):
        run_on_workers(2, lambda ctx: TREES[algorithm](ctx, range(2), np.ones(2), pieces=0))


def test_registered_under_their_names():
    assert ALL_REDUCE["binary-tree"] is binary_tree_all_reduce
    assert ALL_REDUCE["double-binary-tree"] is double_binary_tree_all_reduce
    assert ALGORITHMS["binary-tree"].formula is formulas.binary_tree
    assert ALGORITHMS["double-binary-tree"].formula is formulas.double_binary_tree


def test_complete_tree_closed_forms():
    """The textbook forms for p = 2^(h+1) - 1 (see the formulas' docstrings)."""
    for h in (2, 3, 4):
        p, n = 2 ** (h + 1) - 1, 4 << 20
        for k in (1, 4):
            d = -(-(n // k) * 10**9 // B)
            assert formulas.binary_tree(p, n, A, B, k) == 2 * h * (A + 2 * d) + 4 * (k - 1) * d
        d = -(-(n // 2) * 10**9 // B)
        assert formulas.double_binary_tree(p, n, A, B) == 2 * h * A + (4 * h - 1) * d


def _collective_spans(res, task):
    return sorted((s for s in res.trace.spans if s.pid == task and s.lane == "collective"),
                  key=lambda s: s.start)


def test_binary_tree_trace_has_steps_on_the_collective_lane():
    p = 4
    _, res = run_on_workers(p, lambda ctx: binary_tree_all_reduce(ctx, range(p), Phantom(4096),
                                                       pieces=2), trace=True)
    for task in [f"worker:{i}" for i in range(p)]:
        spans = _collective_spans(res, task)
        assert spans and "collective" in res.trace.lanes(task)
        for s in spans:
            assert s.name.startswith("binary-tree ") and s.cat == "binary-tree"
            assert {"step", "chunk", "piece", "peer"} <= set(s.args)
        for before, after in zip(spans, spans[1:]):
            assert after.start >= before.end  # one step after another, no overlap
    # the root adds its two children's pieces: 2 pieces x 2 children, then broadcasts only
    root = _collective_spans(res, "worker:0")
    assert [(s.args["peer"], s.args["piece"]) for s in root] == [
        ("worker:1", 0), ("worker:2", 0), ("worker:1", 1), ("worker:2", 1)]
    # worker:3, a leaf under worker:1, only receives the result: two pieces at step 2h-1
    assert [(s.args["step"], s.args["peer"]) for s in _collective_spans(res, "worker:3")] \
        == [(3, "worker:1")] * 2


@pytest.mark.parametrize("p", [5, 8])
def test_double_binary_tree_trace_spans_do_not_overlap(p):
    _, res = run_on_workers(p, lambda ctx: double_binary_tree_all_reduce(
        ctx, range(p), Phantom(4096), pieces=3), trace=True)
    for task in [f"worker:{i}" for i in range(p)]:
        spans = _collective_spans(res, task)
        assert spans
        for before, after in zip(spans, spans[1:]):
            assert after.start >= before.end
        # every member ends with the half it is a leaf of, from its mirror (or its parents)
        assert spans[-1].args["phase"] in ("swap", "from parent")
