"""Models tf.IndexedSlices: a sparse gradient (rows ``indices`` of a ``dense_shape`` tensor).

The gradient of ``gather`` (an embedding lookup) is one: only the looked-up rows are sent and
updated. Duplicate indices are allowed and mean "add these rows together".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class IndexedSlices:
    """A sparse gradient in the graph: tensors ``values``, ``indices`` and ``dense_shape``
    (None when not known, as TF allows)."""

    def __init__(self, values, indices, dense_shape=None):
        self.values, self.indices, self.dense_shape = values, indices, dense_shape

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def graph(self):
        return self.values.graph

    @property
    def op(self):
        return self.values.op

    @property
    def device(self):
        return self.values.device

    def __repr__(self):
        return (f"IndexedSlices(indices={self.indices.name}, values={self.values.name}, "
                f"dense_shape={getattr(self.dense_shape, 'name', None)})")


@dataclass
class IndexedSlicesValue:
    """What ``Session.run`` returns for an IndexedSlices (tf.compat.v1.IndexedSlicesValue)."""

    values: np.ndarray
    indices: np.ndarray
    dense_shape: np.ndarray | None = None

    def to_dense(self) -> np.ndarray:
        """The dense tensor: rows with duplicate indices are summed."""
        dense = np.zeros(tuple(int(d) for d in self.dense_shape), self.values.dtype)
        np.add.at(dense, self.indices, self.values)
        return dense
