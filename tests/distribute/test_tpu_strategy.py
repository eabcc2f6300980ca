"""TPUStrategy in simdist: the host loop and steps_per_execution (utilization in the trace),
the all-reduce over the ICI torus against its closed form, the static-shape rule, and the
strategy record. No TensorFlow here."""

import numpy as np
import pytest

from simdist.hardware.catalog import LINKS
from simdist.commands.cli import main as simdist_main
from simdist.distribute import strategy_named
from simdist.training import simulate_exercise
from simdist.distribute.tpu_strategy import (HOST_LOOP_LANE, HOST_LOOP_OVERHEAD_NS,
                                             torus_all_reduce_ns, torus_shape)
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise

ICI = next(link for link in LINKS if link["name"] == "ici-v3")


def _tpu(**given) -> Exercise:
    return Exercise(**{"strategy": "tpu", "hardware": "tpu-v3", "devices_per_worker": 8,
                       "steps": 16, **given})


def _spans(run, lane):
    return [s for s in run.trace.spans if s.pid == "worker:0" and s.lane == lane]


@pytest.fixture(scope="module")
def runs():
    return {k: simulate_exercise(_tpu(steps_per_execution=k)) for k in (1, 8)}


def test_utilization_rises_with_steps_per_execution(runs):
    one, eight = runs[1], runs[8]
    assert eight.metadata["utilization"] > 4 * one.metadata["utilization"]
    assert one.metadata["utilization"] < 0.2 < 0.4 < eight.metadata["utilization"] < 1
    assert one.losses == eight.losses  # the same SGD, only the dispatches differ
    for k, run in runs.items():
        dispatches = _spans(run, HOST_LOOP_LANE)
        assert len(dispatches) == 16 // k
        assert {s.dur for s in dispatches} == {HOST_LOOP_OVERHEAD_NS}
        core = _spans(run, "TPU:0")
        assert {s.cat for s in core} == {"compute", "collective"}
        for d in dispatches:  # the cores wait while the host dispatches
            assert not any(s.start < d.start + d.dur and d.start < s.start + s.dur
                           for s in core)
        busy = sum(s.dur for s in core)
        wall = max(s.start + s.dur for s in core) - dispatches[0].start
        assert wall == busy + len(dispatches) * HOST_LOOP_OVERHEAD_NS  # no other idle time
        assert run.metadata["utilization"] == round(busy / wall, 4)


def test_the_torus_all_reduce_matches_its_closed_form(runs):
    a, bw, n = ICI["latency_ns"], ICI["bandwidth"] / 1e9, 4096  # bandwidth in bytes per ns
    # a ring of p chips: 2(p-1) steps of a + (n/p)/B; one ring per dimension of the torus
    assert torus_all_reduce_ns(4, 4, n, a, ICI["bandwidth"]) == pytest.approx(
        12 * (a + n / 4 / bw))
    assert torus_all_reduce_ns(4, 2, n, a, ICI["bandwidth"]) == pytest.approx(
        6 * (a + n / 4 / bw) + 2 * (a + n / 2 / bw))
    assert torus_all_reduce_ns(1, 1, n, a, ICI["bandwidth"]) == 0
    assert [torus_shape(c) for c in (1, 2, 4, 8, 16, 32)] == [
        (1, 1), (2, 1), (2, 2), (4, 2), (4, 4), (8, 4)]
    # in the simulated trace: every all-reduce span of the 2x2 slice (8 cores) takes it
    reduces = [s for s in _spans(runs[1], "TPU:3") if s.cat == "collective"]
    assert len(reduces) == 2 * 16  # the gradients and the loss, every step
    for s in reduces:
        nbytes = s.args["bytes"]
        assert s.dur == int(np.ceil(2 * 2 * (a + np.ceil(nbytes / 2) / bw)))
        assert s.args["ici_bytes_per_chip"] == 2 * 2 * np.ceil(nbytes / 2)
        assert s.args["topology"] == "2x2"


def test_tpu_trains_like_mirrored_strategy():
    tpu = simulate_exercise(_tpu(steps=4), trace=False)
    mirrored = simulate_exercise(Exercise(strategy="mirrored", devices_per_worker=8, steps=4),
                                 trace=False)
    np.testing.assert_allclose(tpu.losses, mirrored.losses, rtol=1e-5)


def test_a_dynamic_shape_is_an_error_as_in_xla():
    # 1024 examples in batches of 48: step 21 is the epoch's partial batch of 16
    with pytest.raises(InvalidArgumentError, match=r"the global batch of step 21 has shape "
                                                   r"\(16, 8\), the first had \(48, 8\).*"
                                                   r"drop_remainder=True"):
        simulate_exercise(_tpu(global_batch=48, steps=22), trace=False)
    with pytest.raises(InvalidArgumentError, match=r"shape \(60, 8\) does not split evenly "
                                                   r"over 8 TPU cores"):
        simulate_exercise(_tpu(global_batch=60, steps=1), trace=False)
    with pytest.raises(InvalidArgumentError, match="TPUStrategy needs TPU devices, but "
                                                   "hardware profile 'cpu' has CPU devices"):
        simulate_exercise(_tpu(hardware="cpu", steps=1), trace=False)
    with pytest.raises(InvalidArgumentError, match="a TPU slice of 3 cores"):
        simulate_exercise(_tpu(devices_per_worker=3, global_batch=63, steps=1), trace=False)


def test_the_record_and_the_command_line(capsys):
    record = strategy_named("tpu")
    assert (record.tf_class, record.default_replicas, record.default_hardware,
            record.training_loop) == ("tf.distribute.TPUStrategy", 8, "tpu-v3",
                                "simdist.training.tpu_loop")
    with pytest.raises(InvalidArgumentError, match="steps_per_execution is an option of "
                                                   "parameter_server and tpu, not of mirrored"):
        Exercise(strategy="mirrored", steps_per_execution=2)
    assert simdist_main(["run", "tpu", "--steps-per-execution", "8", "--steps", "16"]) == 0
    out = capsys.readouterr().out
    assert "system 'tpu-v3'" in out and "8 replica(s)" in out
    assert "TPU utilization (core busy time / wall time): 44.5% with steps_per_execution 8" \
        in out
    assert "one fused all-reduce per step over the 2x2 ICI torus" in out
