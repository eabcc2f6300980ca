"""Models TF's op and kernel registries: what each op type computes, costs and differentiates to.

Each op type is declared once, beside its builder, in the file of its family (array_ops.py,
math_ops.py, nn_ops.py, control_flow_ops.py, variables.py, optimizers.py): ``register`` records
its numpy kernel (``compute``), the FLOP count the cost model uses, which devices have a kernel
for it (TF registers kernels per op *and* device type, so an int32 variable has no GPU kernel)
and its gradient, which every registration must decide: a function, ``NOT_DIFFERENTIABLE`` or
``NO_GRADIENT``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simdist.base.errors import InvalidArgumentError, NotFoundError

#: ``grad=`` for TF's ``tf.no_gradient(op_type)``: no gradient flows back through the op
NOT_DIFFERENTIABLE = "not differentiable"
#: ``grad=`` for an op TF registers no gradient for: ``tf.gradients`` through it is an error
NO_GRADIENT = "no gradient"


def _floating(op) -> bool:
    """A GPU kernel exists for floating-point outputs only (TF: no int32 GPU kernels)."""
    return all(t.dtype.is_floating for t in op.outputs) if op.outputs else True


def _any_type(op) -> bool:
    return True


def _elementwise(op, args, outs) -> int:
    return sum(int(np.size(o)) for o in outs if o is not None)


def no_flops(op, args, outs) -> int:
    """The FLOPs of an op that only moves or creates data."""
    return 0


def numpy_kernel(fn):
    """A kernel computing ``fn(*inputs)`` in numpy, cast to the op's output dtype."""
    return lambda op, args, rt: [np.asarray(fn(*args), op.outputs[0].dtype.as_numpy_dtype)]


@dataclass(frozen=True)
class OpDef:
    """One op type: numpy kernel, FLOPs, device kernels, gradient decision, state."""

    name: str
    compute: Callable  # (op, input values, runtime) -> list of output values
    flops: Callable  # (op, input values, output values) -> FLOPs
    gpu: Callable  # (op) -> True when a GPU kernel is registered
    grad: Callable | str  # (op, output grads) -> input grads, or NOT_DIFFERENTIABLE, NO_GRADIENT
    stateful: bool  # touches a variable's buffer (drawn as "variable" in traces)
    ref_input: bool  # its first input is a variable reference, not the variable's value


OP_DEFS: dict[str, OpDef] = {}
#: op types whose first input is a variable reference, not its value (the executor's lookup)
REF_INPUT_OPS: set[str] = set()
ANY_TYPE = _any_type


def register(name, compute, *, grad, flops=_elementwise, gpu=_floating, stateful=False,
             ref_input=False):
    """Declare op type ``name``: TF's REGISTER_OP, REGISTER_KERNEL_BUILDER and
    RegisterGradient in one call."""
    if not (callable(grad) or grad in (NOT_DIFFERENTIABLE, NO_GRADIENT)):
        raise TypeError(f"op type {name!r}: grad must be a gradient function, "
                                   f"NOT_DIFFERENTIABLE or NO_GRADIENT, got {grad!r}")
    OP_DEFS[name] = OpDef(name, compute, flops, gpu, grad, stateful, ref_input)
    if ref_input:
        REF_INPUT_OPS.add(name)


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
    """The gradient function of ``op``'s type; None when it is not differentiable."""
    grad = op_def(op.type).grad
    if grad == NO_GRADIENT:
        raise InvalidArgumentError(f"no gradient is defined for op {op.name!r} of type "
                                   f"{op.type}")
    return None if grad == NOT_DIFFERENTIABLE else grad
