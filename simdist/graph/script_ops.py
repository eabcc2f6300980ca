"""Models a ``tf.py_func`` whose Python body takes a fixed time (TF's ``script_ops``).

realdist's measured programs stand their "train" and "predict" steps in for with
``py_func`` ops that sleep for the time asked (``realdist.queue_tasks.timed_py_func``);
``timed_py_func`` is the simulated counterpart, so a simulated run and a real one do the
same work. Like the real sleep, the op holds its inter-op thread for ``duration_us`` but no
FLOPs; it yields the sum of its inputs as a float32 scalar (so it depends on them).
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .dtypes import float32
from .graph import create_op
from .registry import NOT_DIFFERENTIABLE, no_flops, register


def timed_py_func(inputs, duration_us: float, name: str = "PyFunc"):
    """A ``SimulatedPyFunc`` op (a simdist op): ``duration_us`` of simulated time, then the
    sum of ``inputs`` (a list of tensors) as a float32 scalar."""
    if isinstance(duration_us, bool) or not isinstance(duration_us, (int, float)) \
            or not duration_us >= 0:
        raise InvalidArgumentError(f"timed_py_func: duration_us={duration_us!r}, expected a "
                                   "number of microseconds >= 0")
    return create_op("SimulatedPyFunc", list(inputs), [(float32, ())],
                     {"duration_ns": int(duration_us * 1000)}, name).outputs[0]


def _py_func_kernel(op, args, rt):
    yield rt.env.timeout(op.attrs["duration_ns"])
    return [np.float32(sum(float(np.sum(a)) for a in args))]


register("SimulatedPyFunc", _py_func_kernel, flops=no_flops, grad=NOT_DIFFERENTIABLE,
         gpu=lambda op: False, stateful=True)
