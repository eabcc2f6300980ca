"""The spec of TF1's between-graph program on parameter servers (``train_on_ps``): its
options as one checked record, ``PSTrainingSpec``, and the problem it trains, a linear
regression whose examples are cut in one shard per worker (``shard``). realdist's
``real_train_on_ps`` trains on the same shards.

The options are held to the rules every command shares (``simdist.base.checks``: seeds,
learning rates, times, probabilities, sizes and their memory caps) and to the run's limits
(``RunLimits``, the commands' defaults unless given): a step, a stall or a failure later than
its simulated time is refused, and so are sizes that promise more events than its
``max_events`` (``cost``), before anything runs."""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simdist.base.checks import (check_int, check_learning_rate, check_memory,
                                 check_probability, check_seed, check_time)
from simdist.base.errors import InvalidArgumentError, check_ints
from simdist.distribute.failures import Failure
from simdist.hardware.stragglers import NONE, Stragglers, parse_stragglers
from simdist.sim.limits import DEFAULT_LIMITS, RunLimits, check_events, check_limits

FEATURES = 8
NONZEROS = 8  # features per example in the sparse model
MODES = ("sync", "async")
MODELS = ("dense", "sparse")
GRADIENT_DTYPES = ("float32", "float16")
#: the most workers and ps tasks: each is a client thread with its own graph and session
#: (1,024 workers take about 650 MB and minutes for one step)
MAX_WORKERS, MAX_PS = 512, 64
#: the most bytes of weights over all workers: each worker's read of the weights and its
#: gradient are in flight at once, about nine copies (64 workers x 1M features: 2.4 GB)
MODEL_BYTES = 128 << 20
#: the events of one worker's step and of a worker's start, and what each ps task adds to a
#: step (``PSTrainingSpec.cost``, measured: within 1.5x above the runs' own counts)
STEP_EVENTS, START_EVENTS, PS_STEP_EVENTS = 250, 600, 90


@dataclass
class PSTrainingSpec:
    """``train_on_ps``'s options, checked when made (one line naming the bad option).

    ``step_us`` (one per worker, default 1 ms each) is each worker's compute time per step;
    with ``stall_probability`` a step takes ``stall_us`` instead (seeded per worker: random
    stragglers); with ``stragglers`` ("lognormal:0.3", "exponential:0.1", "empirical:FILE")
    each step's time is multiplied by a factor drawn per worker and step. The remedies for stale gradients, asynchronous mode only:
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
    #: each step's compute time times a factor drawn per worker and step (a
    #: ``Stragglers`` or its spec, "lognormal:0.3": ``simdist.hardware.stragglers``)
    stragglers: Stragglers | str = NONE
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
    #: the run's limits (events, simulated time; the command's --timeout): None, none
    limits: RunLimits | None = DEFAULT_LIMITS

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
        if not isinstance(self.stragglers, Stragglers):
            try:
                self.stragglers = parse_stragglers(self.stragglers)
            except InvalidArgumentError as error:
                raise _refused(f"stragglers (--stragglers): {error}") from None
        self._check_values()
        self._check_sizes()

    def _check_cluster(self):
        check_ints("train_on_ps", workers=self.workers, ps=self.ps, steps=self.steps)
        beyond = "simdist's cap (each task is a client thread with its own graph)"
        check_int(self.workers, "train_on_ps: workers (--workers)", 1, MAX_WORKERS, beyond)
        check_int(self.ps, "train_on_ps: ps (--ps)", 1, MAX_PS, beyond)
        if len(self.step_us) != self.workers or not all(
                isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0
                for t in self.step_us):
            raise _refused(f"step_us={self.step_us!r}, expected {self.workers} step times "
                           "in us (numbers >= 0), one per worker")
        if self.replicas_to_aggregate is not None:
            check_ints("train_on_ps", replicas_to_aggregate=self.replicas_to_aggregate)

    def _check_values(self):
        """Seeds, rates, times and probabilities by the shared rules; a time no longer than
        the run's limit on simulated time."""
        check_limits(self.limits, "train_on_ps: limits")
        most = self.limits.max_sim_time if self.limits is not None else None
        check_seed(self.seed, "train_on_ps: seed (--seed)")
        check_learning_rate(self.learning_rate, "train_on_ps: learning_rate (--learning-rate)")
        for k, t in enumerate(self.step_us):
            check_time(t, f"train_on_ps: step_us[{k}] (--step-us)", "us", 1000, most)
        check_time(self.stall_us, "train_on_ps: stall_us (--stall-us)", "us", 1000, most)
        check_probability(self.stall_probability,
                          "train_on_ps: stall_probability (--stall-probability)")
        check_int(self.warmup_steps, "train_on_ps: warmup_steps (--warmup-steps)", 0)
        check_int(self.worker_timeout_ms, "train_on_ps: worker_timeout_ms", 1)
        check_time(self.stop_grace_period_secs, "train_on_ps: stop_grace_period_secs", "s",
                   10**9, None)
        for f in self.failures:
            label = f"train_on_ps: failure of {f.task} (--fail)"
            check_time(f.at_ns / 1e9, f"{label}: its time", "s", 10**9, most)
            if f.down_ns is not None:
                check_time(f.down_ns / 1e9, f"{label}: its downtime", "s", 10**9, most)
        if self.save_checkpoint_steps is not None:
            check_int(self.save_checkpoint_steps,
                      "train_on_ps: save_checkpoint_steps (--save-checkpoint-steps)")
        check_checkpoint_dir(self.checkpoint_dir)

    def _check_sizes(self):
        """The arrays the sizes make, under the memory cap; the events, under the limit."""
        w, e, f = self.workers, self.examples, self.features
        if self.model == "dense":
            check_memory(w * e * f * 4, f"train_on_ps: workers x examples x features x 4 "
                         f"bytes ({w:,} x {e:,} x {f:,} x 4)",
                         "give fewer --examples, --features or --workers")
        check_memory(w * f * 4, f"train_on_ps: workers x features x 4 bytes ({w:,} x {f:,} "
                     "x 4: each worker reads the weights and sends a gradient)",
                     "give fewer --features or --workers", MODEL_BYTES)
        if self.limits is not None:
            check_events(self.cost, self.limits.max_events,
                         "give fewer --steps or --workers (train_on_ps: steps, workers)")

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
    def cost(self) -> int:
        """About the events of the run: sync, every worker runs every step; async, the
        workers share the steps (two runs each with a staleness remedy); workers other
        than worker 0 poll once a ms while it warms up."""
        per_step = STEP_EVENTS + PS_STEP_EVENTS * self.ps
        if self.mode == "sync":
            runs = self.workers * (self.steps + 1)
        else:
            runs = (self.steps + self.workers) * (2 if self.two_phase else 1)
        polls = (self.workers - 1) * min(self.warmup_steps, self.steps) * int(
            self.step_us[0] / 1000 + 1) if self.warmup_steps else 0
        return runs * per_step + self.workers * START_EVENTS + polls * STEP_EVENTS

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


def check_checkpoint_dir(path) -> None:
    """``checkpoint_dir`` before the run: a folder (or none yet) whose latest checkpoint, if
    it has one, reads whole; a corrupt one is TF's DataLossError, in one line."""
    from simdist.base.errors import DataLossError

    if path is None:
        return
    if not isinstance(path, (str, Path)) or not str(path):
        raise _refused(f"checkpoint_dir={path!r}, expected a folder's path")
    folder = Path(path)
    for part in (folder, *folder.parents):
        if part.exists() and not part.is_dir():
            raise _refused(f"checkpoint_dir '{path}' (--checkpoint-dir): '{part}' is a file, "
                           "expected a folder (one that exists, or one to make)")
    from simdist.graph.saver import latest_checkpoint

    what = f"the checkpoint state file '{folder / 'checkpoint'}'"
    try:
        latest = latest_checkpoint(folder)
        if latest is not None:
            what = f"the checkpoint '{latest}.npz'"
            with np.load(f"{latest}.npz", allow_pickle=False) as data:
                for name in data.files:
                    data[name]  # reads and checks each array
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as error:
        reason = str(error).split("\n")[0] or type(error).__name__
        raise DataLossError(f"train_on_ps: checkpoint_dir '{path}' (--checkpoint-dir): {what} "
                            f"is corrupt ({reason}): remove it, or give another folder") from None


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
