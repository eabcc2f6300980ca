"""The strategy records: each one builds its simulated strategy, names a realdist runner that
exists, gives the exercise its defaults and replica count, and is a ``simdist run`` program.
(No TensorFlow here: the realdist runner is looked up in realdist's source.)"""

import argparse
import ast
import importlib.util
from pathlib import Path

import pytest

from simdist import simulate
from simdist.hardware.devices import Hardware, HardwareCatalog
from simdist.distribute import STRATEGIES, strategy_named
from simdist.training import make_strategy
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise
from simdist.training.loop import training_loop
from simdist.training.programs import load_program, program_names


def _args(**given):
    parser = argparse.ArgumentParser()
    Exercise.add_arguments(parser)
    args = parser.parse_args([])
    vars(args).update(given)
    return args


@pytest.mark.parametrize("name", STRATEGIES)
def test_every_record_builds_its_strategy_in_simdist(name):
    record = STRATEGIES[name]
    exercise = Exercise.from_args(name, _args(), hardware=record.default_hardware)
    cluster, layout = training_loop(record).cluster_and_layout(exercise)
    hardware = Hardware.from_catalog(HardwareCatalog.default(), record.default_hardware, layout)

    def main(ctx):
        strategy = make_strategy(ctx, exercise)
        return type(strategy).__name__, strategy.num_replicas_in_sync
        yield

    res = simulate(cluster, main, hardware=hardware, trace=False)
    for class_name, replicas in res.returns.values():
        assert class_name == record.tf_class.rsplit(".", 1)[1]  # simdist mirrors TF's names
        assert replicas == exercise.num_replicas


@pytest.mark.parametrize("name", STRATEGIES)
def test_every_record_names_a_realdist_runner_that_exists(name):
    module, _, function = STRATEGIES[name].realdist.partition(":")
    spec = importlib.util.find_spec(module)
    assert spec is not None, module
    tree = ast.parse(Path(spec.origin).read_text())
    assert function in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("name", STRATEGIES)
def test_exercise_defaults_and_shape_come_from_the_record(name):
    record = STRATEGIES[name]
    exercise = Exercise.from_args(name, _args())
    assert (exercise.workers, exercise.devices_per_worker) == (record.default_workers,
                                                               record.default_replicas)
    assert exercise.num_workers == (record.default_workers if record.multi_worker else 1)
    per_worker = 1 if record.single_replica else record.default_replicas
    assert exercise.num_replicas == (1 if record.asynchronous  # each worker steps alone
                                     else per_worker * exercise.num_workers)
    if not record.multi_worker:
        with pytest.raises(InvalidArgumentError, match=f"workers=2 with strategy '{name}': "
                                                       "only multi_worker_mirrored or "
                                                       "parameter_server uses"):
            Exercise(strategy=name, workers=2)


@pytest.mark.parametrize("name", STRATEGIES)
def test_every_record_is_a_program(name):
    assert name in program_names()
    program = load_program(name)
    assert program.name == name and program.summary == STRATEGIES[name].summary


def test_an_unknown_strategy_names_the_known_ones():
    message = ("unknown strategy 'no_such_strategy': expected one of default, one_device, "
               "mirrored, central_storage, multi_worker_mirrored, parameter_server, tpu$")
    with pytest.raises(InvalidArgumentError, match=message):
        strategy_named("no_such_strategy")
    with pytest.raises(InvalidArgumentError, match=message):
        Exercise(strategy="no_such_strategy")
