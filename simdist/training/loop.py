"""``TrainingLoop``: how an exercise of a strategy is trained, one record per loop module.

TF's guides write one custom training loop per kind of strategy: the synchronous loop of
MirroredStrategy and its kin (``sync_loop``), the coordinator's loop of
ParameterServerStrategy (``ps_loop``) and the host loop of TPUStrategy (``tpu_loop``). Each of
those modules holds its ``LOOP``; a strategy record (``simdist.distribute.registry``) names the
module as a string, because the strategies sit below the training layer.
"""

from __future__ import annotations

import importlib
from typing import Callable, NamedTuple

from simdist.base.errors import InvalidArgumentError, brief
from simdist.distribute.registry import StrategyRecord, strategy_named


class TrainingLoop(NamedTuple):
    """What ``simulate_exercise`` and ``simdist run NAME`` need of a strategy's loop."""

    #: (exercise) -> (ClusterSpec, Layout): the tasks and machines the exercise runs on
    cluster_and_layout: Callable
    #: (exercise) -> main(ctx): every task's main for one run
    make_main: Callable
    #: (exercise, SimulationResult, Hardware) -> RunResult of the chief
    to_run_result: Callable
    #: (exercise, transport, trace, catalog) -> RunResult (None on other MPI ranks)
    simulate: Callable


def training_loop(record: StrategyRecord) -> TrainingLoop:
    """The loop of a strategy record (its ``training_loop`` module's ``LOOP``)."""
    return importlib.import_module(record.training_loop).LOOP


def simulate_exercise(exercise, transport=None, trace: bool = True, catalog=None):
    """Simulate an exercise on its cluster with its strategy's loop; the chief's ``RunResult``
    (None on the other MPI ranks)."""
    from simdist.training.exercises import Exercise

    if not isinstance(exercise, Exercise):
        raise InvalidArgumentError(f"simulate_exercise takes an Exercise, got {brief(exercise)}")
    return training_loop(strategy_named(exercise.strategy)).simulate(
        exercise, transport=transport, trace=trace, catalog=catalog)
