"""The measuring protocol: how an exercise's step time is measured on real TensorFlow, shared
by ``simdist calibrate`` and ``simdist bench predict`` (which ask for the runs and read the
results) and ``realdist measure`` (which runs them).

A plan of exercises runs ``REPEAT`` times by default, each pass in its own order
(``pass_order``); the first ``SKIPPED_STEPS`` steps of each run are left out
(``kept_steps``) and an exercise's kept steps are pooled over its runs. With ``--extra K``
an exercise whose runs have not ``settled`` after the planned passes is run again, up to K
more times.
"""

from __future__ import annotations

import random

import numpy as np

from simdist.base.errors import InvalidArgumentError

#: steps left out of each run: step 0 traces the ``tf.function``s, the next ones still warm
#: caches up
SKIPPED_STEPS = 5
#: the fewest steps a run keeps, and so the fewest it needs
MIN_KEPT_STEPS = 3
MIN_STEPS = SKIPPED_STEPS + MIN_KEPT_STEPS
#: training steps per run by default: a run of 40 steps lasts a few tenths of a second on the
#: 2-core development machine, and its median moves about twice as much from run to run
STEPS = 100
#: runs per exercise by default (passes through the plan), their steps pooled
REPEAT = 3
#: by default, the runs an unsettled exercise may get after the planned passes
EXTRA_RUNS = 0
#: an exercise is run again (``--extra``) while the standard error of its runs' medians is
#: above this fraction of their mean
SETTLED = 0.05


def pass_order(n: int, p: int) -> list[int]:
    """The order of pass ``p`` through a plan of ``n`` exercises: the plan's own order first,
    then a shuffle seeded by the pass. The machine's speed drifts by tens of percent within
    minutes on a small shared machine; in a fixed or alternating order an exercise's runs
    fall at the same places in every pass (the ends of a reversed pass meet the next one's),
    so it samples the drift at a few moments, always the same, where shuffled passes spread
    every exercise's runs over the whole measurement."""
    order = list(range(n))
    if p:
        random.Random(p).shuffle(order)
    return order


def kept_steps(step_times_ns) -> list:
    """The step times of one run after the first ``SKIPPED_STEPS``."""
    kept = list(step_times_ns)[SKIPPED_STEPS:]
    if len(kept) < MIN_KEPT_STEPS:
        raise InvalidArgumentError(f"{len(step_times_ns)} steps leave {len(kept)} to measure "
                                   f"after the first {SKIPPED_STEPS}: give at least "
                                   f"{MIN_STEPS} steps")
    return kept


def settled(run_medians) -> bool:
    """Whether an exercise's runs agree well enough to stop: the standard error of the mean
    of their medians at most ``SETTLED`` of it (one run never does)."""
    if len(run_medians) < 2:
        return False
    spread = np.std(run_medians, ddof=1) / np.sqrt(len(run_medians))
    return bool(spread <= SETTLED * np.mean(run_medians))
