"""Models the kernels of TF1's queues (core/kernels/fifo_queue.cc, padding_fifo_queue.cc,
random_shuffle_queue_op.cc, priority_queue.cc, queue_ops.cc): the queue resources and the
kernels of their ops, with TF 2.21's run-time checks and messages.

A queue is a ``simdist.sim.resources.Store`` in the resource container of the task that
holds its device; its blocking ops wait on it in simulated time. A queue's name in messages
is its op (or shared) name where TF shows an internal "_0_q".
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import CancelledError, InvalidArgumentError, OutOfRangeError
from simdist.sim.resources import Store
from simdist.graph.dtypes import int64
from simdist.graph.variables import resource_key

INT32_MAX = 2**31 - 1


def tf_dims(shape) -> str:
    """A shape as TF's kernels print it: ``[3,?]``."""
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _node(message: str, op) -> str:
    return f"{message}\n\t [[{{{{node {op.name}}}}}]]"


class QueueResource(Store):
    """TF's FIFOQueue kernel state: elements are tuples of numpy arrays, one per component."""

    kind = "FIFOQueue"

    def __init__(self, op):
        attrs = op.attrs
        capacity = attrs["capacity"]
        super().__init__(float("inf") if capacity < 0 else capacity,
                         attrs["shared_name"] or op.name)
        self.types, self.shape_attr = attrs["component_types"], list(attrs["shapes"])
        self.dtypes, self.shapes = self.types, self.shape_attr  # of an element's components

    @property
    def tf_capacity(self) -> int:
        return INT32_MAX if self.capacity == float("inf") else self.capacity

    def check_compatible(self, op):
        """A second queue op naming this shared queue must ask for the same queue."""
        attrs, name = op.attrs, self.name
        if op.type != QUEUE_OPS[self.kind]:
            raise InvalidArgumentError(f"Expected {self.kind}, found {op.type}")
        if [d.name for d in attrs["component_types"]] != [d.name for d in self.types]:
            raise InvalidArgumentError(
                f"Shared queue '{name}' has component types {_type_names(self.types)} but "
                f"requested component types were {_type_names(attrs['component_types'])}")
        capacity = INT32_MAX if attrs["capacity"] < 0 else attrs["capacity"]
        if capacity != self.tf_capacity:
            raise InvalidArgumentError(
                f"Shared queue '{name}' has capacity {self.tf_capacity} but requested "
                f"capacity was {capacity}")
        if list(attrs["shapes"]) != self.shape_attr:
            raise InvalidArgumentError(
                f"Shared queue '{name}' has component shapes {_shape_list(self.shape_attr)} but "
                f"requested component shapes were {_shape_list(attrs['shapes'])}")

    def _closed_error(self):
        # TF's PaddingFIFOQueue reuses FIFOQueue's enqueue, message included
        kind = "FIFOQueue" if self.kind == "PaddingFIFOQueue" else self.kind
        return CancelledError(f"{kind} '{self.name}' is closed.")

    def _cancelled_error(self):
        return CancelledError("Enqueue operation was cancelled")

    def _insufficient_error(self, n):
        return OutOfRangeError(f"{self.kind} '{self.name}' is closed and has insufficient "
                               f"elements (requested {n}, current size {len(self.items)})")

    def check_element(self, values, op, batch: int | None = None):
        """TF's ValidateTuple / ValidateManyTuple: each component has its shape."""
        for i, (value, shape) in enumerate(zip(values, self.shapes)):
            have = np.shape(value)
            want = tuple(shape) if batch is None else (batch, *shape)
            if len(have) != len(want) or any(w is not None and w != h
                                             for w, h in zip(want, have)):
                raise InvalidArgumentError(_node(
                    f"Shape mismatch in tuple component {i}. Expected {tf_dims(want)}, got "
                    f"{tf_dims(have)}", op))

    def check_many(self, op):
        """DequeueMany and DequeueUpTo need every component's shape (not PaddingFIFOQueue)."""
        if not self.shapes:
            raise InvalidArgumentError(_node(
                f"{self.kind}'s DequeueMany and DequeueUpTo require the components to have "
                "specified shapes.", op))

    def batch(self, elements) -> list:
        """``dequeue_many``'s outputs: each component stacked along a new first axis."""
        return [np.stack([e[i] for e in elements]) if elements else
                np.zeros((0,) + tuple(d or 0 for d in shape), dtype.as_numpy_dtype)
                for i, (dtype, shape) in enumerate(zip(self.dtypes, self.shapes))]


class PaddingQueueResource(QueueResource):
    """PaddingFIFOQueue: ``dequeue_many`` pads unknown dimensions to the batch's largest."""

    kind = "PaddingFIFOQueue"

    def check_many(self, op):
        pass

    def batch(self, elements) -> list:
        out = []
        for i, (dtype, shape) in enumerate(zip(self.dtypes, self.shapes)):
            parts = [e[i] for e in elements]
            size = tuple(max([p.shape[d] for p in parts], default=0) if dim is None else dim
                         for d, dim in enumerate(shape))
            batch = np.zeros((len(parts),) + size, dtype.as_numpy_dtype)
            for row, part in enumerate(parts):
                batch[(row,) + tuple(slice(0, n) for n in part.shape)] = part
            out.append(batch)
        return out


class RandomShuffleQueueResource(QueueResource):
    """RandomShuffleQueue: elements leave in a seeded random order, and only while more than
    ``min_after_dequeue`` stay behind (until the queue is closed). The order is numpy's, not
    TF's Philox stream."""

    kind = "RandomShuffleQueue"

    def __init__(self, op):
        super().__init__(op)
        self.min_after_dequeue = op.attrs["min_after_dequeue"]
        self.seeds = (op.attrs["seed"], op.attrs["seed2"])
        self.rng = np.random.default_rng(op.attrs["seed2"])

    def check_compatible(self, op):
        super().check_compatible(op)
        attrs, name = op.attrs, self.name
        if attrs["min_after_dequeue"] != self.min_after_dequeue:
            raise InvalidArgumentError(
                f"Shared queue '{name}' has min_after_dequeue {self.min_after_dequeue} but "
                f"requested min_after_dequeue was {attrs['min_after_dequeue']}.")
        seeds = (attrs["seed"], attrs["seed2"])
        if seeds != self.seeds:
            raise InvalidArgumentError(
                f"Shared queue '{name}' has random seeds ({self.seeds[0]}, {self.seeds[1]}) "
                f"but requested seeds are ({seeds[0]}, {seeds[1]}).")

    def _available(self) -> int:
        return len(self.items) if self.closed else len(self.items) - self.min_after_dequeue

    def _take(self, n):
        taken = []
        for _ in range(n):
            index = int(self.rng.integers(len(self.items)))
            self.items.rotate(-index)
            taken.append(self.items.popleft())
            self.items.rotate(index)
        return taken


class PriorityQueueResource(QueueResource):
    """PriorityQueue: the element whose first component (an int64) is smallest leaves first;
    equal priorities leave in the order they came. A dequeue takes its elements all at once
    (TF 2.21 keeps them in the queue while it waits, so a timed-out one loses nothing)."""

    kind = "PriorityQueue"

    def __init__(self, op):
        super().__init__(op)
        self.dtypes = [int64, *self.types]
        self.shapes = [(), *self.shape_attr] if self.shape_attr else []

    def _available(self) -> int:
        head = self._gets[0]
        need = head.n - len(head.taken)
        return len(self.items) if self.closed or len(self.items) >= need else 0

    def _dispatch(self):
        """TF 2.21's PriorityQueue, closed with too few elements for the oldest
        ``dequeue_up_to``: takes what is left, loses it, and fails asking for the rest."""
        while self.closed and self._gets and not any(put.items for put in self._puts):
            head = self._gets[0]
            need = head.n - len(head.taken)
            if not head.up_to or need <= len(self.items):
                break
            need -= len(self.items)
            self.items.clear()
            self._gets.popleft()
            head.event.fail(self._insufficient_error(need))
        super()._dispatch()

    def _take(self, n):
        order = sorted(range(len(self.items)), key=lambda i: (int(self.items[i][0]), i))[:n]
        taken = [self.items[i] for i in order]
        for i in sorted(order, reverse=True):
            del self.items[i]
        return taken


RESOURCES = {cls.kind: cls for cls in (QueueResource, PaddingQueueResource,
                                       RandomShuffleQueueResource, PriorityQueueResource)}
QUEUE_OPS = {kind: f"{kind}V2" for kind in RESOURCES}


def _type_names(dtypes) -> str:
    names = {"float32": "float", "float64": "double"}
    return ", ".join(names.get(d.name, d.name) for d in dtypes)


def _shape_list(shapes) -> str:
    return "[" + ", ".join(tf_dims(s) for s in shapes) + "]"


# -- kernels ---------------------------------------------------------------------------------


def _queue_kernel(op, args, rt):
    resources, key = rt.resources(op), resource_key(op)
    queue = resources.lookup(key)
    if queue is None:
        if op.type == "RandomShuffleQueueV2":
            _check_min_after_dequeue(op)
        queue = RESOURCES[op.type[:-2]](op)
        resources.store(key, queue)
    else:
        try:
            queue.check_compatible(op)
        except InvalidArgumentError as error:
            raise InvalidArgumentError(_node(str(error), op)) from None
    return [queue]


def _check_min_after_dequeue(op):
    least, capacity = op.attrs["min_after_dequeue"], op.attrs["capacity"]
    if least < 0:
        raise InvalidArgumentError(_node(f"min_after_dequeue {least} must be >= 0", op))
    if 0 <= capacity <= least:
        raise InvalidArgumentError(_node(
            f"min_after_dequeue {least} must be < capacity {capacity}", op))


def _element(queue, values) -> tuple:
    return tuple(np.array(v, d.as_numpy_dtype) for v, d in zip(values, queue.dtypes))


def _check_signature(queue, values, op):
    """TF checks the op's component types against the queue's when the op runs."""
    have = [d.name for d in op.attrs.get("Tcomponents", [])]
    if have != [d.name for d in queue.dtypes]:
        raise InvalidArgumentError(_node(
            f"Signature mismatch, have: resource, {_type_names(op.attrs['Tcomponents'])}-> "
            f"expected: resource, {_type_names(queue.dtypes)}->", op))


def _enqueue_kernel(op, args, rt):
    queue, *values = args
    _check_signature(queue, values, op)
    if queue.shapes:
        queue.check_element(values, op)
    yield from rt.wait(queue, queue.put(rt.env, [_element(queue, values)]), op)
    rt.record_size(queue)
    return []


def _enqueue_many_kernel(op, args, rt):
    queue, *values = args
    _check_signature(queue, values, op)
    size = np.shape(values[0])[0] if np.ndim(values[0]) else 0
    for i, value in enumerate(values):
        if not np.ndim(value) or np.shape(value)[0] != size:
            raise InvalidArgumentError(_node(
                f"Shape mismatch in tuple component {i}. Expected [{size}], got "
                f"{tf_dims(np.shape(value)[:1])}", op))
    if queue.shapes:
        queue.check_element(values, op, batch=size)
    if size == 0:  # TF: nothing to enqueue, done (even on a closed queue)
        return []
    elements = [_element(queue, [v[i] for v in values]) for i in range(size)]
    yield from rt.wait(queue, queue.put(rt.env, elements), op)
    rt.record_size(queue)
    return []


def _dequeue_kernel(op, args, rt):
    queue = args[0]
    try:
        (element,) = yield from rt.wait(queue, queue.get(rt.env, 1), op)
    except OutOfRangeError as error:  # TF's PaddingFIFOQueue dequeues as its FIFOQueue
        raise OutOfRangeError(str(error).replace("PaddingFIFOQueue '", "FIFOQueue '", 1)
                              ) from None
    rt.record_size(queue)
    return list(element)


def _dequeue_many_kernel(op, args, rt, up_to=False):
    queue, n = args[0], int(np.asarray(args[1]).flat[0])  # TF reads a fed vector's first
    if n < 0:
        kind = "DequeueUpToOp" if up_to else "DequeueManyOp"
        raise InvalidArgumentError(_node(f"{kind} requested {n} < 0 elements", op))
    queue.check_many(op)
    if n == 0:
        return queue.batch([])
    elements = yield from rt.wait(queue, queue.get(rt.env, n, up_to), op)
    rt.record_size(queue)
    return queue.batch(elements)


def _close_kernel(op, args, rt):
    queue, cancel = args[0], op.attrs["cancel_pending_enqueues"]
    if queue.closed and not cancel:
        raise CancelledError(_node(f"Queue '{queue.name}' is already closed.", op))
    queue.close(cancel)
    return []


#: (op type, kernel) of every queue op, registered by data_flow_ops.py (the queues' family)
KERNELS = (
    *((QUEUE_OPS[kind], _queue_kernel) for kind in RESOURCES),
    ("QueueEnqueueV2", _enqueue_kernel),
    ("QueueEnqueueManyV2", _enqueue_many_kernel),
    ("QueueDequeueV2", _dequeue_kernel),
    ("QueueDequeueManyV2", _dequeue_many_kernel),
    ("QueueDequeueUpToV2", lambda op, args, rt: _dequeue_many_kernel(op, args, rt, True)),
    ("QueueCloseV2", _close_kernel),
    ("QueueSizeV2", lambda op, args, rt: [np.int32(len(args[0]))]),
    ("QueueIsClosedV2", lambda op, args, rt: [np.bool_(args[0].closed)]))
