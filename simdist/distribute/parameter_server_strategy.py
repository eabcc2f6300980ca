"""``tf.distribute.experimental.ParameterServerStrategy`` (TF2): variables on ps tasks,
functions run by workers, asynchronously, as a ``ClusterCoordinator`` schedules them.

    cluster = InProcessCluster(failures)         # one per rank, given to every task's main
    strategy = ParameterServerStrategy(ctx, cluster.resolver(ctx),
                                       variable_partitioner=MinSizePartitioner(...))
    with strategy.scope():
        w = strategy.variable("w", np.zeros((1000, 16)))  # a ShardedVariable, or a Variable
    coordinator = ClusterCoordinator(strategy)

Variables are placed on the ps tasks in turn, one count over every variable and shard, as
TF 2.21's ``_create_variable_round_robin`` does: with two ps, a variable of three shards goes
to ps 0, 1, 0 and the next variable starts on ps 1. Inside a scheduled function (on a worker),
``run`` reads the variables among its arguments from their ps, ``update`` sends a gradient to
the ps of each variable (or shard), which applies it, and ``embedding_lookup`` asks each shard
for the rows it holds; each is a real message, so every ps's load shows in the trace.
An update names its rule (``SGD(lr)``, ``ASSIGN_ADD``, one registered on every rank), never
Python code. Every rank builds the same strategy and variables in the same order (the ps of
each keeps its values), so the tasks may sit on different MPI ranks.
"""

from __future__ import annotations

import contextlib

import numpy as np

from simdist.base.errors import FailedPreconditionError, InvalidArgumentError, brief
from simdist.sim.wire import encode_header
from simdist.distribute.server import InProcessCluster, SimpleClusterResolver
from simdist.distribute.sharded_variable import (IndexedSlices, Partitioner, ShardedVariable,
                                                 Variable, num_shards, shard_offsets)


class ParameterServerStrategy:
    """``tf.distribute.experimental.ParameterServerStrategy(cluster_resolver,
    variable_partitioner=None)`` on the coordinator task ``ctx``."""

    def __init__(self, ctx, cluster_resolver: SimpleClusterResolver,
                 variable_partitioner: Partitioner | None = None):
        if not isinstance(cluster_resolver, SimpleClusterResolver) \
                or cluster_resolver.cluster is None:
            raise InvalidArgumentError(
                f"cluster_resolver must be the SimpleClusterResolver of an InProcessCluster "
                f"(cluster.resolver(ctx)), got {brief(cluster_resolver)}")
        spec = cluster_resolver.cluster_spec()
        for job in ("ps", "worker"):  # TF 2.21's ValueErrors, with the cluster said
            if job not in spec.jobs:
                raise InvalidArgumentError(f"There must be at least one {job}: the cluster is "
                                           f"{spec.as_dict()}")
        if variable_partitioner is not None and not callable(variable_partitioner):
            raise InvalidArgumentError(f"variable_partitioner must be a partitioner "
                                       f"(shape, dtype) -> partitions, got "
                                       f"{brief(variable_partitioner)}")
        self.ctx = ctx
        self.cluster_resolver = cluster_resolver
        self._cluster: InProcessCluster = cluster_resolver.cluster
        self._variable_partitioner = variable_partitioner
        self._num_ps = spec.num_tasks("ps")
        self._num_workers = spec.num_tasks("worker")
        self._variable_count = 0
        self._in_scope = False
        self._worker = None  # the worker context a scheduled function runs on, while it runs
        self._coordinator = None
        self._cluster.strategies.append(self)  # a function run on a worker of this rank
        self.extended = self  # TF's StrategyExtended methods live on the strategy here

    @property
    def num_replicas_in_sync(self) -> int:
        return 1  # one replica per worker (CPU workers), each stepping on its own

    def __repr__(self):
        return (f"ParameterServerStrategy({self._num_workers} workers, {self._num_ps} ps, "
                f"variable_partitioner={type(self._variable_partitioner).__name__})")

    @contextlib.contextmanager
    def scope(self):
        self._in_scope = True
        try:
            yield self
        finally:
            self._in_scope = False

    # -- variables ------------------------------------------------------------------------------

    def variable(self, name: str, initial_value):
        """``tf.Variable(initial_value, name=name)`` in ``scope()``: a ``Variable`` on the next
        ps, or, when the partitioner asks for more than one shard, a ``ShardedVariable``."""
        if not self._in_scope:
            raise InvalidArgumentError(f"create variable {name!r} inside `with "
                                       "strategy.scope():` so that ParameterServerStrategy "
                                       "places it on a parameter server")
        value = np.asarray(initial_value)
        if value.dtype == np.float64 and not isinstance(initial_value, (np.ndarray, np.generic)):
            value = value.astype(np.float32)  # tf.Variable(1.0) is float32; numpy's stay
        shards = 1
        if self._variable_partitioner is not None and value.ndim > 0:
            shards = num_shards(self._variable_partitioner, name, value.shape, value.dtype)
        if shards == 1:
            return self._place(name, value)
        offsets = shard_offsets(value.shape[0], shards)
        return ShardedVariable([self._place(f"{name}/part_{i}",
                                            value[offsets[i]:offsets[i + 1]])
                                for i in range(shards)])

    def variables(self, initial: dict) -> dict:
        """One variable per entry of ``initial`` ({name: value}), in that order."""
        return {name: self.variable(name, value) for name, value in initial.items()}

    def _place(self, name: str, value) -> Variable:
        ps = f"ps:{self._variable_count % self._num_ps}"
        self._variable_count += 1
        cluster = self._cluster
        variable = Variable(name, value, ps, key=len(cluster.variables), home=cluster.home(ps))
        cluster._created(variable, value)  # the value lives on its ps (if on this rank)
        return variable

    def ps_load(self) -> dict[str, int]:
        """Bytes of variables stored on each ps task."""
        return {f"ps:{i}": self._cluster.stored.get(f"ps:{i}", 0)
                for i in range(self._num_ps)}

    # -- inside a scheduled function (on a worker) ---------------------------------------------

    def _worker_ctx(self, what: str):
        if self._worker is None:
            raise FailedPreconditionError(
                f"strategy.{what} runs on a worker: call it inside a function given to "
                "ClusterCoordinator.schedule (ParameterServerStrategy needs a "
                "ClusterCoordinator)")
        return self._worker

    def _by_ps(self, variables):
        """The Variables among ``variables`` (shards of ShardedVariables too), grouped by ps."""
        groups: dict[str, list[Variable]] = {}
        for v in variables:
            for part in (v.variables if isinstance(v, ShardedVariable) else [v]):
                groups.setdefault(part.task, []).append(part)
        return groups

    def _call_each_ps(self, ctx, kind, groups, payload_of):
        """One request per ps, all in flight together (``yield from``); {ps: reply}. Every
        request ends before the first error is raised (none is left failing unheard)."""
        calls = {ps: ctx.process(_caught(self._cluster.call(ctx, ps, kind, payload_of(ps, parts))),
                                 name=f"{kind} from {ps}")
                 for ps, parts in sorted(groups.items())}
        return (yield from _gather(ctx, calls))

    def read(self, variables, ctx=None, kind: str = "read"):
        """The values of ``variables`` (a dict or list of Variable / ShardedVariable), read
        from their ps (``yield from``); a ShardedVariable reads as its shards concatenated.
        Inside a scheduled function the worker reads; the coordinator passes its ``ctx``
        (TF's ``read_value()`` of a ps variable on the coordinator)."""
        ctx = ctx or self._worker_ctx("read")
        items = list(variables.items()) if isinstance(variables, dict) \
            else list(enumerate(variables))
        groups = self._by_ps(v for _, v in items)
        replies = yield from self._call_each_ps(
            ctx, kind, groups, lambda ps, parts: [np.array([p.key for p in parts])])
        got = {}
        for ps, parts in groups.items():
            for part, value in zip(parts, replies[ps]):
                got[part.key] = value
        values = {}
        for k, v in items:
            parts = v.variables if isinstance(v, ShardedVariable) else [v]
            values[k] = np.concatenate([got[p.key] for p in parts]) \
                if isinstance(v, ShardedVariable) else got[v.key]
        return values if isinstance(variables, dict) else [values[i] for i in range(len(items))]

    def run(self, fn, args=(), kwargs=None, flops=0.0, nbytes=0, name="step"):
        """``strategy.run`` on the worker (``yield from``): the variables among ``args`` and
        ``kwargs`` (top level, or in a dict or list there) are read from their ps first and
        ``fn`` gets their values; ``flops`` is charged to the worker's device."""
        ctx = self._worker_ctx("run")
        kwargs = dict(kwargs or {})
        found = [v for v in _leaves((args, kwargs)) if isinstance(v, (Variable, ShardedVariable))]
        values = yield from self.read(found)
        by_id = {id(v): value for v, value in zip(found, values)}
        args, kwargs = _substitute((args, kwargs), by_id)
        out = fn(*args, **kwargs)
        yield ctx.compute(name, flops=flops, nbytes=nbytes)
        return out

    def save(self, variables: dict, ctx):
        """A checkpoint of ``variables`` on the coordinator ``ctx`` (``yield from``): their
        values read from their ps ("save" requests, which the ps's "variable reads" counter
        leaves out: it counts the training's load), as TF's ``Checkpoint.save`` reads them."""
        return (yield from self.read(variables, ctx=ctx, kind="save"))

    def restore(self, variables: dict, values: dict, ctx=None):
        """``variables[k].assign(values[k])`` on their ps, one request per ps (``yield
        from``): a checkpoint's restore; it brings back variables their ps lost."""
        ctx = ctx or self._worker_ctx("restore")
        parts = {}
        for k, v in variables.items():
            shards = v.variables if isinstance(v, ShardedVariable) else [v]
            offsets = v.offsets() if isinstance(v, ShardedVariable) else None
            for i, part in enumerate(shards):
                value = np.asarray(values[k])
                parts[part.key] = value if offsets is None else value[offsets[i]:offsets[i + 1]]
        yield from self._call_each_ps(
            ctx, "restore", self._by_ps(variables.values()),
            lambda ps, shards: [np.array([p.key for p in shards])] + [parts[p.key]
                                                                      for p in shards])

    def update(self, variables: dict, values: dict, fn, name="update"):
        """Send ``values[k]`` (a gradient) to the ps of ``variables[k]`` (each shard its
        rows), where the update rule ``fn`` (``SGD(lr)``, ``ASSIGN_ADD``, a registered one)
        makes the new value (``yield from``); the rule travels by name, never as code.
        An ``IndexedSlices`` value updates only its rows (TF's sparse apply)."""
        ctx = self._worker_ctx("update")
        rule = encode_header(list(self._cluster.rule_of(fn)), minimum=0)
        dense, sparse = {}, {}
        for k, v in variables.items():
            value = values[k]
            parts = v.variables if isinstance(v, ShardedVariable) else [v]
            offsets = v.offsets() if isinstance(v, ShardedVariable) else [0, v.shape[0]
                                                                         if v.shape else 1]
            for i, part in enumerate(parts):
                if isinstance(value, IndexedSlices):
                    rows = np.asarray(value.indices)
                    mine = (rows >= offsets[i]) & (rows < offsets[i + 1])
                    if mine.any():
                        sparse[part.key] = (rows[mine] - offsets[i],
                                            np.asarray(value.values)[mine])
                elif isinstance(v, ShardedVariable):
                    dense[part.key] = np.asarray(value)[offsets[i]:offsets[i + 1]]
                else:
                    dense[part.key] = np.asarray(value)
        groups = {ps: [p for p in parts if p.key in dense]
                  for ps, parts in self._by_ps(variables.values()).items()}
        yield from self._call_each_ps(
            ctx, "update", {ps: parts for ps, parts in groups.items() if parts},
            lambda ps, parts: [np.array([p.key for p in parts]), rule] + [dense[p.key]
                                                                           for p in parts])
        scattered = {ps: [p for p in parts if p.key in sparse]
                     for ps, parts in self._by_ps(variables.values()).items()}
        yield from self._call_each_ps(
            ctx, "scatter", {ps: parts for ps, parts in scattered.items() if parts},
            lambda ps, parts: [np.array([p.key for p in parts]), rule]
            + [x for p in parts for x in sparse[p.key]])

    def embedding_lookup(self, params, ids):
        """``tf.nn.embedding_lookup(params, ids)`` on the worker (``yield from``): each shard
        of ``params`` sends only the rows asked for, never the whole table."""
        ctx = self._worker_ctx("embedding_lookup")
        ids = np.asarray(ids)
        if not isinstance(params, ShardedVariable):
            params = ShardedVariable([params])
        plan = params.lookup_plan(ids)
        calls = {i: ctx.process(_caught(self._cluster.call(ctx, part.task, "lookup",
                                                           [np.array([part.key]), rows])),
                                name=f"lookup from {part.task}")
                 for i, (part, rows, _) in enumerate(plan)}
        replies = yield from _gather(ctx, calls)
        out = np.zeros((ids.size, *params.shape[1:]), params.dtype)
        for i, (_, _, where) in enumerate(plan):
            out[where] = replies[i][0]
        return out.reshape(*ids.shape, *params.shape[1:])


def _caught(call):
    """A request as a process that never fails: it returns (reply, error)."""
    try:
        return (yield from call), None
    except Exception as error:  # noqa: BLE001 -- handed to _gather, which raises it
        return None, error


def _gather(ctx, calls: dict):
    """Wait for every process of ``calls`` ({key: process of _caught}); their replies, or
    the first error (in key order)."""
    if calls:
        yield ctx.env.all_of(list(calls.values()))
    for proc in calls.values():
        if proc.value[1] is not None:
            raise proc.value[1]
    return {key: proc.value[0] for key, proc in calls.items()}


def _leaves(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _substitute(value, by_id):
    if isinstance(value, dict):
        return {k: _substitute(v, by_id) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_substitute(v, by_id) for v in value)
    return by_id.get(id(value), value)


__all__ = ["ParameterServerStrategy"]
