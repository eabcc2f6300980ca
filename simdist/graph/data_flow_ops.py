"""Models TF1's queues (tf.queue / data_flow_ops.py): FIFOQueue, PaddingFIFOQueue,
RandomShuffleQueue and PriorityQueue.

A queue is a resource in the resource container of the task that holds its device (as a
variable is), made by its queue op (``FIFOQueueV2``...) when a run first needs it and shared
under its ``shared_name`` by every session of the cluster. Its ops (enqueue, dequeue...)
are colocated with it. ``dequeue`` on an empty queue and ``enqueue`` on a full one block in
simulated time (their kernels wait on a ``simdist.sim.resources.Store``) while other ops,
sessions and tasks go on; a closed queue's errors, the session's ``operation_timeout_in_ms``
and the shared-queue checks raise TF's error classes with TF's messages. Each change of a
queue's size is a counter in the trace ("queue NAME"), so occupancy can be plotted.

Differs from TF on purpose: a queue's name in messages is its op name (TF shows an internal
"_0_q"); dtypes are the numeric ones simdist has (no strings).
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import CancelledError, InvalidArgumentError, OutOfRangeError
from simdist.sim.resources import Store
from simdist.graph.array_ops import convert_to_tensor
from simdist.graph.dtypes import as_dtype, int32, int64
from simdist.graph.graph import Tensor, create_op, format_shape, get_default_graph
from simdist.graph.registry import NOT_DIFFERENTIABLE, no_flops, register
from simdist.graph.variables import resource_key

RESOURCE = "resource"


# -- the queue resources ---------------------------------------------------------------------


class QueueResource(Store):
    """TF's FIFOQueue kernel state: elements are tuples of numpy arrays, one per component."""

    kind = "FIFOQueue"

    def __init__(self, op):
        attrs = op.attrs
        super().__init__(attrs["capacity"], attrs["shared_name"] or op.name)
        self.dtypes, self.shapes = attrs["dtypes"], attrs["shapes"]

    def check_compatible(self, op):
        """A second queue op naming this shared queue must ask for the same queue."""
        attrs, name = op.attrs, self.name
        if op.type != QUEUE_OPS[self.kind]:
            raise InvalidArgumentError(f"Shared queue '{name}' is a {self.kind}, but "
                                       f"{op.name!r} asks for a {op.type[:-2]}")
        if [d.name for d in attrs["dtypes"]] != [d.name for d in self.dtypes]:
            raise InvalidArgumentError(
                f"Shared queue '{name}' has component types {_type_names(self.dtypes)} but "
                f"requested component types were {_type_names(attrs['dtypes'])}")
        if attrs["capacity"] != self.capacity:
            raise InvalidArgumentError(
                f"Shared queue '{name}' has capacity {_capacity(self.capacity)} but requested "
                f"capacity was {_capacity(attrs['capacity'])}")
        if attrs["shapes"] != self.shapes:
            raise InvalidArgumentError(
                f"Shared queue '{name}' has component shapes {self.shapes} but requested "
                f"component shapes were {attrs['shapes']}")

    def _closed_error(self):
        return CancelledError(f"{self.kind} '{self.name}' is closed.")

    def _cancelled_error(self):
        return CancelledError("Enqueue operation was cancelled")

    def _insufficient_error(self, n):
        return OutOfRangeError(f"{self.kind} '{self.name}' is closed and has insufficient "
                               f"elements (requested {n}, current size {len(self.items)})")

    def batch(self, elements) -> list:
        """``dequeue_many``'s outputs: each component stacked along a new first axis."""
        return [np.stack([e[i] for e in elements]) if elements else
                np.zeros((0,) + tuple(d or 0 for d in (shape or ())), dtype.as_numpy_dtype)
                for i, (dtype, shape) in enumerate(zip(self.dtypes, self._shapes()))]

    def _shapes(self):
        return self.shapes or [None] * len(self.dtypes)


class PaddingQueueResource(QueueResource):
    """PaddingFIFOQueue: ``dequeue_many`` pads unknown dimensions to the batch's largest."""

    kind = "PaddingFIFOQueue"

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
    ``min_after_dequeue`` stay behind (until the queue is closed)."""

    kind = "RandomShuffleQueue"

    def __init__(self, op):
        super().__init__(op)
        self.min_after_dequeue = op.attrs["min_after_dequeue"]
        self.rng = np.random.default_rng(op.attrs["seed"])

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
    equal priorities leave in the order they came."""

    kind = "PriorityQueue"

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


def _capacity(capacity) -> int:
    return -1 if capacity == float("inf") else capacity


# -- the Python API --------------------------------------------------------------------------


class QueueBase:
    """tf.queue.QueueBase: the ops of a queue, built next to its queue op."""

    kind = "FIFOQueue"
    default_name = "fifo_queue"

    def __init__(self, capacity, dtypes, shapes=None, names=None, shared_name=None,
                 name=None, **extra):
        dtypes = [as_dtype(d) for d in (dtypes if isinstance(dtypes, (list, tuple))
                                        else [dtypes])]
        if shapes is not None:
            if all(d is None or isinstance(d, int) for d in shapes):
                shapes = [shapes]  # a flat list of dimensions is one shape, as in TF
            shapes = [tuple(s) for s in shapes]
            if len(shapes) != len(dtypes):
                raise ValueError(f"Queue shapes must have the same length as dtypes: "
                                 f"{len(shapes)} shapes for {len(dtypes)} dtypes")
        if names is not None:
            names = list(names) if isinstance(names, (list, tuple)) else [names]
            if len(names) != len(dtypes):
                raise ValueError(f"Queue names must have the same length as dtypes: "
                                 f"{len(names)} names for {len(dtypes)} dtypes")
        capacity = float("inf") if capacity is None or capacity < 0 else int(capacity)
        self.dtypes, self.shapes, self.names = dtypes, shapes, names
        attrs = {"capacity": capacity, "dtypes": dtypes, "shapes": shapes,
                 "shared_name": shared_name or "", **extra}
        self.queue_ref = create_op(QUEUE_OPS[self.kind], [], [(RESOURCE, ())], attrs,
                                   name or self.default_name).outputs[0]
        self.name = self.queue_ref.op.name

    # -- building ops --------------------------------------------------------------------

    def _op(self, op_type, suffix, inputs, outputs, name, attrs=None):
        graph = get_default_graph()
        with graph.colocate_with(self.queue_ref.op):
            return create_op(op_type, [self.queue_ref, *inputs], outputs, attrs,
                             name or f"{self.name}_{suffix}")

    def _components(self, vals, many: bool) -> list[Tensor]:
        """The tensors of one element (or, ``many``, of a batch), checked like TF."""
        if isinstance(vals, dict):
            if self.names is None:
                raise ValueError("Queue must have names to enqueue a dictionary")
            vals = [vals[n] for n in self.names]
        elif not isinstance(vals, (list, tuple)):
            vals = [vals]
        if len(vals) != len(self.dtypes):
            raise ValueError(f"the queue has {len(self.dtypes)} components, got {len(vals)} "
                             "values")
        tensors = []
        for value, dtype, shape in zip(vals, self.dtypes, self.shapes or [None] * len(vals)):
            if not isinstance(value, Tensor):
                array = np.asarray(value)
                if dtype.is_integer and array.dtype.kind == "f":
                    raise TypeError(f"Expected {dtype.name}, but got {value!r} of type "
                                    f"'{type(value).__name__}'.")
            tensor = convert_to_tensor(value, dtype=dtype)
            if shape is not None and tensor.shape is not None:
                have = tensor.shape[1:] if many else tensor.shape
                if len(have) != len(shape) or any(a is not None and b is not None and a != b
                                                  for a, b in zip(have, shape)):
                    raise ValueError(f"Shapes {format_shape(have)} and {format_shape(shape)} "
                                     "are incompatible")
            tensors.append(tensor)
        return tensors

    def _outputs(self, first=()) -> list:
        shapes = self.shapes or [None] * len(self.dtypes)
        return [(d, None if s is None else tuple(first) + s)
                for d, s in zip(self.dtypes, shapes)]

    def _result(self, op):
        outs = list(op.outputs)
        if self.names is not None:
            return dict(zip(self.names, outs))
        return outs[0] if len(outs) == 1 else outs

    def enqueue(self, vals, name=None):
        return self._op("QueueEnqueueV2", "enqueue", self._components(vals, False), [], name)

    def enqueue_many(self, vals, name=None):
        return self._op("QueueEnqueueManyV2", "EnqueueMany", self._components(vals, True), [],
                        name)

    def dequeue(self, name=None):
        return self._result(self._op("QueueDequeueV2", "Dequeue", [], self._outputs(), name))

    def dequeue_many(self, n, name=None):
        if self.shapes is None and self.kind != "PaddingFIFOQueue":
            outputs = [(d, None) for d in self.dtypes]
        else:
            outputs = self._outputs((n if isinstance(n, int) else None,))
        count = convert_to_tensor(n, dtype=int32)
        return self._result(self._op("QueueDequeueManyV2", "DequeueMany", [count], outputs,
                                     name))

    def dequeue_up_to(self, n, name=None):
        outputs = self._outputs((None,)) if self.shapes is not None else \
            [(d, None) for d in self.dtypes]
        count = convert_to_tensor(n, dtype=int32)
        return self._result(self._op("QueueDequeueUpToV2", "DequeueUpTo", [count], outputs,
                                     name))

    def close(self, cancel_pending_enqueues=False, name=None):
        return self._op("QueueCloseV2", "Close", [], [], name,
                        {"cancel_pending_enqueues": bool(cancel_pending_enqueues)})

    def is_closed(self, name=None):
        return self._op("QueueIsClosedV2", "Is_Closed", [], [("bool", ())], name).outputs[0]

    def size(self, name=None):
        return self._op("QueueSizeV2", "Size", [], [(int32, ())], name).outputs[0]


class FIFOQueue(QueueBase):
    """tf.queue.FIFOQueue(capacity, dtypes, shapes=None, names=None, shared_name=None,
    name="fifo_queue")."""


class PaddingFIFOQueue(QueueBase):
    """tf.queue.PaddingFIFOQueue(capacity, dtypes, shapes, ...): ``None`` dimensions are
    padded with zeros to the largest in a ``dequeue_many`` batch."""

    kind, default_name = "PaddingFIFOQueue", "padding_fifo_queue"

    def __init__(self, capacity, dtypes, shapes, names=None, shared_name=None,
                 name="padding_fifo_queue"):
        super().__init__(capacity, dtypes, shapes, names, shared_name, name)


class RandomShuffleQueue(QueueBase):
    """tf.queue.RandomShuffleQueue(capacity, min_after_dequeue, dtypes, shapes=None,
    names=None, seed=None, shared_name=None, name="random_shuffle_queue")."""

    kind, default_name = "RandomShuffleQueue", "random_shuffle_queue"

    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None, names=None,
                 seed=None, shared_name=None, name="random_shuffle_queue"):
        super().__init__(capacity, dtypes, shapes, names, shared_name, name,
                         min_after_dequeue=int(min_after_dequeue),
                         seed=0 if seed is None else int(seed))


class PriorityQueue(QueueBase):
    """tf.queue.PriorityQueue(capacity, types, shapes=None, names=None, shared_name=None,
    name="priority_queue"): each element's first component is its int64 priority."""

    kind, default_name = "PriorityQueue", "priority_queue"

    def __init__(self, capacity, types, shapes=None, names=None, shared_name=None,
                 name="priority_queue"):
        types = list(types) if isinstance(types, (list, tuple)) else [types]
        shapes = None if shapes is None else [()] + list(shapes)
        names = None if names is None else ["priority"] + list(names)
        super().__init__(capacity, [int64] + types, shapes, names, shared_name, name)


# -- kernels ---------------------------------------------------------------------------------


def _queue_kernel(op, args, rt):
    resources, key = rt.resources(op), resource_key(op)
    queue = resources.lookup(key)
    if queue is None:
        queue = RESOURCES[op.type[:-2]](op)
        resources.store(key, queue)
    else:
        try:
            queue.check_compatible(op)
        except InvalidArgumentError as error:
            raise InvalidArgumentError(f"{error}\n\t [[{{{{node {op.name}}}}}]]") from None
    return [queue]


def _element(queue, values) -> tuple:
    return tuple(np.array(v, d.as_numpy_dtype) for v, d in zip(values, queue.dtypes))


def _enqueue_kernel(op, args, rt):
    queue, *values = args
    yield from rt.wait(queue, queue.put(rt.env, [_element(queue, values)]), op)
    rt.record_size(queue)
    return []


def _enqueue_many_kernel(op, args, rt):
    queue, *values = args
    sizes = {np.shape(v)[0] if np.ndim(v) else None for v in values}
    if len(sizes) != 1 or None in sizes:
        raise InvalidArgumentError(
            f"Shape mismatch in tuple component 1. Expected [{next(iter(sizes))},...], got "
            f"{[list(np.shape(v)) for v in values]}\n\t [[{{{{node {op.name}}}}}]]")
    elements = [_element(queue, [v[i] for v in values]) for i in range(sizes.pop())]
    yield from rt.wait(queue, queue.put(rt.env, elements), op)
    rt.record_size(queue)
    return []


def _dequeue_kernel(op, args, rt):
    queue = args[0]
    (element,) = yield from rt.wait(queue, queue.get(rt.env, 1), op)
    rt.record_size(queue)
    return list(element)


def _dequeue_many_kernel(op, args, rt, up_to=False):
    queue, n = args[0], int(args[1])
    elements = yield from rt.wait(queue, queue.get(rt.env, n, up_to), op)
    rt.record_size(queue)
    return queue.batch(elements)


def _close_kernel(op, args, rt):
    queue = args[0]
    if queue.closed:
        raise CancelledError(f"Queue '{queue.name}' is already closed.\n\t "
                             f"[[{{{{node {op.name}}}}}]]")
    queue.close(op.attrs["cancel_pending_enqueues"])
    return []


for _type, _kernel in (
        *((QUEUE_OPS[kind], _queue_kernel) for kind in RESOURCES),
        ("QueueEnqueueV2", _enqueue_kernel),
        ("QueueEnqueueManyV2", _enqueue_many_kernel),
        ("QueueDequeueV2", _dequeue_kernel),
        ("QueueDequeueManyV2", _dequeue_many_kernel),
        ("QueueDequeueUpToV2", lambda op, args, rt: _dequeue_many_kernel(op, args, rt, True)),
        ("QueueCloseV2", _close_kernel),
        ("QueueSizeV2", lambda op, args, rt: [np.int32(len(args[0]))]),
        ("QueueIsClosedV2", lambda op, args, rt: [np.bool_(args[0].closed)])):
    register(_type, _kernel, flops=no_flops, gpu=lambda op: False, grad=NOT_DIFFERENTIABLE,
             stateful=True)
del _type, _kernel
