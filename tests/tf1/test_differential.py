"""simdist against real TensorFlow, snippet by snippet (``tests/differential.py``): TF1 graph
snippets (names, requested and effective devices, colocation, dtypes, values, error classes),
a seeded fuzz of device strings, merges, ClusterSpecs, TF_CONFIGs and the chief rule, and
uneven distributed datasets; then meta-tests showing that each comparison fails when simdist
is broken on purpose. ``pytest -m differential`` runs them alone; being ``realtf`` too, the
quick loop (``make test-fast``) leaves them out."""

import dataclasses

import numpy as np
import pytest

from simdist.hardware.cluster import ClusterSpec
from simdist.hardware.tf_config import TFConfig
from simdist.hardware.device_spec import DeviceSpec
from simdist.distribute import Strategy
from simdist.base.errors import InvalidArgumentError
from simdist.graph import optimizers, registry, variables
from simdist.graph.graph import Graph
from simdist.graph.placement import Placer

from tests import differential as d

pytestmark = [pytest.mark.differential, pytest.mark.realtf, pytest.mark.timeout(300),
              pytest.mark.usefixtures("fresh_tf1")]


@pytest.fixture(scope="module")
def real_graphs():
    return d.real_graphs()


@pytest.fixture(scope="module")
def eager():
    cases = d.eager_cases()
    return cases, d.real_eager(cases)


def _snippet_id(fn):
    return fn.__name__


@pytest.mark.parametrize("snippet", d.GRAPH_SNIPPETS, ids=_snippet_id)
def test_graph_snippet_behaves_as_in_tf(snippet, real_graphs):
    assert d.compare_graph(d.sim_graph(snippet), real_graphs[snippet.__name__]) == []


@pytest.mark.parametrize("kind", ["devices", "merges", "clusters", "tf_configs", "chiefs",
                                  "datasets"])
def test_seeded_fuzz_agrees_with_tf(kind, eager):
    cases, real = eager
    sim = d.sim_eager(cases)
    assert d.compare_cases(kind, cases[kind], sim[kind], real[kind]) == []
    agreed = sum(s[0] == r[0] == "ok" for s, r in zip(sim[kind], real[kind]))
    assert agreed >= len(cases[kind]) // 4, f"too few {kind} accepted by both: {agreed}"


def test_uneven_per_worker_datasets_as_tf():
    real = d.real_uneven_workers()
    assert real == [[[[0, 1]], [[2, 3]], [[4]]], [[[100]], [[]], [[]]]]
    assert d.sim_uneven_workers() == real


# -- meta-tests: every comparison catches simdist broken on purpose ----------------------------


def _differs(snippet, real_graphs, field):
    found = d.compare_graph(d.sim_graph(snippet), real_graphs[snippet.__name__])
    assert any(field in problem for problem in found), found


def test_names_are_compared(real_graphs, monkeypatch):
    unique = Graph.unique_name

    def counts_twice(self, name, mark_as_used=True):  # item 1's bug: Variable_2, x_2
        out = unique(self, name, mark_as_used)
        return out[:-2] + "_2" if out.endswith("_1") else out
    monkeypatch.setattr(Graph, "unique_name", counts_twice)
    _differs(d.unique_names, real_graphs, "simdist has no such op")


def test_requested_devices_are_compared(real_graphs, monkeypatch):
    from simdist.graph.device_setter import _ReplicaDeviceChooser

    monkeypatch.setattr(_ReplicaDeviceChooser, "__init__", _merging_always(
        _ReplicaDeviceChooser.__init__))
    _differs(d.replica_device_setter_edge_cases, real_graphs, "requested device")


def _merging_always(init):
    def wrapped(self, ps_tasks, ps_device, worker_device, merge_devices, ps_ops, strategy):
        init(self, ps_tasks, ps_device, worker_device, True, ps_ops, strategy)
    return wrapped


def test_colocation_is_compared(real_graphs, monkeypatch):
    monkeypatch.setattr("simdist.graph.graph._colocation_root", lambda op: None)
    _differs(d.colocated_ops_report_their_device, real_graphs, "colocation")


def test_effective_devices_are_compared(real_graphs, monkeypatch):
    place = Placer.place

    def all_on_cpu0(self, ops):
        placed = place(self, ops)
        for op, device in placed.items():
            placed[op] = device.replace("CPU:1", "CPU:0")
        return placed
    monkeypatch.setattr(Placer, "place", all_on_cpu0)
    _differs(d.initializers_run_where_their_variable_is, real_graphs, "placed on")


def test_dtypes_are_compared(real_graphs, monkeypatch):
    make = optimizers.Optimizer._non_slot

    def in_the_variables_dtype(self, name, initial_value, colocate_with):
        value = np.array(initial_value, colocate_with.dtype.as_numpy_dtype)
        return make(self, name, value, colocate_with)
    monkeypatch.setattr(optimizers.Optimizer, "_non_slot", in_the_variables_dtype)
    _differs(d.adam_state_as_tf_keeps_it, real_graphs, "dtype")


def test_values_are_compared(real_graphs, monkeypatch):
    good = registry.OP_DEFS["ApplyGradientDescent"]

    def twice(op, args, rt):
        var, lr, grad = args
        return good.compute(op, [var, 2 * lr, grad], rt)
    monkeypatch.setitem(registry.OP_DEFS, "ApplyGradientDescent",
                        dataclasses.replace(good, compute=twice))
    _differs(d.gradients_through_read_value, real_graphs, "run ")


def test_error_classes_are_compared(real_graphs, monkeypatch):
    def wrong_class(self, reader):
        raise InvalidArgumentError("uninitialized")
    monkeypatch.setattr(variables.Ref, "read", wrong_class)
    _differs(d.uninitialized_read, real_graphs, "error")


def _strict_index(index):  # the old rule: a string index is an error
    if not isinstance(index, int):
        raise InvalidArgumentError(f"task index {index!r} must be an int")
    return index


@pytest.mark.parametrize("kind, target, broken", [
    ("devices", (DeviceSpec, "to_string"), lambda self: "/device:CPU:0"),
    ("merges", (DeviceSpec, "make_merged_spec"), lambda self, other: self),
    ("clusters", (ClusterSpec, "__repr__"), lambda self: f"ClusterSpec({self.as_dict()!r})"),
    ("tf_configs", ("simdist.hardware.tf_config._task_index",), _strict_index),
    ("chiefs", (TFConfig, "is_chief"), property(lambda self: self.task_type == "chief")),
    ("datasets", (Strategy, "distribute_datasets_from_function"),
     lambda self, fn: iter(())),
])
def test_fuzz_comparisons_catch_a_broken_simdist(kind, target, broken, eager, monkeypatch):
    cases, real = eager
    monkeypatch.setattr(*target, broken)
    assert d.compare_cases(kind, cases[kind], d.sim_eager(cases)[kind], real[kind])


def test_uneven_comparison_catches_a_worker_that_stops_early(monkeypatch):
    def stops_early(self, dataset_fn):  # the old behaviour: a worker stops at its own end
        from simdist.distribute.strategy import DistributedBatch, InputContext
        from simdist.distribute.values import PerReplica

        ictx = InputContext(self._num_workers(), self._worker_index(),
                            self.num_replicas_in_sync)
        for x, y in dataset_fn(ictx):
            yield DistributedBatch((PerReplica([x]), PerReplica([y])), len(x))
    monkeypatch.setattr(Strategy, "distribute_datasets_from_function", stops_early)
    with pytest.raises(Exception, match="deadlock|blocked|wait"):
        d.sim_uneven_workers()

