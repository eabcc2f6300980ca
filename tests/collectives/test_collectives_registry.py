"""The all-reduce records: options checked against the algorithm, one check of ``pieces``,
closed forms (any num_ps, hierarchical on its machines), explicit hierarchical groups, and
every record consistent and runnable."""

import inspect

import numpy as np
import pytest

from simdist import Hardware, HardwareCatalog, Layout, Phantom, simulate
from simdist.commands.cli import main as simdist_main
from simdist.collectives import (ALGORITHMS, ALL_REDUCE, CollectiveError, all_reduce,
                                 all_reduce_time, formulas, reduce_scatter)
from simdist.collectives.registry import COMMON
from simdist.collectives.sweep import sweep
from simdist.base.errors import InvalidArgumentError

HW = Hardware.from_catalog(HardwareCatalog.default(), "cpu")


def took(p, algorithm, value, hardware=HW, **options):
    """The latest return time of one all-reduce over p workers, and every member's result."""
    def main(ctx):
        out = yield from all_reduce(ctx, range(p), value(ctx), algorithm=algorithm, **options)
        return ctx.now, out

    res = simulate({"worker": p}, main, hardware=hardware, trace=False)
    return max(t for t, _ in res.returns.values()), [v for _, v in res.returns.values()]


@pytest.mark.parametrize("algorithm, option, takes", [
    ("recursive-doubling", {"pieces": 2}, "it takes no options"),
    ("ring", {"num_ps": 2}, "it takes pieces"),
    ("ps", {"pieces": 4}, "it takes num_ps, placement"),
    ("hierarchical", {"num_ps": 1}, "it takes pieces, groups"),
])
def test_an_option_the_algorithm_does_not_take_is_an_error(algorithm, option, takes):
    (key, value), = option.items()
    with pytest.raises(InvalidArgumentError) as error:
        took(2, algorithm, lambda ctx: np.ones(4), **option)
    assert str(error.value) == (f"{key}={value}: the {algorithm} all-reduce does not take "
                                f"{key}; {takes}")


def test_run_allreduce_rejects_an_option_the_algorithm_does_not_take(capsys):
    assert simdist_main(["run", "allreduce", "--algorithm", "recursive-doubling",
                         "--pieces", "2", "--quiet"]) == 2
    assert ("--pieces 2: the recursive-doubling all-reduce does not take pieces; it takes no "
            "options") in capsys.readouterr().err
    assert simdist_main(["run", "allreduce", "--algorithm", "ring", "--num-ps", "2"]) == 2
    assert "--num-ps 2: the ring all-reduce does not take num_ps; it takes pieces" in \
        capsys.readouterr().err


def test_run_allreduce_reports_the_ps_closed_form_for_any_num_ps(capsys):
    assert simdist_main(["run", "allreduce", "--algorithm", "ps", "-p", "6", "--num-ps", "2",
                         "--phantom"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("closed form (10gbe: ")
    assert abs(float(line.rsplit("(", 1)[1].rstrip("%)"))) <= 1.0


def test_run_allreduce_says_when_there_is_no_closed_form(capsys):
    assert simdist_main(["run", "allreduce", "--algorithm", "ring", "--tasks-per-machine",
                         "2", "--phantom"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "closed form: none for ring with 2 task(s) per machine")


def test_run_allreduce_reports_the_hierarchical_closed_form_on_its_machines(capsys):
    assert simdist_main(["run", "allreduce", "--algorithm", "hierarchical", "-p", "8",
                         "--tasks-per-machine", "4", "--phantom"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("closed form (10gbe: ") and "; shm: " in line
    assert abs(float(line.rsplit("(", 1)[1].rstrip("%)"))) <= 1.0


@pytest.mark.parametrize("run", [
    lambda pieces: lambda ctx: all_reduce(ctx, range(2), np.ones(4), pieces=pieces),
    lambda pieces: lambda ctx: reduce_scatter(ctx, range(2), np.ones(4), pieces=pieces),
    lambda pieces: lambda ctx: all_reduce(ctx, range(2), np.ones(4), algorithm="binary-tree",
                                          pieces=pieces),
    lambda pieces: lambda ctx: all_reduce(ctx, range(2), np.ones(4),
                                          algorithm="double-binary-tree", pieces=pieces),
    lambda pieces: lambda ctx: all_reduce(ctx, range(2), np.ones(4), algorithm="hierarchical",
                                          pieces=pieces),
], ids=["ring", "reduce-scatter", "binary-tree", "double-binary-tree", "hierarchical"])
@pytest.mark.parametrize("pieces", [0, -1, True, 2.0, "2"])
def test_every_collective_checks_pieces_alike(run, pieces):
    with pytest.raises(InvalidArgumentError,
                       match=rf"pieces must be an int >= 1 \(pipelining\), got {pieces!r}"):
        simulate({"worker": 2}, run(pieces), hardware=HW, trace=False)


@pytest.mark.parametrize("p, num_ps", [(6, 2), (6, 3), (5, 4), (8, 5)])
def test_ps_closed_form_holds_for_any_number_of_servers(p, num_ps):
    a, B = HW.network.latency_ns, HW.network.bandwidth
    for n in (8, 64 << 10, 4 << 20):
        t, _ = took(p, "ps", lambda ctx: Phantom(n), num_ps=num_ps)
        assert t == pytest.approx(
            formulas.parameter_server(p, n, a, B, num_ps, o=HW.network.message_ns), rel=0.01)


@pytest.mark.parametrize("per_machine, p, pieces", [(2, 6, 4), (4, 8, 2), (3, 7, 1)])
def test_hierarchical_closed_form_holds_with_pipelining_on_full_machines(per_machine, p,
                                                                         pieces):
    hw = Hardware.from_catalog(HardwareCatalog.default(), "cpu", Layout(per_machine))
    n = 4 << 20
    t, _ = took(p, "hierarchical", lambda ctx: Phantom(n), hw, pieces=pieces)
    assert t == pytest.approx(ALGORITHMS["hierarchical"].closed_form(p, n, hw, pieces=pieces),
                              rel=0.01)


def test_hierarchical_has_no_closed_form_for_pipelined_uneven_machines_or_own_groups():
    hw = Hardware.from_catalog(HardwareCatalog.default(), "cpu", Layout(2))
    record = ALGORITHMS["hierarchical"]
    assert record.closed_form(5, 1024, hw, pieces=2) is None
    assert record.closed_form(4, 1024, hw, groups=[[0, 1], [2, 3]]) is None
    with pytest.raises(InvalidArgumentError, match="has no closed form over one kind of link"):
        all_reduce_time("hierarchical", 4, 1024, 1000, 10**9)


def test_hierarchical_takes_explicit_groups():
    p = 5
    vals = [np.full(6, 10 ** i, np.int64) for i in range(p)]
    groups = [[4, 0], [1, 2, 3]]

    def main(ctx):
        return (yield from all_reduce(ctx, range(p), vals[ctx.order], algorithm="hierarchical",
                                      groups=groups))

    res = simulate({"worker": p}, main, hardware=HW)
    for value in res.returns.values():
        np.testing.assert_array_equal(value, np.sum(vals, axis=0))
    # two leaders (worker:4 and worker:1): the only ring between them
    ring = {f.src_pid for f in res.trace.flows if f.name.startswith("ring")}
    assert ring == {"worker:4", "worker:1"}


def test_hierarchical_groups_must_hold_every_member_once():
    def main(ctx):
        return (yield from all_reduce(ctx, range(3), np.ones(2), algorithm="hierarchical",
                                      groups=[[0, 1], [1]]))

    with pytest.raises(CollectiveError, match=r"groups \[\[0, 1\], \[1\]\] must be non-empty "
                                              r"and hold every member"):
        simulate({"worker": 3}, main, hardware=HW)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_every_record_is_consistent(name):
    record = ALGORITHMS[name]
    assert record.name == name and ALL_REDUCE[name] is record.function
    assert record.summary and "\n" not in record.summary
    parameters = inspect.signature(record.function).parameters
    assert list(parameters)[:4] == ["ctx", "members", "value", "op"] and "device" in parameters
    assert record.options == {k: v.default for k, v in parameters.items() if k not in COMMON}
    assert record.formula is None or record.layout_formula is None
    for p in (2, 3, 8):
        record.check_options(record.sweep_options(p))
        for options in record.checked_options(p):
            record.check_options(options)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_every_record_runs_with_its_sweep_options_and_has_a_closed_form(name):
    rows = sweep("cpu", p=4, sizes=[8, 1 << 20], algorithms=[name])
    assert [r["bytes"] for r in rows] == [8, 1 << 20]
    record = ALGORITHMS[name]
    hw = Hardware.from_catalog(HardwareCatalog.default(), "cpu",
                               Layout(record.tasks_per_machine))
    for options in record.checked_options(4):
        assert record.closed_form(4, 1 << 20, hw, **options) > 0
