"""Models TF's tf.no_op and tf.group: ops that compute nothing and only order others."""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError
from simdist.graph.graph import Operation, Tensor, create_op, get_default_graph
from simdist.graph.registry import ANY_TYPE, NOT_DIFFERENTIABLE, no_flops, register


def no_op(name=None) -> Operation:
    return create_op("NoOp", [], [], name=name)


def group(*inputs, name=None) -> Operation:
    """tf.group: a NoOp that runs after every input (control edges only). As TF builds it,
    the NoOp sits on the inputs' device; inputs on several devices get one NoOp per device
    (in device order) and the returned NoOp runs after those, so that a group of updates on
    a ps task does not send each of them to the client's device."""
    ops = []
    for item in inputs:
        for x in (item if isinstance(item, (list, tuple)) else [item]):
            x = x.op if isinstance(x, Tensor) or hasattr(x, "_as_tensor") else x
            if not isinstance(x, Operation):
                raise InvalidArgumentError(f"tf.group takes ops and tensors, got {x!r}")
            ops.append(x)
    graph = get_default_graph()
    if not ops:
        return no_op(name=name)
    by_device: dict = {}
    for op in ops:
        by_device.setdefault(op.device, []).append(op)
    with graph.name_scope(name or "group_deps") as scope:
        if len(by_device) == 1:
            ((device, deps),) = by_device.items()
            return _group_on(graph, device, deps, scope)
        per_device = [_group_on(graph, device, by_device[device], None)
                      for device in sorted(by_device)]
        with graph.control_dependencies(per_device):
            return no_op(name=scope)


def _group_on(graph, device, deps, name) -> Operation:
    with graph.control_dependencies(deps), graph.device(device):
        return no_op(name=name)


register("NoOp", lambda op, args, rt: [], flops=no_flops, gpu=ANY_TYPE, grad=NOT_DIFFERENTIABLE)
