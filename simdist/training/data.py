"""The datasets of the exercises and how a global batch is cut into replicas' slices.

Datasets are plain numpy arrays (float32 features, float32 targets or int32 labels), made
deterministically from a seed or read from a package that ships them, so that simdist and
realdist train on the same examples in the same order:

- ``regression``: y = x @ w_true + b_true + noise;
- ``classification``: Gaussian blobs, one per class;
- ``digits``: scikit-learn's bundled 8x8 handwritten digits (1797 images, no download);
- ``vocab``: the toy examples of TF's parameter-server tutorial: three words drawn from a
  seven-word vocabulary, label 1 when "avenger" is among them.

``global_batches`` is ``dataset.shuffle(...).batch(B).repeat()`` with a deterministic shuffle
per epoch; ``simdist.distribute.input_lib.split_global_batch`` cuts one global batch into
per-replica batches.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from simdist.base.errors import InvalidArgumentError

#: the vocabulary of TF's parameter-server tutorial (id 0 is kept for out-of-vocabulary words)
TUTORIAL_VOCAB = ("[UNK]", "avenger", "ironman", "batman", "hulk", "spiderman", "kingkong",
                  "wonder_woman")


@dataclass
class Dataset:
    """Examples ``x`` and targets ``y`` (numpy), with what a model needs to fit them."""

    name: str
    x: np.ndarray
    y: np.ndarray
    n_features: int
    n_outputs: int  # regression outputs, classes, or the vocabulary size
    task: str  # "regression", "classification" or "binary"

    def __len__(self) -> int:
        return len(self.x)


def regression(n: int = 1024, features: int = 8, outputs: int = 1, noise: float = 0.1,
               seed: int = 0) -> Dataset:
    rng = np.random.default_rng([seed, 1])
    x = rng.standard_normal((n, features)).astype(np.float32)
    w = rng.standard_normal((features, outputs)).astype(np.float32)
    y = x @ w + 0.5 + noise * rng.standard_normal((n, outputs)).astype(np.float32)
    return Dataset("regression", x, y.astype(np.float32), features, outputs, "regression")


def classification(n: int = 1024, features: int = 8, classes: int = 4, seed: int = 0) -> Dataset:
    rng = np.random.default_rng([seed, 2])
    centres = 2.0 * rng.standard_normal((classes, features))
    y = rng.integers(0, classes, n).astype(np.int32)
    x = (centres[y] + rng.standard_normal((n, features))).astype(np.float32)
    return Dataset("classification", x, y, features, classes, "classification")


@functools.cache
def digits() -> Dataset:
    """scikit-learn's 8x8 digits, pixels scaled to [0, 1] (it ships them: no download).

    Read once per process (sklearn parses a CSV each call: a calibration fit builds the
    dataset hundreds of times) and shared, so its arrays are read-only."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int32)
    x.flags.writeable = y.flags.writeable = False
    return Dataset("digits", x, y, 64, 10, "classification")


def vocab(n: int = 1024, seed: int = 0) -> Dataset:
    """TF's parameter-server tutorial data as token ids (its StringLookup already applied)."""
    rng = np.random.default_rng([seed, 3])
    x = rng.integers(1, len(TUTORIAL_VOCAB), (n, 3)).astype(np.int32)
    y = (x == TUTORIAL_VOCAB.index("avenger")).any(axis=1).astype(np.float32)
    return Dataset("vocab", x, y, 3, len(TUTORIAL_VOCAB), "binary")


DATASETS = {"regression": regression, "classification": classification, "digits": digits,
            "vocab": vocab}


def load_dataset(name: str, seed: int = 0) -> Dataset:
    if name not in DATASETS:
        raise InvalidArgumentError(f"unknown dataset {name!r}: expected one of "
                                   f"{', '.join(DATASETS)}")
    return DATASETS[name]() if name == "digits" else DATASETS[name](seed=seed)


def global_batches(dataset: Dataset, global_batch: int, steps: int, seed: int = 0):
    """The first ``steps`` global batches of ``shuffle -> batch(global_batch) -> repeat``.

    Each epoch is a fresh permutation drawn from (seed, epoch); the last batch of an epoch
    is partial when the dataset size is not a multiple of the batch (as ``batch`` without
    ``drop_remainder``). Yields (x, y) numpy pairs.
    """
    if not isinstance(global_batch, (int, np.integer)) or global_batch < 1:
        raise InvalidArgumentError(f"global batch must be an int >= 1, got {global_batch!r}")
    n, epoch, produced = len(dataset), 0, 0
    while produced < steps:
        order = np.random.default_rng([seed, 4, epoch]).permutation(n)
        for start in range(0, n, global_batch):
            if produced == steps:
                return
            idx = order[start:start + global_batch]
            yield dataset.x[idx], dataset.y[idx]
            produced += 1
        epoch += 1
