"""The spec of TF1's between-graph program on parameter servers (``train_on_ps``): its
options as one checked record, ``PSTrainingSpec``, and the problem it trains, a linear
regression whose examples are cut in one shard per worker (``shard``). realdist's
``real_train_on_ps`` trains on the same shards."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simdist.base.errors import InvalidArgumentError, check_ints
from simdist.distribute.failures import Failure

FEATURES = 8
NONZEROS = 8  # features per example in the sparse model
MODES = ("sync", "async")
MODELS = ("dense", "sparse")
GRADIENT_DTYPES = ("float32", "float16")


@dataclass
class PSTrainingSpec:
    """``train_on_ps``'s options, checked when made (one line naming the bad option).

    ``step_us`` (one per worker, default 1 ms each) is each worker's compute time per step;
    with ``stall_probability`` a step takes ``stall_us`` instead (seeded per worker: random
    stragglers). The remedies for stale gradients, asynchronous mode only:
    ``max_staleness`` drops a gradient staler than that, ``staleness_weighting`` scales it
    by 1 / (1 + staleness), ``warmup_steps`` lets worker 0 train alone until the global
    step reaches it. A non-chief worker runs with ``operation_timeout_in_ms =
    worker_timeout_ms``. ``failures``: "ps:0@8ms+2ms" (``simdist.distribute.failures``) or
    Failure records, kept as Failure records."""

    workers: int = 3
    ps: int = 1
    mode: str = "sync"
    steps: int = 10
    step_us: list | None = None
    replicas_to_aggregate: int | None = None
    learning_rate: float = 0.05
    seed: int = 0
    stop_grace_period_secs: float = 1.0
    stall_us: float = 0.0
    stall_probability: float = 0.0
    max_staleness: int | None = None
    staleness_weighting: bool = False
    warmup_steps: int = 0
    worker_timeout_ms: int = 1000
    failures: tuple = ()
    checkpoint_dir: str | None = None
    save_checkpoint_steps: int | None = None
    features: int = FEATURES
    examples: int = 32
    gradient_dtype: str = "float32"
    model: str = "dense"

    def __post_init__(self):
        if self.mode not in MODES:
            raise _refused(f"mode={self.mode!r}, expected 'sync' or 'async'")
        self.step_us = list(self.step_us) if self.step_us is not None else [1000.0] * (
            self.workers if isinstance(self.workers, int) else 0)
        self._check_cluster()
        if self.mode == "sync" and self.aggregate > self.workers:
            raise _refused(
                f"replicas_to_aggregate={self.aggregate} is more than the {self.workers} "
                "workers: TF (and simdist's SyncReplicasOptimizer) would accept it and fill "
                "each step with several gradients of one worker, which is not what the "
                "program studies")
        self._check_remedies()
        check_ints("train_on_ps", features=self.features, examples=self.examples)
        if self.gradient_dtype not in GRADIENT_DTYPES:
            raise _refused(f"gradient_dtype={self.gradient_dtype!r}, expected 'float32' or "
                           "'float16'")
        if self.model not in MODELS:
            raise _refused(f"model={self.model!r}, expected 'dense' or 'sparse'")
        if self.model == "sparse" and (self.two_phase or self.ps > 1
                                       or self.gradient_dtype != "float32"):
            raise _refused(
                "the sparse model is built for one ps with float32 gradients and no "
                "staleness remedy (sharding it would need a partitioned embedding, which "
                "simdist does not have yet)")
        if self.gradient_dtype == "float16" and self.two_phase:
            raise _refused("float16 gradients with max_staleness or staleness_weighting are "
                           "not built: choose one")
        self.failures = tuple(Failure.parse(f) for f in self.failures)

    def _check_cluster(self):
        check_ints("train_on_ps", workers=self.workers, ps=self.ps, steps=self.steps)
        if len(self.step_us) != self.workers or not all(
                isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0
                for t in self.step_us):
            raise _refused(f"step_us={self.step_us!r}, expected {self.workers} step times "
                           "in us (numbers >= 0), one per worker")
        if self.replicas_to_aggregate is not None:
            check_ints("train_on_ps", replicas_to_aggregate=self.replicas_to_aggregate)

    def _check_remedies(self):
        if self.mode == "sync" and (self.max_staleness is not None or self.staleness_weighting
                                    or self.warmup_steps):
            raise _refused("max_staleness, staleness_weighting and warmup_steps are remedies "
                           "for asynchronous training: use them with mode='async'")
        most = self.max_staleness
        if most is not None and (isinstance(most, bool) or not isinstance(most, int)
                                 or most < 0):
            raise _refused(f"max_staleness={most!r}, expected an int >= 0 or None")

    @property
    def aggregate(self) -> int:
        """Gradients per synchronous step (``replicas_to_aggregate``, default every worker)."""
        return self.replicas_to_aggregate or self.workers

    @property
    def two_phase(self) -> bool:
        """A worker computes its gradient in one run and applies it in another (the
        staleness remedies need the global step in between, as a TF1 program does)."""
        return self.max_staleness is not None or self.staleness_weighting


def _refused(what: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"train_on_ps: {what}")


def shard(worker: int, seed: int, features: int = FEATURES, examples: int = 32,
          model: str = "dense"):
    """Worker ``worker``'s examples of one regression problem (the true weights are
    shared): (x, y, ids). Dense: x is [examples, features] and ids None; sparse: each
    example has NONZEROS feature ``ids`` (seeded) with the values x [examples, NONZEROS]."""
    truth = np.random.default_rng(seed).normal(size=features).astype(np.float32)
    if model == "sparse":
        rng = np.random.default_rng(seed + 1000 + worker)
        ids = rng.integers(0, features, size=(examples, NONZEROS)).astype(np.int32)
        x = rng.normal(size=(examples, NONZEROS)).astype(np.float32)
        return x, (truth[ids] * x).sum(axis=1).astype(np.float32), ids
    x = (np.random.default_rng(seed + 1 + worker).normal(size=(examples, features))
         / np.sqrt(features / FEATURES)).astype(np.float32)
    return x, (x @ truth).astype(np.float32), None
