"""Models tf.gradients: reverse-mode differentiation that adds gradient ops to the graph.

Walks back from ``ys`` to ``xs`` through the ops between them, calls each op type's gradient
function (registered beside the op, see registry.py) and sums the gradients that reach a tensor
from several consumers. A ``gather`` gives an IndexedSlices (sparse); several IndexedSlices of
one tensor are concatenated, so duplicate indices stay and are summed when applied.
"""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError
from simdist.graph.array_ops import concat_rows, convert_to_tensor, ones_like, zeros_like
from simdist.graph.graph import Tensor, get_default_graph
from simdist.graph.indexed_slices import IndexedSlices
from simdist.graph.math_ops import add_n
from simdist.graph.registry import gradient_function


def _aggregate(grads: list):
    """Sum the gradients reaching one tensor (TF's AddN; IndexedSlices concatenated)."""
    grads = [g for g in grads if g is not None]
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    if all(isinstance(g, IndexedSlices) for g in grads):
        values = concat_rows([g.values for g in grads])
        indices = concat_rows([g.indices for g in grads])
        return IndexedSlices(values, indices, grads[0].dense_shape)
    return add_n([convert_to_tensor(g) for g in grads])


def gradients(ys, xs, grad_ys=None, name="gradients"):
    """tf.gradients: d(sum of ys)/d(x) for every x in ``xs`` (None where x does not matter)."""
    ys = [convert_to_tensor(y) for y in (ys if isinstance(ys, (list, tuple)) else [ys])]
    single = not isinstance(xs, (list, tuple))
    # a variable is differentiated through its reference, as TF's ``as_ref=True`` does: every
    # read of it (``v/read``, ``read_value()``) carries the gradient back to it
    xs = [x._ref() if hasattr(x, "_ref") else convert_to_tensor(x)
          for x in ([xs] if single else xs)]
    graph = get_default_graph()
    # the ops on a path from some x to some y
    reach_back = set()
    stack = [y.op for y in ys]
    while stack:
        op = stack.pop()
        if op in reach_back:
            continue
        reach_back.add(op)
        stack.extend(t.op for t in op.inputs)
    reach_fwd = set()
    stack = [x.op for x in xs]
    while stack:
        op = stack.pop()
        if op in reach_fwd or op not in reach_back:
            continue
        reach_fwd.add(op)
        stack.extend(c for t in op.outputs for c in t.consumers_list)
    between = reach_back & reach_fwd
    pending: dict[Tensor, list] = {}
    with graph.name_scope(name), graph.control_dependencies(None):
        for i, y in enumerate(ys):
            seed = (ones_like(y) if grad_ys is None or grad_ys[i] is None
                    else convert_to_tensor(grad_ys[i]))
            pending.setdefault(y, []).append(seed)
        for op in sorted(between, key=lambda o: o._id, reverse=True):
            out_grads = [_aggregate(pending.get(t, [])) for t in op.outputs]
            for t, g in zip(op.outputs, out_grads):
                pending[t] = [g]
            if all(g is None for g in out_grads) or not op.inputs \
                    or not any(t.op in between for t in op.inputs):
                continue
            grad_fn = gradient_function(op)
            if grad_fn is None:  # not differentiable: no gradient flows back
                continue
            out_grads = [zeros_like(t) if g is None else g
                         for t, g in zip(op.outputs, out_grads)]
            in_grads = grad_fn(op, out_grads)
            for t, g in zip(op.inputs, in_grads):
                if g is not None and t.op in between:
                    pending.setdefault(t, []).append(g)
        result = [_aggregate(pending.get(x, [])) for x in xs]
    for x, g in zip(xs, result):
        if g is not None and not isinstance(g, IndexedSlices) and g.dtype != x.dtype:
            raise InvalidArgumentError(f"gradient of {x.name!r} has dtype {g.dtype.name}")
    return result
