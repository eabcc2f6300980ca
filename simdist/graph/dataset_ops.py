"""Models tf.data (tf.compat.v1.data): input pipelines that run in simulated time.

``Dataset.from_tensor_slices(...)`` then ``map``, ``shuffle``, ``batch``, ``repeat``,
``interleave`` and ``prefetch``, read through ``make_one_shot_iterator(dataset).get_next()``
in a session, as TF1 programs did. Elements are numpy values; ``map`` applies its function
to them (arithmetic works as on tensors). What each stage costs in time is a simdist
extension: ``map(fn, cost_us=...)`` is the time one call takes on the iterator's task
(``num_parallel_calls`` calls overlap), and ``prefetch(n)`` runs the pipeline ahead on a
background process of that task (a daemon, as TF's prefetch thread is), into a buffer of
``n`` elements, so that producing the next batch overlaps with training on this one. The
end of the data is TF's OutOfRangeError "End of sequence". Costs show in the trace on the
task's "tf.data" lane, the prefetch buffer as a counter.
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import InvalidArgumentError, OutOfRangeError
from simdist.sim.resources import Store
from simdist.graph.dtypes import dtype_of
from simdist.graph.graph import create_op
from simdist.graph.registry import NOT_DIFFERENTIABLE, no_flops, register

LANE = "tf.data"


class _End(Exception):
    """The upstream stage has no more elements."""


def _structure(value):
    """(flat list of numpy arrays, rebuild function) of an element: an array, a tuple or a
    dict of arrays, as tf.data's nested structures (a list is one tensor, as in TF)."""
    if isinstance(value, dict):
        keys = list(value)
        return [np.asarray(value[k]) for k in keys], lambda xs: dict(zip(keys, xs))
    if isinstance(value, tuple):
        return [np.asarray(v) for v in value], tuple
    return [np.asarray(value)], lambda xs: xs[0]


class Dataset:
    """tf.data.Dataset: a recipe; ``_open(ctx)`` makes a fresh iterator of its elements."""

    # -- sources -------------------------------------------------------------------------

    @staticmethod
    def from_tensor_slices(tensors) -> Dataset:
        flat, rebuild = _structure(tensors)
        sizes = {len(a) for a in flat}
        if len(sizes) != 1:
            raise InvalidArgumentError(
                f"from_tensor_slices: every component needs the same first dimension, got "
                f"{[a.shape for a in flat]}")
        return _Slices(flat, rebuild)

    # -- transformations -----------------------------------------------------------------

    def map(self, map_func, num_parallel_calls=None, cost_us: float = 0.0) -> Dataset:
        if num_parallel_calls is not None and num_parallel_calls != -1 and num_parallel_calls < 1:
            raise InvalidArgumentError(f"map: num_parallel_calls={num_parallel_calls!r}, "
                                       "expected None, -1 (AUTOTUNE) or an int >= 1")
        return _Map(self, map_func, num_parallel_calls, cost_us)

    def shuffle(self, buffer_size: int, seed=None) -> Dataset:
        if buffer_size < 1:
            raise InvalidArgumentError(f"shuffle: buffer_size={buffer_size!r}, expected >= 1")
        return _Shuffle(self, buffer_size, seed)

    def batch(self, batch_size: int, drop_remainder: bool = False) -> Dataset:
        if batch_size < 1:
            raise InvalidArgumentError(f"batch: batch_size={batch_size!r}, expected >= 1")
        return _Batch(self, batch_size, drop_remainder)

    def repeat(self, count=None) -> Dataset:
        return _Repeat(self, count)

    def interleave(self, map_func, cycle_length: int = 2, block_length: int = 1) -> Dataset:
        return _Interleave(self, map_func, cycle_length, block_length)

    def prefetch(self, buffer_size: int) -> Dataset:
        if buffer_size < 1 and buffer_size != -1:
            raise InvalidArgumentError(f"prefetch: buffer_size={buffer_size!r}, expected >= 1 "
                                       "or -1 (AUTOTUNE)")
        return _Prefetch(self, 2 if buffer_size == -1 else buffer_size)

    def make_one_shot_iterator(self) -> Iterator:
        return make_one_shot_iterator(self)

    def _open(self, ctx):
        raise NotImplementedError

    def _first(self):
        """One element, computed right away (for the iterator's output dtypes and shapes)."""
        return next(iter(_drain(self)))


def _drain(dataset):
    """Every element of ``dataset``, in plain Python (no simulated time)."""
    it = dataset._open(None)
    while True:
        gen = it.next()
        try:
            while True:
                next(gen)
        except StopIteration as stop:
            yield stop.value
        except _End:
            return


class _Slices(Dataset):
    def __init__(self, flat, rebuild):
        self.flat, self.rebuild = flat, rebuild

    def _open(self, ctx):
        return _Cursor(self, ctx)


class _Cursor:
    def __init__(self, source, ctx):
        self.source, self.index = source, 0

    def next(self):
        if self.index >= len(self.source.flat[0]):
            raise _End
        i, self.index = self.index, self.index + 1
        return self.source.rebuild([a[i] for a in self.source.flat])
        yield


class _Stage(Dataset):
    def __init__(self, upstream):
        self.upstream = upstream


class _Map(_Stage):
    def __init__(self, upstream, fn, parallel, cost_us):
        super().__init__(upstream)
        self.fn, self.parallel, self.cost_ns = fn, parallel, int(cost_us * 1000)

    def _open(self, ctx):
        up = self.upstream._open(ctx)
        calls = 1 if self.parallel in (None, 1) else (4 if self.parallel == -1 else self.parallel)

        class It:
            def next(it):
                element = yield from up.next()
                if ctx is not None and self.cost_ns:
                    took = -(-self.cost_ns // calls)  # calls overlap: the rate grows with them
                    ctx.span(LANE, "map", "input", ctx.now, took)
                    yield ctx.timeout(took)
                return self.fn(*element) if isinstance(element, tuple) else self.fn(element)
        return It()


class _Shuffle(_Stage):
    def __init__(self, upstream, size, seed):
        super().__init__(upstream)
        self.size, self.seed = size, 0 if seed is None else seed
        self.opened = 0  # a new order each time it is read again (reshuffle_each_iteration)

    def _open(self, ctx):
        self.opened += 1
        up, buffer = self.upstream._open(ctx), []
        rng = np.random.default_rng([self.seed, self.opened])
        state = {"done": False}

        class It:
            def next(it):
                while not state["done"] and len(buffer) < self.size:
                    try:
                        buffer.append((yield from up.next()))
                    except _End:
                        state["done"] = True
                if not buffer:
                    raise _End
                return buffer.pop(int(rng.integers(len(buffer))))
        return It()


class _Batch(_Stage):
    def __init__(self, upstream, size, drop_remainder):
        super().__init__(upstream)
        self.size, self.drop_remainder = size, drop_remainder

    def _open(self, ctx):
        up = self.upstream._open(ctx)

        class It:
            def next(it):
                items = []
                try:
                    while len(items) < self.size:
                        items.append((yield from up.next()))
                except _End:
                    if not items or self.drop_remainder:
                        raise
                flats = [_structure(item) for item in items]
                return flats[0][1]([np.stack([f[0][i] for f in flats])
                                    for i in range(len(flats[0][0]))])
        return It()


class _Repeat(_Stage):
    def __init__(self, upstream, count):
        super().__init__(upstream)
        self.count = count

    def _open(self, ctx):
        state = {"up": self.upstream._open(ctx), "round": 1, "empty": True}

        class It:
            def next(it):
                while True:
                    try:
                        element = yield from state["up"].next()
                        state["empty"] = False
                        return element
                    except _End:
                        if state["empty"] or (self.count is not None and self.count != -1
                                              and state["round"] >= self.count):
                            raise
                        state["up"], state["empty"] = self.upstream._open(ctx), True
                        state["round"] += 1
        return It()


class _Interleave(_Stage):
    def __init__(self, upstream, fn, cycle_length, block_length):
        super().__init__(upstream)
        self.fn, self.cycle, self.block = fn, cycle_length, block_length

    def _open(self, ctx):
        up, open_its, state = self.upstream._open(ctx), [], {"turn": 0, "left": 0, "done": False}

        class It:
            def next(it):
                while True:
                    while not state["done"] and len(open_its) < self.cycle:
                        try:
                            element = yield from up.next()
                        except _End:
                            state["done"] = True
                            break
                        made = self.fn(*element) if isinstance(element, tuple) else \
                            self.fn(element)
                        open_its.append(made._open(ctx))
                    if not open_its:
                        raise _End
                    state["turn"] %= len(open_its)
                    try:
                        element = yield from open_its[state["turn"]].next()
                    except _End:
                        del open_its[state["turn"]]
                        state["left"] = 0
                        continue
                    state["left"] += 1
                    if state["left"] >= self.block:
                        state["turn"], state["left"] = state["turn"] + 1, 0
                    return element
        return It()


class _Prefetch(_Stage):
    def __init__(self, upstream, size):
        super().__init__(upstream)
        self.size = size

    def _open(self, ctx):
        up = self.upstream._open(ctx)
        if ctx is None:
            return up
        buffer = Store(self.size, f"prefetch buffer on {ctx.name}")

        def produce():
            while True:
                try:
                    element = yield from up.next()
                except _End:
                    buffer.close()
                    return
                yield buffer.put(ctx.env, [element])
                ctx.counter(f"queue {buffer.name}", size=len(buffer))

        state = {"started": False}

        class It:
            def next(it):
                if not state["started"]:
                    state["started"] = True
                    ctx.process(produce(), name="prefetch", daemon=True)
                try:
                    (element,) = yield buffer.get(ctx.env, 1)
                except OutOfRangeError:  # closed and drained: the data has ended
                    raise _End from None
                ctx.counter(f"queue {buffer.name}", size=len(buffer))
                return element
        return It()


# -- iterators in the graph ------------------------------------------------------------------


class Iterator:
    """tf.compat.v1.data.Iterator (one-shot): ``get_next()`` is an IteratorGetNext op."""

    def __init__(self, dataset):
        flat, self._rebuild = _structure(dataset._first())
        self.output_types = [dtype_of(a) for a in flat]
        partial = _partial_batches(dataset)  # the first dimension of a batch may vary
        self.output_shapes = [((None,) + a.shape[1:]) if partial and a.ndim else a.shape
                              for a in flat]
        self._resource = create_op("OneShotIterator", [], [("resource", ())],
                                   {"dataset": dataset}, "OneShotIterator").outputs[0]

    def get_next(self, name=None):
        from simdist.graph.graph import get_default_graph

        with get_default_graph().colocate_with(self._resource.op):
            op = create_op("IteratorGetNext", [self._resource],
                           list(zip(self.output_types, self.output_shapes)), None,
                           name or "IteratorGetNext")
        return self._rebuild(list(op.outputs))


def _partial_batches(dataset) -> bool:
    """Does a ``batch`` without ``drop_remainder`` make the outermost batches?"""
    while isinstance(dataset, _Stage):
        if isinstance(dataset, _Batch):
            return not dataset.drop_remainder
        if isinstance(dataset, _Map):
            return False
        dataset = dataset.upstream
    return False


def make_one_shot_iterator(dataset) -> Iterator:
    """tf.compat.v1.data.make_one_shot_iterator(dataset)."""
    if not isinstance(dataset, Dataset):
        raise InvalidArgumentError(f"make_one_shot_iterator takes a Dataset, got {dataset!r}")
    return Iterator(dataset)


def _iterator_kernel(op, args, rt):
    resources, key = rt.resources(op), (op.container, op.name)
    state = resources.lookup(key)
    if state is None:
        state = op.attrs["dataset"]._open(rt.ctx)
        resources.store(key, state)
    return [state]


def _get_next_kernel(op, args, rt):
    try:
        element = yield from args[0].next()
    except _End:
        raise OutOfRangeError(f"End of sequence\n\t [[{{{{node {op.name}}}}}]]") from None
    return _structure(element)[0]


register("OneShotIterator", _iterator_kernel, flops=no_flops, gpu=lambda op: False,
         grad=NOT_DIFFERENTIABLE, stateful=True)
register("IteratorGetNext", _get_next_kernel, flops=no_flops, gpu=lambda op: False,
         grad=NOT_DIFFERENTIABLE, stateful=True)
