"""data_parallel's overlap and fusion (issue 29, item 2): gradients ready layer by layer in
the backward pass, fused buckets all-reduced as they fill, ``--no-overlap`` as before."""

import pytest

from simdist.collectives import ALGORITHMS
from simdist.commands.cli import main as simdist_main
from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.models import Layer, Model, model_named
from simdist.sim.scheduler import simulate
from simdist.training.programs.data_parallel import train
from simdist.training.programs.overlap import LANE, OverlapLog, backward_plan

#: four dense layers of 1 MB of float32 gradients each, and 2 GFLOPs forward an example
TINY = Model("tiny", "four dense layers", tuple(
    Layer(f"dense_{i}", "dense", 250_000, 2 * 10**9, 4096) for i in range(4)), 4096)
MIB = 1 << 20


def run(algorithm="ring", fidelity="message", overlap=True, fusion=MIB, workers=4,
        tasks_per_machine=1, trace=False, model=TINY, steps=2):
    hw = Hardware.from_catalog(HardwareCatalog.default(), "v100-nvlink2-25gbe",
                               Layout(tasks_per_machine=tasks_per_machine))
    logs = {}

    def main(ctx):
        log = OverlapLog(()) if overlap else None
        logs[ctx.name] = log
        return (yield from train(ctx, model.params, steps, 8, algorithm,
                                 flops_per_example=model.training_flops,
                                 plan=backward_plan(model, 8, 4, fusion), log=log))

    result = simulate({"worker": workers}, main, hardware=hw, trace=trace, fidelity=fidelity)
    return result, logs["worker:0"], hw


def test_a_bucket_that_fills_starts_its_all_reduce_before_the_backward_pass_ends():
    result, log, _ = run(trace=True)
    spans = [s for s in result.trace.spans if s.pid == "worker:0"]
    backward = [s for s in spans if s.name.startswith("backward") and s.args["step"] == 0]
    buckets = [s for s in spans if s.lane == LANE and s.args["step"] == 0]
    assert [s.name for s in backward] == ["backward dense_3..dense_2",
                                          "backward dense_1..dense_0"]
    assert [s.args["bytes"] for s in buckets] == [2_000_000, 2_000_000]
    # the first bucket's all-reduce runs while the backward pass computes the second's
    assert buckets[0].start == backward[0].end < backward[1].end
    assert buckets[0].start < backward[1].end and buckets[1].start >= backward[1].end
    assert 0 < log.hidden_ns < log.comm_ns and log.steps == 2


def test_no_overlap_is_todays_step_compute_then_the_whole_all_reduce_then_apply():
    result, _, hw = run(fidelity="flow", overlap=False)
    device = hw.device
    step = (device.compute_time_ns(TINY.training_flops * 8, tasks=4)
            + ALGORITHMS["ring"].closed_form(4, 4 * TINY.params, hw)
            + device.compute_time_ns(2 * TINY.params, 12 * TINY.params, tasks=4))
    ends = result.returns["worker:0"]
    assert [round(e - k * step) for k, e in enumerate(ends, 1)] == [0, 0]
    assert result.flows == 2  # one all-reduce a step


def test_fusion_zero_is_a_bucket_per_layer_and_huge_one_bucket_at_the_end():
    plan = backward_plan(TINY, 8, 4, 0)
    assert plan.buckets == (1_000_000,) * 4 and len(plan.stretches) == 4
    assert sum(plan.split(10**6 + 3)) == 10**6 + 3  # the compute is only cut, never changed
    per_layer, _, _ = run(fidelity="flow", fusion=0)
    assert per_layer.flows == 4 * 2
    whole, log, _ = run(fidelity="flow", fusion=10**12)
    assert whole.flows == 2 and log.hidden_ns == 0
    before, _, _ = run(fidelity="flow", overlap=False)
    assert whole.returns == before.returns  # one bucket, ready when the backward pass ends


@pytest.mark.parametrize("algorithm,tasks_per_machine,fidelity", [
    ("ring", 1, "message"), ("ring", 1, "flow"), ("ring", 2, "flow"),
    ("hierarchical", 2, "message"), ("hierarchical", 2, "flow"),
    ("ps", 1, "message"), ("ps", 1, "flow")])
def test_each_algorithm_overlaps_and_is_never_slower(algorithm, tasks_per_machine, fidelity):
    on, log, _ = run(algorithm, fidelity, tasks_per_machine=tasks_per_machine)
    off, _, _ = run(algorithm, fidelity, overlap=False, tasks_per_machine=tasks_per_machine)
    assert on.returns["worker:0"][-1] < off.returns["worker:0"][-1]
    assert log.hidden > 0.3
    if fidelity == "flow":
        assert on.flows == 2 * 2 and on.messages == 0  # two buckets a step, as flows
    else:
        assert on.messages > off.messages > 0  # each bucket's own messages


def test_parameter_servers_push_each_bucket_as_it_is_ready():
    """ps: the buckets' all-reduces run at once, the first still going when the next starts
    (the servers take the pushes as they come); a ring's run one after another."""
    quick = Model("quick", "little compute", tuple(
        Layer(f"dense_{i}", "dense", 250_000, 10**6, 4096) for i in range(4)), 4096)

    def buckets(algorithm):
        result, _, _ = run(algorithm, fusion=0, trace=True, model=quick)
        return sorted((s for s in result.trace.spans if s.pid == "worker:0"
                       and s.lane == LANE and s.args["step"] == 0), key=lambda s: s.start)

    ps, ring = buckets("ps"), buckets("ring")
    assert len(ps) == len(ring) == 4
    assert all(b.start < a.end for a, b in zip(ps, ps[1:]))
    assert all(b.start >= a.end for a, b in zip(ring, ring[1:]))


def test_cli_reports_buckets_and_overlap_and_no_overlap_gives_todays_step(capsys):
    argv = ["run", "data_parallel", "--workers", "4", "--steps", "2", "--fidelity", "flow",
            "--profile", "v100-nvlink2-25gbe"]
    assert simdist_main([*argv, "--model", "resnet50", "--fusion-mb", "25"]) == 0
    out = capsys.readouterr().out
    assert "overlap: 4 bucket(s) of --fusion-mb 25.0 MiB (" in out
    assert "hidden behind the backward pass" in out and "scaling efficiency" in out
    assert simdist_main([*argv, "--model", "resnet50", "--no-overlap"]) == 0
    off = capsys.readouterr().out
    assert "overlap: none (--no-overlap)" in off
    resnet50 = model_named("resnet50")
    assert simdist_main([*argv, "--params", str(resnet50.params), "--flops-per-example",
                         str(resnet50.training_flops)]) == 0
    plain = capsys.readouterr().out
    step = off.split("): ", 1)[1].split("\n")[0]
    assert step.endswith("per step simulated") and step in plain


@pytest.mark.parametrize("value,expected", [
    ("-1", "'-1': expected MiB >= 0"), ("nan", "'nan': expected MiB >= 0"),
    ("lots", "'lots': expected MiB (25, 0.5; 0: a bucket per layer) or a size with units")])
def test_a_bad_fusion_size_is_a_one_line_error(capsys, value, expected):
    with pytest.raises(SystemExit) as stop:
        simdist_main(["run", "data_parallel", "--model", "resnet50", "--fusion-mb", value])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert f"argument --fusion-mb: {expected}" in err[-1]
