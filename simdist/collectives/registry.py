"""The all-reduce algorithms by name: one record each.

``all_reduce``, ``simdist run allreduce``, ``simdist plot-collectives`` and ``simdist bench
allreduce-formulas`` read every fact about an algorithm from its record: its function, the
options it takes, its closed form and the options the sweep and the formula benchmark run it
with. Adding an algorithm touches its own file, ``formulas.py`` and this one (CONTRIBUTING.md).
"""

from __future__ import annotations

import inspect
import math
from typing import Callable, NamedTuple

from simdist.base.errors import InvalidArgumentError
from simdist.collectives import flow, formulas
from simdist.collectives.hierarchical import hierarchical_all_reduce
from simdist.collectives.naive import reduce_to_one_all_reduce
from simdist.collectives.ops import ReduceOp
from simdist.collectives.ps import ps_all_reduce
from simdist.collectives.recursive import halving_doubling_all_reduce, recursive_doubling_all_reduce
from simdist.collectives.ring import ring_all_reduce
from simdist.collectives.tree import binary_tree_all_reduce, double_binary_tree_all_reduce

#: the parameters every all-reduce function takes; the others are its options
COMMON = ("ctx", "members", "value", "op", "device")


def _no_options(p: int) -> dict:
    return {}


def _one_run(p: int) -> list[dict]:
    return [{}]


class AllReduceAlgorithm(NamedTuple):
    """One all-reduce algorithm: how to run it, what it takes and what it should cost."""

    name: str  # as on the command line: "ring"
    summary: str  # one line for --help
    function: Callable  # function(ctx, members, value, op, device=None, **options): generator
    # its closed form in ns when every member has a machine of its own, or None:
    # formula(p, n, a, B, o=..., **options) with a, B, o the network's latency, bandwidth
    # and cost per message
    formula: Callable | None = None
    bound: bool = False  # formula exact for p a power of two, an upper bound otherwise
    # a closed form that reads the machine layout instead (replaces ``formula``):
    # layout_formula(p, n, hardware, **options) -> ns, or None for these options
    layout_formula: Callable | None = None
    sweep_options: Callable[[int], dict] = _no_options  # plot-collectives' options at p
    checked_options: Callable[[int], list] = _one_run  # allreduce-formulas' runs at p
    tasks_per_machine: int = 1  # the layout allreduce-formulas checks it on

    @property
    def options(self) -> dict:
        """The options it takes and their defaults (its function's other parameters)."""
        return {name: parameter.default for name, parameter
                in inspect.signature(self.function).parameters.items() if name not in COMMON}

    def check_options(self, options: dict, flags: dict | None = None) -> None:
        """An error naming the first option it does not take, and the ones it does;
        ``flags``: how the caller spells each option (its command-line flag)."""
        for key, value in options.items():
            if key not in self.options:
                given = f"{flags[key]} {value!r}" if flags else f"{key}={value!r}"
                raise InvalidArgumentError(
                    f"{given}: the {self.name} all-reduce does not take {key}; it takes "
                    f"{', '.join(self.options) or 'no options'}")

    def closed_form(self, p: int, n: int, hardware, **options) -> float | None:
        """The closed-form time in ns of an all-reduce of ``n`` bytes over tasks 0..p-1 on
        ``hardware``; None where there is none (these options, tasks sharing a machine)."""
        if self.layout_formula is not None:
            return self.layout_formula(p, n, hardware, **options)
        if self.formula is None or hardware.layout.num_machines(p) != p:
            return None
        link = hardware.network
        return self.formula(p, n, link.latency_ns, link.bandwidth, o=link.message_ns,
                            **options)


def _hierarchical_closed_form(p: int, n: int, hardware, pieces: int = 1, groups=None):
    """Groups by machine, members filling machines in order: the fullest machine sets the
    local part. Pipelined (``pieces`` > 1) only when every machine is full."""
    k = hardware.layout.tasks_per_machine
    if groups is not None or (pieces > 1 and p > k and p % k):
        return None
    intra, net = hardware.intra_link, hardware.network
    return formulas.hierarchical(math.ceil(p / k), min(k, p), n, intra.latency_ns,
                                 intra.bandwidth, net.latency_ns, net.bandwidth, pieces,
                                 intra_o=intra.message_ns, net_o=net.message_ns)


def _ps_checked(p: int) -> list[dict]:
    """One server, a shard on half the members, a shard on every member."""
    return [{"num_ps": k} for k in sorted({1, max(1, p // 2), p})]


#: every all-reduce algorithm by name: naive first, then the optimized ones
ALGORITHMS = {record.name: record for record in (
    AllReduceAlgorithm(
        "reduce-to-one", "every member's value to one root and the sum back (TF's "
        "ReductionToOneDevice)", reduce_to_one_all_reduce, formulas.reduce_to_one),
    AllReduceAlgorithm(
        "ring", "reduce-scatter then all-gather around a ring (Horovod, NCCL, TF's RING)",
        ring_all_reduce, formulas.ring),
    AllReduceAlgorithm(
        "recursive-doubling", "log2(p) rounds swapping the whole value (MPICH, small values)",
        recursive_doubling_all_reduce, formulas.recursive_doubling, bound=True),
    AllReduceAlgorithm(
        "halving-doubling", "recursive halving then doubling (Rabenseifner; MPICH, large "
        "values)", halving_doubling_all_reduce, formulas.halving_doubling),
    AllReduceAlgorithm(
        "binary-tree", "up a binary tree and back down (NCCL_ALGO=Tree's building block)",
        binary_tree_all_reduce, formulas.binary_tree),
    AllReduceAlgorithm(
        "double-binary-tree", "two mirrored trees, half the value each (NCCL 2.4)",
        double_binary_tree_all_reduce, formulas.double_binary_tree),
    AllReduceAlgorithm(
        "hierarchical", "reduce in each machine, ring between machines, broadcast back "
        "(Horovod's hierarchical mode, TF's HierarchicalCopyAllReduce)",
        hierarchical_all_reduce, layout_formula=_hierarchical_closed_form,
        tasks_per_machine=2),
    AllReduceAlgorithm(
        "ps", "push shards to parameter servers, pull the sums (BytePS)", ps_all_reduce,
        formulas.parameter_server, sweep_options=lambda p: {"num_ps": p},
        checked_options=_ps_checked),
)}

#: the functions by name (``all_reduce`` runs the one named)
ALL_REDUCE = {name: record.function for name, record in ALGORITHMS.items()}


def algorithm_named(name: str) -> AllReduceAlgorithm:
    """The record of an algorithm, or an error naming the known ones."""
    if name not in ALGORITHMS:
        raise InvalidArgumentError(f"unknown all-reduce algorithm {name!r}: expected one of "
                                   f"{', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


def all_reduce(ctx, members, value, op=ReduceOp.SUM, algorithm: str = "ring",
               device: int | None = None, **options):
    """All-reduce ``value`` over ``members`` with the named algorithm (see ``ALGORITHMS``);
    ``options`` are the algorithm's own (``pieces``, ``num_ps``...).

    Members are tasks ("worker:0" or a task order) or devices of tasks (("worker:0", 1));
    ``device`` is the device of this task taking part (None when the members are tasks).
    In a run of fidelity "flow", a call over a ``Phantom`` is a few flows (``flow.py``).
    """
    record = algorithm_named(algorithm)
    record.check_options(options)
    if flow.covers(ctx, value, device):
        return (yield from flow.flow_all_reduce(ctx, record, members, value, op, options))
    return (yield from ALL_REDUCE[algorithm](ctx, members, value, op, device=device,
                                             **options))


def all_reduce_time(algorithm: str, p: int, n: int, a: int, B: int, o: int = 0,
                    **options) -> float:
    """The closed-form time in ns of an algorithm by name when every member has its own link
    of latency ``a`` ns and bandwidth ``B`` bytes/s, each message holding a port ``o`` ns
    more (the link's ``message_ns``; 0: the alpha-beta model)."""
    record = algorithm_named(algorithm)
    record.check_options(options)
    if record.formula is None:
        raise InvalidArgumentError(
            f"the {algorithm} all-reduce has no closed form over one kind of link: "
            f"ALGORITHMS[{algorithm!r}].closed_form(p, n, hardware) reads the machines")
    return record.formula(p, n, a, B, o=o, **options)
