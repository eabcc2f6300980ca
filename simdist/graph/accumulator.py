"""Models tf.compat.v1.ConditionalAccumulator: where SyncReplicasOptimizer gathers gradients.

The accumulator is a resource of the task that holds its device (shared under its
``shared_name``, as a queue is). ``apply_grad(grad, local_step)`` adds a gradient unless it
is stale (``local_step`` below the accumulator's global step: it is dropped, silently, as TF
does); ``take_grad(n)`` blocks in simulated time until ``n`` gradients are in, returns their
mean (or sum), empties the accumulator and moves its global step on by one;
``set_global_step`` sets it. Facts checked on TF 2.21: the op names and types, the drop
rule, the step increment on a take, the errors.

``SparseConditionalAccumulator`` does the same for IndexedSlices gradients (an embedding's):
it merges each gradient's rows into a list of (index, row sum, count) entries, so the MEAN
it returns divides each entry by its own count (a row only one worker touched is not
divided), as TF 2.21's kernel does, quirks included (see ``SparseAccumulatorResource``).
"""

from __future__ import annotations

import weakref
from collections import Counter, deque

import numpy as np

from simdist.hardware.device_spec import DeviceSpec
from simdist.base.errors import InvalidArgumentError
from simdist.graph.array_ops import convert_to_tensor
from simdist.graph.dtypes import as_dtype, int32, int64
from simdist.graph.data_flow_ops import assert_compatible
from simdist.graph.graph import create_op, get_default_graph
from simdist.graph.indexed_slices import IndexedSlices
from simdist.graph.math_ops import cast
from simdist.graph.registry import NOT_DIFFERENTIABLE, no_flops, register
from simdist.graph.queue_kernels import tf_dims
from simdist.graph.variables import resource_key

RESOURCE = "resource"

_TALLIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def gradient_tally(env) -> Counter:
    """{(accumulator, sending device, added): gradients} of every accumulator of the
    simulation ``env``: the "gradient applied" / "gradient dropped" instants of the trace,
    counted whole however much of the trace its cap keeps, and kept when a ps restart
    loses the accumulators themselves (simdist's bookkeeping: TF counts nothing)."""
    tally = _TALLIES.get(env)
    if tally is None:
        tally = _TALLIES[env] = Counter()
    return tally


class AccumulatorResource:
    """The kernel state of one accumulator: a running sum, a count, a global step, and the
    take requests waiting for enough gradients (served in order)."""

    def __init__(self, op):
        self.name = op.attrs["shared_name"] or op.name
        self.dtype, self.shape = op.attrs["dtype"], op.attrs["shape"]
        self.reduction = op.attrs["reduction_type"]
        self.sum, self.count, self.global_step = None, 0, 0
        self.takers: deque = deque()

    def validate(self, grad, op):
        """TF's ValidateShape: the gradients already in, then the accumulator's shape."""
        have = np.shape(grad)
        if self.count and have != np.shape(self.sum):
            raise InvalidArgumentError(_node(
                f"Shape mismatch: expected {tf_dims(np.shape(self.sum))}, got "
                f"{tf_dims(have)}", op))
        if self.shape is not None and (len(have) != len(self.shape) or any(
                d is not None and d != h for d, h in zip(self.shape, have))):
            raise InvalidArgumentError(_node(
                f"Shape mismatch: expected {tf_dims(self.shape)}, got {tf_dims(have)}", op))

    def __len__(self) -> int:
        return self.count

    def apply(self, grad, local_step: int) -> bool:
        """Add ``grad`` unless it is stale; True when it was added."""
        if local_step < self.global_step:
            return False
        self._add(grad)
        self.count += 1
        self._dispatch()
        return True

    def _add(self, grad: np.ndarray):
        self.sum = grad.copy() if self.sum is None else self.sum + grad

    def _aggregate(self):
        total = self.sum if self.reduction == "SUM" else self.sum / self.count
        return np.asarray(total, self.dtype.as_numpy_dtype)

    def take(self, env, n: int):
        """An event whose value is the aggregated gradient, once ``n`` are in."""
        self.takers = deque(t for t in self.takers if t[0].env is env)  # drop dead worlds'
        event = env.event(desc=f"take {n} gradients from {self.name}")
        self.takers.append((event, n))
        self._dispatch()
        return event

    def fail_waiters(self, error):
        """Fail every waiting take with ``error`` (the task holding it died)."""
        takers, self.takers = self.takers, deque()
        for event, _ in takers:
            event.fail(error)

    def cancel(self, event, error):
        self.takers = deque(t for t in self.takers if t[0] is not event)
        event.fail(error)

    def _dispatch(self):
        if self.takers and self.count >= self.takers[0][1]:
            event, _ = self.takers.popleft()
            total = self._aggregate()
            self.sum, self.count = None, 0
            self.global_step += 1
            event.succeed(total)


class SparseAccumulatorResource(AccumulatorResource):
    """A sparse accumulator's state, kept as TF 2.21's kernel keeps it: a list of entries
    (index, row sum, count). The first gradient is copied as it is (repeated indices stay
    separate entries); each later one is merged into the list by one walk that assumes both
    are in increasing index order: equal indices add their rows and count one more, the
    rest are copied. MEAN divides each entry by its own count."""

    def validate(self, grad, op, grad_shape=None):
        """TF's GetAndValidateTensorInputForApplyGrad and ValidateShape, in its order."""
        indices, values = grad
        if indices.ndim != 1:
            raise InvalidArgumentError(_node(
                f"Input indices should be vector but received shape: "
                f"{tf_dims(indices.shape)}", op))
        if values.ndim == 0:
            raise InvalidArgumentError(_node("Values cannot be 0-dimensional.", op))
        if values.shape[0] != len(indices):
            raise InvalidArgumentError(_node(
                f"Expected {len(indices)} non-empty input values, got {values.shape[0]}", op))
        shape = self.shape
        if grad_shape is not None and shape is not None:
            if len(shape) > len(grad_shape):
                raise InvalidArgumentError(_node(
                    f"Shape mismatch: expected shape rank at least {len(shape)}, got "
                    f"{len(grad_shape)}", op))
            for i, dim in enumerate(shape):
                if dim is not None and dim != grad_shape[i]:
                    raise InvalidArgumentError(_node(
                        f"Shape mismatch: expected shape dim {i} to be {dim}, got "
                        f"{grad_shape[i]}", op))
        if shape and shape[0] is not None:
            for i, index in enumerate(indices):
                if index >= shape[0]:
                    raise InvalidArgumentError(_node(
                        f"Shape mismatch: index of slice {i} exceeded limits of shape; index "
                        f"is {index} exceeded {shape[0]}", op))
        if self.count:
            want = self.value_shape
            if len(want) != values.ndim:
                raise InvalidArgumentError(_node(
                    f"Shape mismatch: expected values rank {len(want)}, got {values.ndim}", op))
            dims = [(i, want[i]) for i in range(1, len(want))]
        else:
            if shape is not None and len(shape) > values.ndim:
                raise InvalidArgumentError(_node(
                    f"Shape mismatch: expected values rank at least {len(shape)}, got "
                    f"{values.ndim}", op))
            dims = [(i, d) for i, d in enumerate(shape or ()) if i and d is not None]
        for i, dim in dims:
            if dim != values.shape[i]:
                raise InvalidArgumentError(_node(
                    f"Shape mismatch: expected values dim {i} to be {dim}, got "
                    f"{values.shape[i]}", op))

    def _add(self, grad):
        indices, values = grad
        if self.sum is None:
            self.sum = (indices.tolist(), list(values), [1] * len(indices))
            self.value_shape = values.shape
            return
        accumulated, rows, counts = self.sum
        merged: tuple[list, list, list] = ([], [], [])
        i = j = 0
        while i < len(accumulated) or j < len(indices):
            take_old = j == len(indices) or (i < len(accumulated)
                                             and accumulated[i] <= indices[j])
            both = take_old and j < len(indices) and accumulated[i] == indices[j]
            if take_old:
                row, count = rows[i] + values[j] if both else rows[i], counts[i] + both
                entry = (accumulated[i], row, count)
                i, j = i + 1, j + both
            else:
                entry = (int(indices[j]), values[j], 1)
                j += 1
            for column, value in zip(merged, entry):
                column.append(value)
        self.sum = merged

    def _aggregate(self):
        indices, rows, counts = self.sum
        numpy_dtype = self.dtype.as_numpy_dtype
        if self.reduction == "MEAN":
            rows = [row / count for row, count in zip(rows, counts)]
        row_shape = self.value_shape[1:]
        values = np.array(rows, numpy_dtype).reshape((len(rows), *row_shape))
        first = self.shape[0] if self.shape and self.shape[0] is not None else -1
        return (np.array(indices, np.int64), values, np.array((first, *row_shape), np.int64))


class ConditionalAccumulator:
    """tf.compat.v1.ConditionalAccumulator(dtype, shape=None, shared_name=None,
    name="conditional_accumulator", reduction_type="MEAN")."""

    _KERNEL = "ResourceConditionalAccumulator"  # the accumulator's op type
    _OPS = "ResourceAccumulator"  # the prefix of its NumAccumulated and SetGlobalStep ops

    def __init__(self, dtype, shape=None, shared_name=None, name="conditional_accumulator",
                 reduction_type="MEAN"):
        self.dtype = as_dtype(dtype)
        self.shape = None if shape is None else tuple(shape)
        graph = get_default_graph()
        with graph.name_scope(name) as scope:  # TF's op building takes the name first
            if reduction_type not in ("MEAN", "SUM"):
                raise ValueError(f"Attr 'reduction_type' of '{self._KERNEL}' Op passed string "
                                 f"'{reduction_type}' not in: \"MEAN\", \"SUM\".")
            op = create_op(self._KERNEL, [], [(RESOURCE, ())],
                           {"container": "", "dtype": self.dtype, "shape": self.shape,
                            "shared_name": shared_name or "",
                            "reduction_type": reduction_type}, scope)
        op.attrs["container"] = op.container
        self.accumulator_ref = op.outputs[0]
        self.name = op.name

    def _op(self, op_type, inputs, outputs, name, attrs=None):
        with get_default_graph().colocate_with(self.accumulator_ref.op):
            return create_op(op_type, [self.accumulator_ref, *inputs], outputs, attrs, name)

    def apply_grad(self, grad, local_step=0, name=None):
        grad = convert_to_tensor(grad, dtype=self.dtype)
        assert_compatible(grad.shape, self.shape)
        step = cast(convert_to_tensor(local_step), int64)
        return self._op("ResourceAccumulatorApplyGradient", [step, grad], [],
                        name or "ResourceAccumulatorApplyGradient")

    def take_grad(self, num_required, name=None):
        count = convert_to_tensor(num_required, dtype=int32)
        return self._op("ResourceAccumulatorTakeGradient", [count],
                        [(self.dtype, self.shape)],
                        name or "ResourceAccumulatorTakeGradient").outputs[0]

    def num_accumulated(self, name=None):
        return self._op(f"{self._OPS}NumAccumulated", [], [(int32, ())],
                        name or f"{self.name}_NumAccumulated").outputs[0]

    def set_global_step(self, new_global_step, name=None):
        step = cast(convert_to_tensor(new_global_step), int64)
        return self._op(f"{self._OPS}SetGlobalStep", [step], [],
                        name or f"{self._OPS}SetGlobalStep")


class SparseConditionalAccumulator(ConditionalAccumulator):
    """tf.compat.v1.SparseConditionalAccumulator(dtype, shape=None, shared_name=None,
    name="sparse_conditional_accumulator", reduction_type="MEAN"): gathers IndexedSlices."""

    _KERNEL, _OPS = "SparseConditionalAccumulator", "Accumulator"  # TF1's ref ops

    def __init__(self, dtype, shape=None, shared_name=None,
                 name="sparse_conditional_accumulator", reduction_type="MEAN"):
        super().__init__(dtype, shape, shared_name, name, reduction_type)

    def apply_indexed_slices_grad(self, grad, local_step=0, name=None):
        if not isinstance(grad, IndexedSlices):
            raise TypeError(f"apply_indexed_slices_grad: expected an IndexedSlices, got "
                            f"{type(grad).__name__}")
        op = self.apply_grad(grad.indices, grad.values, grad.dense_shape, local_step, name)
        # simdist's gather gradient keeps the lookup's index shape where TF's makes a
        # vector: the kernel flattens this op's slices as TF's gradient would have
        op.attrs["_flatten_slices"] = True  # internal, as TF's "_class"
        return op

    def apply_grad(self, grad_indices, grad_values, grad_shape=None, local_step=0, name=None):
        step = cast(convert_to_tensor(local_step), int64)
        shape = cast(np.zeros(0, np.int64) if grad_shape is None else grad_shape, int64)
        return self._op("SparseAccumulatorApplyGradient",
                        [step, cast(grad_indices, int64),
                         convert_to_tensor(grad_values, dtype=self.dtype), shape], [],
                        name or "SparseAccumulatorApplyGradient",
                        {"dtype": self.dtype, "has_known_shape": grad_shape is not None})

    def take_grad(self, num_required, name=None):
        """(indices, values, shape) of the aggregated gradient, once ``num_required`` are in."""
        count = convert_to_tensor(num_required, dtype=int32)
        row = None if self.shape is None else self.shape[1:]
        return tuple(self._op(
            "SparseAccumulatorTakeGradient", [count],
            [(int64, (None,)), (self.dtype, None if row is None else (None, *row)),
             (int64, (None,))], name or "SparseAccumulatorTakeGradient").outputs)

    def take_indexed_slices_grad(self, num_required, name=None) -> IndexedSlices:
        indices, values, shape = self.take_grad(num_required, name)
        return IndexedSlices(values, indices, shape)


# -- kernels ---------------------------------------------------------------------------------


def _accumulator_kernel(op, args, rt):
    resources, key = rt.resources(op), resource_key(op)
    accumulator = resources.lookup(key)
    if accumulator is None:
        sparse = op.type == "SparseConditionalAccumulator"
        accumulator = (SparseAccumulatorResource if sparse else AccumulatorResource)(op)
        resources.store(key, accumulator)
    return [accumulator]


def _apply_kernel(op, args, rt):
    accumulator, step, grad = args
    if int(step) >= accumulator.global_step:  # TF checks only the gradients it keeps
        accumulator.validate(grad, op)
    _apply(op, accumulator, step, np.asarray(grad, accumulator.dtype.as_numpy_dtype), rt,
           source=op.inputs[2])
    return []


def _apply(op, accumulator, step, grad, rt, source):
    global_step = accumulator.global_step  # before a take this gradient completes moves it
    added = accumulator.apply(grad, int(step))
    rt.record_size(accumulator)
    # the sender: the device of its local step (SyncReplicasOptimizer keeps it on the
    # worker), as the gradient may come from an op on the ps (a cast back from float16)
    sender = _task_of(op.inputs[1]) or _task_of(source)
    gradient_tally(rt.env)[(accumulator.name, sender, added)] += 1
    rt.record("accumulators", "gradient applied" if added else "gradient dropped",
              accumulator=accumulator.name, local_step=int(step),
              global_step=global_step, source=sender)


def _task_of(tensor) -> str:
    """"/job:J/task:T" of the op that made ``tensor`` (for a ``_Recv`` of the master's
    partition, of the op that sent it), or "" when unplaced."""
    op = tensor.op
    device = op.attrs.get("send_device", "") if op.type == "_Recv" else op.device
    spec = DeviceSpec.from_string(device or "")
    return f"/job:{spec.job}/task:{spec.task or 0}" if spec.job else (device or "")


def _sparse_apply_kernel(op, args, rt):
    accumulator, step, indices, values, shape = args
    indices = np.asarray(indices, np.int64)
    values = np.asarray(values, accumulator.dtype.as_numpy_dtype)
    if op.attrs.get("_flatten_slices") and indices.ndim != 1:
        # TF's gather gradient reshapes its indices to a vector and its values to match
        values = values.reshape((indices.size, *values.shape[indices.ndim:]))
        indices = indices.reshape(-1)
    known = op.attrs.get("has_known_shape", True)
    if int(step) >= accumulator.global_step:
        accumulator.validate((indices, values), op,
                             np.asarray(shape).tolist() if known else None)
    _apply(op, accumulator, step, (indices, values), rt,
           source=op.inputs[3])
    return []


def _node(message: str, op) -> str:
    return f"{message}\n\t [[{{{{node {op.name}}}}}]]"


def _take_kernel(op, args, rt):
    accumulator, n = args[0], int(args[1])
    if n < 1:
        raise InvalidArgumentError(f"Argument num_required must be positive, but was {n}\n\t "
                                   f"[[{{{{node {op.name}}}}}]]")
    total = yield from rt.wait(accumulator, accumulator.take(rt.env, n), op)
    rt.record_size(accumulator)
    return list(total) if isinstance(total, tuple) else [total]


def _set_step_kernel(op, args, rt):
    accumulator, step = args
    accumulator.global_step = int(step)  # TF only logs a warning when it goes back
    return []


def _num_accumulated_kernel(op, args, rt):
    return [np.int32(len(args[0]))]


# the dense accumulator's ops are resource ops in TF 2.x; the sparse one's are TF1's ref ops
for _type, _kernel in (("ResourceConditionalAccumulator", _accumulator_kernel),
                       ("ResourceAccumulatorApplyGradient", _apply_kernel),
                       ("ResourceAccumulatorTakeGradient", _take_kernel),
                       ("ResourceAccumulatorSetGlobalStep", _set_step_kernel),
                       ("ResourceAccumulatorNumAccumulated", _num_accumulated_kernel),
                       ("SparseConditionalAccumulator", _accumulator_kernel),
                       ("SparseAccumulatorApplyGradient", _sparse_apply_kernel),
                       ("SparseAccumulatorTakeGradient", _take_kernel),
                       ("AccumulatorSetGlobalStep", _set_step_kernel),
                       ("AccumulatorNumAccumulated", _num_accumulated_kernel)):
    register(_type, _kernel, flops=no_flops, gpu=lambda op: False, grad=NOT_DIFFERENTIABLE,
             stateful=True)
del _type, _kernel
