"""Models TF1's queues (tf.queue / data_flow_ops.py): FIFOQueue, PaddingFIFOQueue,
RandomShuffleQueue and PriorityQueue, built as TF 2.21 builds them (op names, node_def
attributes, the checks and messages of construction and of building their ops).

A queue is a resource in the resource container of the task that holds its device (as a
variable is), made by its queue op (``FIFOQueueV2``...) when a run first needs it and shared
under its ``shared_name`` by every session of the cluster. Its ops (enqueue, dequeue...)
are colocated with it. ``dequeue`` on an empty queue and ``enqueue`` on a full one block in
simulated time (their kernels, in ``queue_kernels.py``, wait on a
``simdist.sim.resources.Store``) while other ops, sessions and tasks go on. Each change of
a queue's size is a counter in the trace ("queue NAME"), so occupancy can be plotted.

Differs from TF on purpose: a queue's name in messages is its op name (TF shows an internal
"_0_q"); dtypes are the numeric ones simdist has (no strings).
"""

from __future__ import annotations

import re
from contextlib import nullcontext

from simdist.graph.array_ops import convert_to_tensor
from simdist.graph.dtypes import as_dtype, int32, int64
from simdist.graph.graph import Tensor, create_op, get_default_graph
from simdist.graph.queue_kernels import KERNELS
from simdist.graph.registry import NOT_DIFFERENTIABLE, no_flops, register

RESOURCE = "resource"
DEFAULT_GRAPH_SEED = 87654321  # TF's random_seed.DEFAULT_GRAPH_SEED


# -- the Python API --------------------------------------------------------------------------


def _as_type_list(dtypes) -> list:
    return [as_dtype(d) for d in (dtypes if isinstance(dtypes, (list, tuple)) else [dtypes])]


def _shape_repr(shape) -> str:
    """A shape as TF's ``TensorShape`` repr shows it."""
    if shape is None:
        return "TensorShape(None)"
    return "TensorShape([" + ", ".join(str(d) for d in shape) + "])"


def _shape_str(shape) -> str:
    """A shape as ``str(TensorShape)`` shows it: ``(3, None)``, ``<unknown>``."""
    return "<unknown>" if shape is None else str(tuple(shape))


def _as_shape_list(shapes, unknown_dim_allowed=False):
    """TF's ``_as_shape_list``: a flat list of dimensions is one shape."""
    if unknown_dim_allowed and (not isinstance(shapes, (list, tuple)) or not shapes or any(
            s is None or isinstance(s, int) for s in shapes)):
        raise ValueError("When providing partial shapes, a list of shapes must be provided.")
    if shapes is None:
        return None
    if not isinstance(shapes, (tuple, list)):
        raise TypeError("Shapes must be a TensorShape or a list or tuple of TensorShapes, "
                        f"got {type(shapes)} instead.")
    if all(s is None or isinstance(s, int) for s in shapes):
        shapes = [shapes]
    shapes = [None if s is None else tuple(None if d is None else int(d) for d in (
        s if isinstance(s, (list, tuple)) else (s,))) for s in shapes]  # 2 is the shape (2,)
    if not unknown_dim_allowed and any(s is None or None in s for s in shapes):
        raise ValueError("All shapes must be fully defined: "
                         f"[{', '.join(_shape_repr(s) for s in shapes)}]")
    if any(s is None for s in shapes):
        raise ValueError("All shapes must have a defined rank: "
                         f"[{', '.join(_shape_repr(s) for s in shapes)}]")
    return shapes


def _as_name_list(names, dtypes):
    if names is None:
        return None
    names = list(names) if isinstance(names, (list, tuple)) else [names]
    if len(names) != len(dtypes):
        raise ValueError("List of names must have the same length as the list of dtypes, "
                         f"received len(names)={len(names)},len(dtypes)={len(dtypes)}")
    return names


def _compatible(have, want) -> bool:
    return have is None or want is None or (len(have) == len(want) and all(
        a is None or b is None or a == b for a, b in zip(have, want)))


def assert_compatible(have, want):
    """TF's ``TensorShape.assert_is_compatible_with``."""
    if not _compatible(have, want):
        raise ValueError(f"Shapes {_shape_str(have)} and {_shape_str(want)} are incompatible")


def _python_scalars(value):
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _python_scalars(item)
    elif isinstance(value, (bool, int, float)):
        yield value


def convert_component(value, dtype, name):
    """A queue component as TF converts it: Python floats are refused for integer and bool
    components, and Python ints for bool ones."""
    if not isinstance(value, Tensor):
        for item in _python_scalars(value):
            if (isinstance(item, float) and (dtype.is_integer or dtype.name == "bool")) or (
                    dtype.name == "bool" and not isinstance(item, bool)):
                raise TypeError(f"Expected {dtype.name}, but got {item!r} of type "
                                f"'{type(item).__name__}'.")
    return convert_to_tensor(value, dtype=dtype, name=name)


def _queue_op(kind, attrs, name, cpu=False):
    """The queue op, out of any control dependencies (TF's ``init_scope``); TF 2.21 builds a
    FIFOQueue's under ``tf.device("CPU")``. As in TF, a refused op still takes its name."""
    graph = get_default_graph()
    with graph.control_dependencies(None), graph.name_scope(name) as scope:
        if attrs["shapes"] is None:
            raise TypeError(f"Expected list for 'shapes' argument to '{_snake(kind)}_v2' Op, "
                            "not None.")
        if not attrs["component_types"] and kind != "PriorityQueue":
            raise ValueError(f"Attr 'component_types' of '{kind}V2' Op passed list of length "
                             "0 less than minimum 1.")
        with graph.device("/device:CPU:*") if cpu else nullcontext():
            op = create_op(f"{kind}V2", [], [(RESOURCE, ())], attrs, scope)
    op.attrs["container"] = op.container
    return op.outputs[0]


def _snake(kind: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", kind).lower().replace("f_i_f_o", "fifo")


def _attrs(dtypes, shapes, capacity, shared_name, **extra) -> dict:
    return {"component_types": list(dtypes), "shapes": list(shapes or []),
            "capacity": -1 if capacity is None else int(capacity), "container": "",
            "shared_name": shared_name or "", **extra}


class QueueBase:
    """tf.queue.QueueBase(dtypes, shapes, names, queue_ref): the ops of a queue, built next
    to its queue op. ``shapes`` has one entry per component (None: unknown)."""

    def __init__(self, dtypes, shapes, names, queue_ref):
        self._dtypes = list(dtypes)
        if shapes is not None:
            if len(shapes) != len(dtypes):
                raise ValueError("Queue shapes must have the same length as dtypes, received "
                                 f"len(shapes)={len(shapes)}, len(dtypes)={len(dtypes)}")
            self._shapes = [None if s is None else tuple(s) for s in shapes]
        else:
            self._shapes = [None] * len(dtypes)
        if names is not None and len(names) != len(dtypes):
            raise ValueError("Queue names must have the same length as dtypes,received "
                             f"len(names)={len(names)},len {len(dtypes)}")
        self._names = names
        self._queue_ref = queue_ref
        self._name = queue_ref.op.name.split("/")[-1]

    queue_ref = property(lambda self: self._queue_ref)
    name = property(lambda self: self._queue_ref.op.name)
    dtypes = property(lambda self: self._dtypes)
    shapes = property(lambda self: self._shapes)
    names = property(lambda self: self._names)

    # -- building ops --------------------------------------------------------------------

    def _op(self, op_type, inputs, outputs, name, attrs=None):
        with get_default_graph().colocate_with(self._queue_ref.op):
            return create_op(op_type, [self._queue_ref, *inputs], outputs, attrs, name)

    def _check_enqueue_dtypes(self, vals) -> list[Tensor]:
        if isinstance(vals, dict):
            if not self._names:
                raise ValueError("Queue must have names to enqueue a dictionary")
            if sorted(self._names, key=str) != sorted(vals.keys(), key=str):
                raise ValueError("Keys in dictionary to enqueue do not match names of Queue.  "
                                 f"Dictionary: {sorted(vals.keys())},"
                                 f"Queue: {sorted(self._names)}")
            vals = [vals[k] for k in self._names]
        else:
            if self._names:
                raise ValueError("You must enqueue a dictionary in a Queue with names")
            if not isinstance(vals, (list, tuple)):
                vals = [vals]
        return [convert_component(val, dtype, f"component_{i}")
                for i, (val, dtype) in enumerate(zip(vals, self._dtypes))]

    def _enqueue_attrs(self, tensors) -> dict:
        return {"Tcomponents": [t.dtype for t in tensors], "timeout_ms": -1}

    def _dequeue_attrs(self) -> dict:
        return {"component_types": list(self._dtypes), "timeout_ms": -1}

    def _result(self, op):
        outs = list(op.outputs)
        if self._names:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else outs

    def enqueue(self, vals, name=None):
        # TF's name scope: its name is taken even when the build then fails
        with get_default_graph().name_scope(name or f"{self._name}_enqueue") as scope:
            tensors = self._check_enqueue_dtypes(vals)
            for tensor, shape in zip(tensors, self._shapes):
                assert_compatible(tensor.shape, shape)
            return self._op("QueueEnqueueV2", tensors, [], scope, self._enqueue_attrs(tensors))

    def enqueue_many(self, vals, name=None):
        with get_default_graph().name_scope(name or f"{self._name}_EnqueueMany") as scope:
            tensors = self._check_enqueue_dtypes(vals)
            batch = _batch_dim(tensors[0].shape)
            for tensor, shape in zip(tensors, self._shapes):
                size = _batch_dim(tensor.shape)
                if batch is not None and size is not None and batch != size:
                    raise ValueError(f"Dimensions {batch} and {size} are not compatible")
                batch = size if batch is None else batch
                assert_compatible(None if tensor.shape is None else tensor.shape[1:], shape)
            return self._op("QueueEnqueueManyV2", tensors, [], scope,
                            self._enqueue_attrs(tensors))

    def _outputs(self, first=()) -> list:
        """(dtype, shape) of each output; ``first``: the batch dimension in front."""
        return [(d, None if s is None else (*first, *s))
                for d, s in zip(self._dtypes, self._shapes)]

    def dequeue(self, name=None):
        return self._result(self._op("QueueDequeueV2", [], self._outputs(),
                                     name or f"{self._name}_Dequeue", self._dequeue_attrs()))

    def _dequeue_n(self, op_type, n, name, batch):
        with get_default_graph().name_scope(name) as scope:
            count = convert_to_tensor(n, dtype=int32, name="n")
            if op_type == "QueueDequeueManyV2" and isinstance(n, int) and n < 0:
                types = ", ".join(f"DT_{d.name.upper().replace('FLOAT32', 'FLOAT')}"
                                  .replace("FLOAT64", "DOUBLE") for d in self._dtypes)
                raise ValueError(
                    f"Input 'n' must be >= 0, but is {n} for '{{{{node {scope[:-1]}}}}} = "
                    f"{op_type}[component_types=[{types}], timeout_ms=-1]({self.name}, "
                    f"{count.op.name})' with input shapes: [], [] and with computed input "
                    f"tensors: input[1] = <{n}>.")
            return self._result(self._op(op_type, [count], self._outputs((batch,)), scope,
                                         self._dequeue_attrs()))

    def dequeue_many(self, n, name=None):
        batch = n if isinstance(n, int) else None
        return self._dequeue_n("QueueDequeueManyV2", n, name or f"{self._name}_DequeueMany",
                               batch)

    def dequeue_up_to(self, n, name=None):
        return self._dequeue_n("QueueDequeueUpToV2", n, name or f"{self._name}_DequeueUpTo",
                               None)

    def close(self, cancel_pending_enqueues=False, name=None):
        return self._op("QueueCloseV2", [], [], name or f"{self._name}_Close",
                        {"cancel_pending_enqueues": bool(cancel_pending_enqueues)})

    def is_closed(self, name=None):
        return self._op("QueueIsClosedV2", [], [("bool", ())],
                        name or f"{self._name}_Is_Closed").outputs[0]

    def size(self, name=None):
        return self._op("QueueSizeV2", [], [(int32, ())],
                        name or f"{self._name}_Size").outputs[0]


def _batch_dim(shape):
    """The first dimension of an ``enqueue_many`` component (TF: rank at least 1)."""
    if shape is None:
        return None
    if not shape:
        raise ValueError(f"Shape {_shape_str(shape)} must have rank at least 1")
    return shape[0]


class FIFOQueue(QueueBase):
    """tf.queue.FIFOQueue(capacity, dtypes, shapes=None, names=None, shared_name=None,
    name="fifo_queue")."""

    def __init__(self, capacity, dtypes, shapes=None, names=None, shared_name=None,
                 name="fifo_queue"):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes)
        names = _as_name_list(names, dtypes)
        ref = _queue_op("FIFOQueue", _attrs(dtypes, shapes, capacity, shared_name), name,
                        cpu=True)
        super().__init__(dtypes, shapes, names, ref)


class PaddingFIFOQueue(QueueBase):
    """tf.queue.PaddingFIFOQueue(capacity, dtypes, shapes, ...): ``None`` dimensions are
    padded with zeros to the largest in a ``dequeue_many`` batch."""

    def __init__(self, capacity, dtypes, shapes, names=None, shared_name=None,
                 name="padding_fifo_queue"):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes, unknown_dim_allowed=True)
        names = _as_name_list(names, dtypes)
        if len(dtypes) != len(shapes):
            raise ValueError("Shapes must be provided for all components, but received "
                             f"{len(dtypes)} dtypes and {len(shapes)} shapes.")
        ref = _queue_op("PaddingFIFOQueue", _attrs(dtypes, shapes, capacity, shared_name),
                        name)
        super().__init__(dtypes, shapes, names, ref)


class RandomShuffleQueue(QueueBase):
    """tf.queue.RandomShuffleQueue(capacity, min_after_dequeue, dtypes, shapes=None,
    names=None, seed=None, shared_name=None, name="random_shuffle_queue"). Seeds as TF's
    ``get_seed`` makes them without a graph seed: (0, 0), or (87654321, seed)."""

    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None, names=None,
                 seed=None, shared_name=None, name="random_shuffle_queue"):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes)
        names = _as_name_list(names, dtypes)
        seed, seed2 = (0, 0) if seed is None else (DEFAULT_GRAPH_SEED, int(seed))
        attrs = _attrs(dtypes, shapes, capacity, shared_name,
                       min_after_dequeue=int(min_after_dequeue), seed=seed, seed2=seed2)
        super().__init__(dtypes, shapes, names, _queue_op("RandomShuffleQueue", attrs, name))


class PriorityQueue(QueueBase):
    """tf.queue.PriorityQueue(capacity, types, shapes=None, names=None, shared_name=None,
    name="priority_queue"): each element's first component is its int64 priority (its
    ``names``, if any, name it too)."""

    def __init__(self, capacity, types, shapes=None, names=None, shared_name=None,
                 name="priority_queue"):
        types = _as_type_list(types)
        shapes = _as_shape_list(shapes)
        attrs = _attrs(types, shapes, capacity, shared_name)
        if shapes is None:
            attrs["shapes"] = None  # TF's op refuses it (its shapes attr has no default)
        ref = _queue_op("PriorityQueue", attrs, name)
        super().__init__([int64] + types, [()] + shapes if shapes else shapes,
                         None if names is None else list(names), ref)


for _type, _kernel in KERNELS:
    register(_type, _kernel, flops=no_flops, gpu=lambda op: False, grad=NOT_DIFFERENTIABLE,
             stateful=True)
del _type, _kernel
