"""The Python API has the commands' limits by default (``DEFAULT_LIMITS``: 10 million events,
a simulated day), so a notebook cell cannot hang on a program that never ends: ``simulate``,
``train_on_ps`` and ``loader_trainer`` end with a ``RunLimitError`` naming the limit, sizes
beyond a limit or a memory cap are refused before anything runs, and ``ClusterSpec`` refuses
a cluster past its cap at once."""

import inspect
import math
import time

import pytest

from simdist import ClusterSpec, simulate
from simdist.base.errors import InvalidArgumentError, ResourceExhaustedError
from simdist.distribute.failures import Failure
from simdist.sim.limits import DEFAULT_LIMITS, MAX_EVENTS, MAX_SIM_TIME_NS, RunLimitError, \
    RunLimits
from simdist.training.input_pipeline import loader_trainer
from simdist.training.loop import simulate_exercise
from simdist.training.ps_training import train_on_ps

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("fresh_tf1")]


def test_the_api_defaults_are_the_commands_defaults():
    from simdist.commands import run_limits
    from simdist.commands.cli import build_parser

    assert DEFAULT_LIMITS == RunLimits(MAX_EVENTS, MAX_SIM_TIME_NS) == RunLimits(10**7,
                                                                                86_400 * 10**9)
    args = build_parser().parse_args(["run", "token_ring"])
    assert (args.max_events, args.max_sim_time) == (MAX_EVENTS, MAX_SIM_TIME_NS)
    assert run_limits.TIMEOUT_S == 3600.0
    for function in (simulate, train_on_ps, loader_trainer):
        assert inspect.signature(function).parameters["limits"].default == DEFAULT_LIMITS


def test_simulate_stops_an_endless_program_by_default():
    def main(ctx):
        while True:
            yield ctx.timeout(10**12)  # a simulated day passes after 87 of these

    start = time.monotonic()
    with pytest.raises(RunLimitError, match=r"its limit of 86400\.0 s of simulated time .*"
                                            r"\(in Python: limits=RunLimits\("):
        simulate({"worker": 2}, main)
    assert time.monotonic() - start < 5


def test_simulate_without_limits_when_asked():
    def main(ctx):
        for _ in range(100):
            yield ctx.timeout(10**12)
        return ctx.now

    result = simulate({"worker": 1}, main, limits=None)
    assert result.returns["worker:0"] == 100 * 10**12 > MAX_SIM_TIME_NS


def test_train_on_ps_ends_at_its_limits_and_refuses_sizes_past_them():
    with pytest.raises(RunLimitError, match="its limit of 2.0 ms of simulated time"):
        train_on_ps(steps=50, limits=RunLimits(max_sim_time=2_000_000))
    start = time.monotonic()
    with pytest.raises(ResourceExhaustedError, match="more than --max-events 10,000,000"):
        train_on_ps(steps=10**8)
    with pytest.raises(ResourceExhaustedError, match="cap of 256 MiB"):
        train_on_ps(workers=1, examples=10**8)
    assert time.monotonic() - start < 2
    assert train_on_ps(workers=2, steps=2).global_step == 2  # after an error: runs again


@pytest.mark.parametrize("options, expected", [
    ({"learning_rate": math.nan}, "learning_rate (--learning-rate) must be a finite number"),
    ({"seed": -1}, "seed (--seed) must be an int >= 0"),
    ({"step_us": [math.inf] * 3}, "step_us[0] (--step-us) must be a time in us"),
    ({"stall_us": math.inf}, "stall_us (--stall-us) must be a time in us"),
    ({"mode": "async", "warmup_steps": -1}, "warmup_steps (--warmup-steps) must be an int >= 0"),
    ({"failures": [Failure("ps:0", math.nan, 5)]}, "failure ('ps:0', nan, 5): expected a task"),
    ({"failures": [Failure("ps:0", 5, 0)]}, "the downtime > 0"),
    ({"failures": [Failure("chief", 5, 5)]}, "the task must be worker:N or ps:N"),
    ({"limits": 5}, "limits=5: expected a RunLimits(max_events, max_sim_time) or None"),
    ({"limits": RunLimits(max_events=0)}, "limits.max_events must be an int >= 1, got 0"),
])
def test_train_on_ps_holds_its_options_to_the_shared_rules(options, expected):
    with pytest.raises(InvalidArgumentError) as error:
        train_on_ps(**options)
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_loader_trainer_ends_at_its_limits_and_refuses_sizes_past_them():
    with pytest.raises(RunLimitError, match="its limit of 1.0 ms of simulated time"):
        loader_trainer(steps=20, limits=RunLimits(max_sim_time=1_000_000))
    start = time.monotonic()
    with pytest.raises(ResourceExhaustedError, match=r"\(\(4 \+ 2 \+ 1\) x 1,000,000,000 x 4\)"
                                                     r" = 26.1 GiB of arrays"):
        loader_trainer(element_size=10**9, steps=2)
    with pytest.raises(ResourceExhaustedError, match="more than --max-events 10,000,000"):
        loader_trainer(steps=10**8)
    with pytest.raises(ResourceExhaustedError, match="two 79,370 x 79,370 float32 matrices"):
        loader_trainer(train_flops=1e15)
    with pytest.raises(InvalidArgumentError, match="read_us must be a time in us"):
        loader_trainer(read_us=math.inf)
    assert time.monotonic() - start < 2
    assert len(loader_trainer(steps=3).step_ends) == 3


def test_a_cluster_past_the_cap_is_refused_at_once():
    start = time.monotonic()
    with pytest.raises(InvalidArgumentError, match=r"a cluster of 1,000,000,000 tasks \(worker: "
                                                   r"1,000,000,000\): expected at most 65,536"):
        ClusterSpec({"worker": 10**9})
    with pytest.raises(InvalidArgumentError, match="66,000 tasks"):
        ClusterSpec({"worker": 65_000, "ps": [f"h:{i}" for i in range(1000)]})
    assert time.monotonic() - start < 1
    assert len(ClusterSpec({"worker": 60_000}).tasks()) == 60_000


@pytest.mark.parametrize("call, expected", [
    (lambda main: simulate({"worker": 1}, main, seed=-1), "seed must be an int >= 0"),
    (lambda main: simulate({"worker": 1}, main, seed=2**70), "seed must be an int >= 0 and "
                                                             "< 2**63"),
    (lambda main: simulate({"worker": 1}, main, limits=5), "limits=5: expected a RunLimits"),
    (lambda main: simulate({"worker": 1}, main, limits=RunLimits(max_sim_time=-1)),
     "limits.max_sim_time must be an int >= 1, got -1"),
    (lambda main: simulate_exercise(None), "simulate_exercise takes an Exercise, got None"),
])
def test_the_api_refuses_bad_seeds_and_limits_in_one_line(call, expected):
    def main(ctx):
        yield ctx.timeout(1)

    with pytest.raises(InvalidArgumentError) as error:
        call(main)
    assert expected in str(error.value) and "\n" not in str(error.value)
