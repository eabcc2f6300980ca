"""Models TF's op and kernel registries: what each op type computes, costs and differentiates to.

An ``OpDef`` holds the numpy kernel (``compute``), the FLOP count the cost model uses, which
devices have a kernel for it (TF registers kernels per op *and* device type, so an int32
variable has no GPU kernel) and the gradient function used by ``gradients``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError, NotFoundError


def _floating(op) -> bool:
    """A GPU kernel exists for floating-point outputs only (TF: no int32 GPU kernels)."""
    return all(t.dtype.is_floating for t in op.outputs) if op.outputs else True


def _any_type(op) -> bool:
    return True


def _elementwise(op, args, outs) -> int:
    return sum(int(np.size(o)) for o in outs if o is not None)


@dataclass(frozen=True)
class OpDef:
    """One op type: numpy kernel, FLOPs, device kernels, gradient (None: not differentiable)."""

    name: str
    compute: Callable  # (op, input values, runtime) -> list of output values
    flops: Callable = _elementwise  # (op, input values, output values) -> FLOPs
    gpu: Callable = _floating  # (op) -> True when a GPU kernel is registered
    grad: Callable | None = None  # (op, output grads) -> input grads (tensors or None)
    stateful: bool = False


OP_DEFS: dict[str, OpDef] = {}
ANY_TYPE = _any_type


def register(name, compute, flops=_elementwise, gpu=_floating, grad=None, stateful=False):
    OP_DEFS[name] = OpDef(name, compute, flops, gpu, grad, stateful)


def op_def(op_type: str) -> OpDef:
    if op_type not in OP_DEFS:
        raise NotFoundError(f"op type {op_type!r} is not registered: known op types are "
                            f"{', '.join(sorted(OP_DEFS))}")
    return OP_DEFS[op_type]


def has_kernel(op, device_type: str) -> bool:
    """TF's kernel lookup: every registered op has a CPU kernel; GPU kernels per OpDef."""
    if device_type == "CPU":
        return True
    if device_type == "GPU":
        return op_def(op.type).gpu(op)
    return False


def gradient_function(op):
    definition = op_def(op.type)
    if definition.grad is None:
        raise InvalidArgumentError(f"no gradient is defined for op {op.name!r} of type "
                                   f"{op.type}")
    return definition.grad
