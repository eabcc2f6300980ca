"""The tf.distribute strategies an exercise can use, by name: one record each.

The exercise spec (``simdist.training.exercises``) reads a record for its choices, replica count and
defaults; ``simdist run NAME`` makes one program per record (``simdist.training.programs.sync``);
``simulate_exercise`` builds the simulated strategy with ``make``; ``realdist`` runs the
exercise on real TensorFlow with the function ``realdist`` names (a dotted name, so that
simdist never imports TensorFlow or realdist). Adding a strategy touches its class
(``strategy.py`` or a file of its own), this file and a realdist runner (CONTRIBUTING.md).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from simdist.base.errors import InvalidArgumentError
from simdist.distribute.cross_device_ops import (CROSS_DEVICE_OPS, CommunicationImplementation,
                                                 CommunicationOptions)
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
from simdist.distribute.server import InProcessCluster
from simdist.distribute.tpu_strategy import TPUStrategy
from simdist.distribute.central_storage_strategy import CentralStorageStrategy
from simdist.distribute.strategy import (MirroredStrategy, MultiWorkerMirroredStrategy,
                                         OneDeviceStrategy, Strategy)


class StrategyRecord(NamedTuple):
    """One tf.distribute strategy: what it is, its cluster shape, how each half builds it."""

    name: str  # on the command line and in an Exercise: "mirrored"
    tf_class: str  # the TF class it models: "tf.distribute.MirroredStrategy"
    summary: str  # one line for 'simdist list'
    make: Callable  # make(ctx, exercise) -> the simulated strategy on this task
    realdist: str  # "module:function" running an exercise on real TF: (exercise, timeout, on_step)
    multi_worker: bool = False  # replicas on several worker tasks (else one worker)
    single_replica: bool = False  # one replica, whatever the devices per worker
    default_workers: int = 1  # worker tasks when --workers is not given
    default_replicas: int = 4  # replicas (devices) per worker when --replicas is not given
    asynchronous: bool = False  # workers step on their own (num_replicas_in_sync is 1)
    #: the module of its training loop, holding a ``TrainingLoop`` record ``LOOP``
    #: (``simdist.training.loop``): a string, as the training layer sits above this one
    training_loop: str = "simdist.training.sync_loop"
    default_hardware: str = "cpu"  # the hardware profile when --profile is not given


def _mirrored(ctx, exercise):
    ops = exercise.cross_device_ops
    return MirroredStrategy(ctx, range(exercise.devices_per_worker),
                            cross_device_ops=None if ops == "auto" else CROSS_DEVICE_OPS[ops]())


def _multi_worker_mirrored(ctx, exercise):
    options = CommunicationOptions(CommunicationImplementation(exercise.communication))
    return MultiWorkerMirroredStrategy(ctx, options, devices=range(exercise.devices_per_worker))


#: every strategy by name, the single-worker ones first
STRATEGIES = {record.name: record for record in (
    StrategyRecord(
        "default", "tf.distribute.Strategy",
        "the default strategy: one replica, no distribution",
        lambda ctx, exercise: Strategy(ctx), "realdist.distribute.strategies:default",
        single_replica=True),
    StrategyRecord(
        "one_device", "tf.distribute.OneDeviceStrategy",
        "OneDeviceStrategy: every op on one device",
        lambda ctx, exercise: OneDeviceStrategy(ctx, 0), "realdist.distribute.strategies:one_device",
        single_replica=True),
    StrategyRecord(
        "mirrored", "tf.distribute.MirroredStrategy",
        "MirroredStrategy: a replica per device of one machine, all-reduce",
        _mirrored, "realdist.distribute.strategies:mirrored"),
    StrategyRecord(
        "central_storage", "tf.distribute.experimental.CentralStorageStrategy",
        "CentralStorageStrategy: variables on the host CPU, compute on devices",
        lambda ctx, exercise: CentralStorageStrategy(ctx, range(exercise.devices_per_worker)),
        "realdist.distribute.strategies:central_storage"),
    StrategyRecord(
        "multi_worker_mirrored", "tf.distribute.MultiWorkerMirroredStrategy",
        "MultiWorkerMirroredStrategy: replicas on several workers",
        _multi_worker_mirrored, "realdist.distribute.multiworker:run_multi_worker",
        multi_worker=True, default_workers=2, default_replicas=1),
    StrategyRecord(
        "parameter_server", "tf.distribute.experimental.ParameterServerStrategy",
        "ParameterServerStrategy: variables on ps tasks, a ClusterCoordinator, async workers",
        lambda ctx, exercise: ParameterServerStrategy(ctx, InProcessCluster().resolver(ctx)),
        "realdist.training.parameter_server_runner:run_parameter_server", multi_worker=True,
        single_replica=True, default_workers=2, default_replicas=1, asynchronous=True,
        training_loop="simdist.training.ps_loop"),
    StrategyRecord(
        "tpu", "tf.distribute.TPUStrategy",
        "TPUStrategy: a replica per core of a TPU slice, steps_per_execution steps per dispatch",
        lambda ctx, exercise: TPUStrategy(ctx, exercise.steps_per_execution),
        "realdist.distribute.strategies:tpu", default_replicas=8,
        training_loop="simdist.training.tpu_loop", default_hardware="tpu-v3"),
)}


def strategy_named(name: str) -> StrategyRecord:
    """The record of a strategy, or an error naming the known ones."""
    if name not in STRATEGIES:
        raise InvalidArgumentError(f"unknown strategy {name!r}: expected one of "
                                   f"{', '.join(STRATEGIES)}")
    return STRATEGIES[name]
