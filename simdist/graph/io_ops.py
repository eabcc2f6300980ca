"""Models the cost of TF1's reader ops (``TFRecordReader.read`` and kin): I/O latency.

A read waits on a disk or a remote file system, not on a CPU, which is why TF1 input
pipelines ran several enqueue threads. simdist has no files to read: ``read_record`` is a
``SimulatedRead`` op (a simdist op, not a TF one) that stands for such a read.
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.graph.dtypes import float32
from simdist.graph.graph import create_op
from simdist.graph.registry import NOT_DIFFERENTIABLE, no_flops, register
from simdist.graph.script_ops import op_rng


def read_record(size: int, read_us: float, seed: int, stall_us: float = 0.0,
                stall_probability: float = 0.0, name="read_record"):
    """A ``SimulatedRead`` op: it stands for a reader's read (``TFRecordReader.read``): it
    waits an I/O latency without occupying a CPU and yields a [size] float32 record of ones.
    A read takes ``read_us``, except that with ``stall_probability`` it stalls for
    ``stall_us`` instead (a slow disk, a remote file system's hiccup), drawn from a seeded
    generator kept with the op's task."""
    if not 0 <= stall_probability <= 1:
        raise InvalidArgumentError(f"read_record: stall_probability={stall_probability!r}, "
                                   "expected a probability in [0, 1]")
    return create_op("SimulatedRead", [], [(float32, (size,))],
                     {"size": size, "read_ns": int(read_us * 1000),
                      "stall_ns": int(stall_us * 1000), "stall_probability": stall_probability,
                      "seed": int(seed)}, name).outputs[0]


def _read_kernel(op, args, rt):
    stalls = op_rng(op, rt).random() < op.attrs["stall_probability"]
    yield rt.env.timeout(op.attrs["stall_ns" if stalls else "read_ns"])
    return [np.ones(op.attrs["size"], np.float32)]


register("SimulatedRead", _read_kernel, flops=no_flops, grad=NOT_DIFFERENTIABLE,
         gpu=lambda op: False, stateful=True)
