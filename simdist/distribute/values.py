"""Distributed values: ``PerReplica``, ``Mirrored`` and ``MirroredVariable`` (tf.distribute).

A strategy with several replicas holds one component per local replica: ``PerReplica``
values differ between replicas (each replica's slice of the batch, its gradients),
``Mirrored`` values are the same on every replica (an all-reduced gradient), and a
``MirroredVariable`` keeps one copy of a variable on every replica's device, kept identical by
applying the same update everywhere.
"""

from __future__ import annotations

import numpy as np


class PerReplica:
    """One value per local replica (``tf.distribute.DistributedValues``)."""

    def __init__(self, values):
        self.values = tuple(values)

    def __repr__(self):
        inner = ", ".join(f"{i}: {_short(v)}" for i, v in enumerate(self.values))
        return f"{type(self).__name__}({{{inner}}})"


class Mirrored(PerReplica):
    """The same value on every local replica."""


class MirroredVariable(Mirrored):
    """A variable with a copy on every replica's device (``tf.distribute.MirroredVariable``).

    ``devices`` names where each copy lives (CentralStorageStrategy keeps one copy, on the
    host CPU, which every replica reads).
    """

    def __init__(self, name: str, values, devices):
        super().__init__([np.array(v, copy=True) for v in values])
        self.name, self.devices = name, tuple(devices)

    def numpy(self) -> np.ndarray:
        """The primary copy (what ``var.numpy()`` returns)."""
        return self.values[0]

    @property
    def shape(self):
        return self.values[0].shape

    def assign_each(self, new_values) -> None:
        self.values = tuple(new_values)

    def __repr__(self):
        return (f"MirroredVariable({self.name!r}, shape={self.shape}, "
                f"copies on {list(self.devices)})")


def local_value(value, replica: int):
    """The component of ``value`` for a local replica (plain values are shared as they are);
    dicts, lists and tuples are walked."""
    if isinstance(value, PerReplica):
        return value.values[0] if len(value.values) == 1 else value.values[replica]
    if isinstance(value, dict):
        return {k: local_value(v, replica) for k, v in value.items()}
    if isinstance(value, list):
        return [local_value(v, replica) for v in value]
    if isinstance(value, tuple):  # a DistributedBatch too (args=batch, as in TF)
        return tuple(local_value(v, replica) for v in value)
    return value


def regroup(per_replica_outputs: list):
    """Outputs of the replicas (same structure each) into one structure of ``PerReplica``."""
    first = per_replica_outputs[0]
    if isinstance(first, dict):
        return {k: regroup([o[k] for o in per_replica_outputs]) for k in first}
    if isinstance(first, (list, tuple)):
        return type(first)(regroup([o[i] for o in per_replica_outputs])
                           for i in range(len(first)))
    return PerReplica(per_replica_outputs)


def _short(v) -> str:
    if isinstance(v, np.ndarray):
        return f"array{v.shape} {v.dtype}"
    return repr(v)
