"""Models a ``tf.py_func`` whose Python body takes a fixed time (TF's ``script_ops``).

realdist's measured programs stand their "train" and "predict" steps in for with
``py_func`` ops that sleep for the time asked (``realdist.training.queue_tasks.timed_py_func``);
``timed_py_func`` is the simulated counterpart, so a simulated run and a real one do the
same work. Like the real sleep, the op holds its inter-op thread for ``duration_us`` but no
FLOPs; it yields the sum of its inputs as a float32 scalar (so it depends on them).
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.graph.dtypes import float32
from simdist.graph.graph import create_op
from simdist.graph.registry import NOT_DIFFERENTIABLE, no_flops, register


def timed_py_func(inputs, duration_us: float, name: str = "PyFunc", stall_us: float = 0.0,
                  stall_probability: float = 0.0, seed: int = 0, stragglers=None,
                  worker: int = 0):
    """A ``SimulatedPyFunc`` op (a simdist op): ``duration_us`` of simulated time, then the
    sum of ``inputs`` (a list of tensors) as a float32 scalar. With ``stall_probability``
    a run takes ``stall_us`` instead (a straggler's slow step: another job on its machine, a
    garbage collection), drawn from a seeded generator kept with the op's task. With
    ``stragglers`` (an active ``simdist.hardware.stragglers.Stragglers``) each run's time is
    multiplied by a factor drawn from worker ``worker``'s own generator (``seed``, as
    ``simdist run data_parallel --stragglers`` draws)."""
    for label, value in (("duration_us", duration_us), ("stall_us", stall_us)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise InvalidArgumentError(f"timed_py_func: {label}={value!r}, expected a number "
                                       "of microseconds >= 0")
    if not 0 <= stall_probability <= 1:
        raise InvalidArgumentError(f"timed_py_func: stall_probability={stall_probability!r}, "
                                   "expected a probability in [0, 1]")
    attrs = {"duration_ns": int(duration_us * 1000), "stall_ns": int(stall_us * 1000),
             "stall_probability": stall_probability, "seed": int(seed)}
    if stragglers is not None and stragglers.active:  # absent otherwise: the same GraphDef
        attrs["stragglers"], attrs["worker"] = stragglers, int(worker)
    return create_op("SimulatedPyFunc", list(inputs), [(float32, ())], attrs, name).outputs[0]


def op_rng(op, rt) -> np.random.Generator:
    """The seeded generator of ``op`` on its task (made at its first run, kept after)."""
    resources, key = rt.resources(op), ("", f"{op.name}/rng")
    rng = resources.lookup(key)
    if rng is None:
        rng = np.random.default_rng(op.attrs["seed"])
        resources.store(key, rng)
    return rng


def _factor(op, rt) -> float:
    """This run's straggler factor: 1 without ``stragglers``; else drawn from the worker's
    generator, kept with the op's task (made at its first run)."""
    stragglers = op.attrs.get("stragglers")
    if stragglers is None:
        return 1.0
    resources, key = rt.resources(op), ("", f"{op.name}/stragglers")
    rng = resources.lookup(key)
    if rng is None:
        rng = stragglers.generator(op.attrs["seed"], op.attrs["worker"])
        resources.store(key, rng)
    return stragglers.draw(rng)


def _py_func_kernel(op, args, rt):
    stalls = op.attrs["stall_probability"] > 0 and \
        op_rng(op, rt).random() < op.attrs["stall_probability"]
    factor = _factor(op, rt)
    yield rt.env.timeout(round(op.attrs["stall_ns" if stalls else "duration_ns"] * factor))
    return [np.float32(sum(float(np.sum(a)) for a in args))]


register("SimulatedPyFunc", _py_func_kernel, flops=no_flops, grad=NOT_DIFFERENTIABLE,
         gpu=lambda op: False, stateful=True)
