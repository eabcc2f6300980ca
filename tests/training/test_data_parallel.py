"""simdist run data_parallel's model options: gradient dtype, FLOPs per example, a sparse
embedding, parameter-server shards and machines of several tasks."""

import pytest

from simdist.commands.cli import main as simdist_main
from simdist.collectives import ALGORITHMS
from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.training.programs.data_parallel import INDEX_BYTES, train
from simdist.sim.scheduler import simulate


def run(workers, fidelity="message", system="cpu", tasks_per_machine=1, **kw):
    hw = Hardware.from_catalog(HardwareCatalog.default(), system,
                               Layout(tasks_per_machine=tasks_per_machine))
    params = kw.pop("params", 10**5)
    result = simulate({"worker": workers}, lambda ctx: train(ctx, params, 2, 8, **kw),
                      hardware=hw, trace=False, fidelity=fidelity)
    return result, hw


def test_float16_gradients_send_half_the_bytes_of_float32():
    full, _ = run(4)
    half, _ = run(4, gradient_dtype="float16")
    assert full.messages == half.messages > 0
    assert half.bytes_sent * 2 == full.bytes_sent


def test_flops_per_example_sets_the_forward_and_backward_time():
    result, hw = run(1, flops_per_example=1e9)
    step = hw.device.compute_time_ns(1e9 * 8) + hw.device.compute_time_ns(2 * 10**5,
                                                                           12 * 10**5)
    assert result.returns["worker:0"] == [step, 2 * step]


def test_ps_shards_step_is_compute_plus_the_ps_closed_form():
    result, hw = run(8, fidelity="flow", algorithm="ps", options={"num_ps": 4})
    alone, _ = run(1)
    comm = ALGORITHMS["ps"].closed_form(8, 4 * 10**5, hw, num_ps=4)
    step = alone.returns["worker:0"][0] + comm
    assert result.returns["worker:0"][0] == pytest.approx(step, rel=1e-6)


def test_hierarchical_over_machines_of_eight_runs_as_flows():
    result, hw = run(16, fidelity="flow", system="v100-nvlink2-25gbe", tasks_per_machine=8,
                     algorithm="hierarchical")
    assert result.flows == 2 and result.messages == 0


def test_a_sparse_model_all_gathers_its_rows_whose_bytes_grow_with_the_workers():
    dim, lookups, batch = 16, 4, 8
    sent = {}
    for p in (2, 4, 8):
        result, _ = run(p, fidelity="flow", embedding_dim=dim, lookups=lookups)
        assert result.messages == 2 * p * (p - 1)  # a ring all-gather per step
        sent[p] = result.bytes_sent
    each = batch * lookups * (4 * dim + INDEX_BYTES)
    assert sent == {p: 2 * p * (p - 1) * each for p in (2, 4, 8)}


def test_cli_options_that_do_not_fit_are_one_line_errors(capsys):
    assert simdist_main(["run", "data_parallel", "--workers", "4", "--num-ps", "2"]) == 2
    assert "--num-ps 2: the ring all-reduce does not take num_ps" in capsys.readouterr().err
    assert simdist_main(["run", "data_parallel", "--embedding-dim", "-1"]) == 2
    assert "--embedding-dim -1: expected a width >= 0" in capsys.readouterr().err


def test_cli_reports_the_sparse_model_and_the_dtype(capsys):
    assert simdist_main(["run", "data_parallel", "--workers", "4", "--steps", "1",
                         "--params", "1e5", "--embedding-dim", "8",
                         "--gradient-dtype", "float16", "--fidelity", "flow"]) == 0
    out = capsys.readouterr().out
    assert "float16 gradients, ring all-reduce, 256 embedding rows of 8 per worker" in out


def test_a_zoo_model_by_name_gives_params_and_flops(capsys):
    from simdist.models import zoo_model

    model = zoo_model("resnet101")
    argv = ["run", "data_parallel", "--workers", "4", "--steps", "1", "--fidelity", "flow"]
    assert simdist_main([*argv, "--model", "resnet101", "--no-overlap"]) == 0
    by_name = capsys.readouterr().out
    assert "resnet101 (44.5M parameters, 45.6 GFLOPs an example forward and backward, " \
           "209 gradients)" in by_name
    assert simdist_main([*argv, "--params", str(model.params),
                         "--flops-per-example", str(model.training_flops)]) == 0
    assert _step(by_name) == _step(capsys.readouterr().out)


def _step(out: str) -> str:
    """The step time a run's report gives: "12.3 ms per step simulated"."""
    step = out.split("fidelity ")[-1].split("\n")[0].split(": ", 1)[1]
    assert step.endswith("per step simulated")
    return step


def test_a_model_file_and_counts_with_prefixes(tmp_path, capsys):
    path = tmp_path / "mine.toml"
    path.write_text('params = "2M"\nflops = "1G"\n')
    argv = ["run", "data_parallel", "--workers", "2", "--steps", "1"]
    assert simdist_main([*argv, "--model", str(path)]) == 0
    from_file = capsys.readouterr().out
    assert "mine (2.0M parameters, 3.0 GFLOPs" in from_file
    assert simdist_main([*argv, "--params", "2M", "--flops-per-example", "3G"]) == 0
    # one layer: one bucket, ready when the backward pass ends, as without overlap
    assert _step(capsys.readouterr().out) == _step(from_file)


def test_model_options_that_clash_or_are_unknown_are_one_line_errors(capsys):
    assert simdist_main(["run", "data_parallel", "--model", "resnet50", "--params", "1M"]) == 2
    assert "--params with --model resnet50" in capsys.readouterr().err
    assert simdist_main(["run", "data_parallel", "--model", "resnet9000"]) == 2
    assert "model 'resnet9000' is not in the zoo" in capsys.readouterr().err


def test_list_models_prints_the_zoo_and_exits(capsys):
    with pytest.raises(SystemExit) as stop:
        simdist_main(["run", "data_parallel", "--list-models"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "resnet101" in out and "GFLOPs" in out and "activ. MB" in out


def test_stragglers_stretch_each_workers_compute_by_its_seeded_draw():
    from simdist.hardware.stragglers import parse_stragglers

    stragglers = parse_stragglers("lognormal:0.5")
    result, hw = run(1, flops_per_example=1e9, stragglers=stragglers, seed=3)
    factors = stragglers.factors(3, 0, 2)
    compute = hw.device.compute_time_ns(1e9 * 8)
    apply = hw.device.compute_time_ns(2 * 10**5, 12 * 10**5)
    first = round(compute * factors[0]) + apply
    assert result.returns["worker:0"] == [first, first + round(compute * factors[1]) + apply]
    # synchronous: every worker waits for the slowest one's gradients
    plain, _ = run(8, fidelity="flow")
    slow, _ = run(8, fidelity="flow", stragglers=parse_stragglers("exp:0.5"), seed=0)
    again, _ = run(8, fidelity="flow", stragglers=parse_stragglers("exp:0.5"), seed=0)
    assert slow.returns == again.returns
    assert slow.returns["worker:0"][-1] > plain.returns["worker:0"][-1]


def test_cli_stragglers_from_measured_step_times(tmp_path, capsys):
    path = tmp_path / "steps.txt"
    path.write_text("120ms 118ms 121ms 119ms 450ms\n")
    argv = ["run", "data_parallel", "--workers", "4", "--steps", "3", "--fidelity", "flow"]
    assert simdist_main([*argv, "--stragglers", f"empirical:{path}"]) == 0
    assert "stragglers from 5 measured step times" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        simdist_main([*argv, "--stragglers", "weibull:2"])
    assert stop.value.code == 2
    assert "--stragglers: stragglers 'weibull:2'" in capsys.readouterr().err


def test_flow_fidelity_refuses_a_layout_it_would_run_as_messages(capsys):
    """A ring over machines of several workers is flows (NIC hops and NVLink hops); parameter
    servers sharing machines have no flow plan, and flow mode says so up front instead of
    quietly sending every message."""
    argv = ["run", "data_parallel", "--workers", "16", "--tasks-per-machine", "4", "--steps",
            "1", "--fidelity", "flow", "--quiet"]
    assert simdist_main([*argv, "--algorithm", "ps"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("simdist: error: --fidelity flow: the ps all-reduce over 16 "
                              "tasks, 4 to a machine, has no flow-level plan (")
    for algorithm in ("ring", "hierarchical"):
        assert simdist_main([*argv, "--algorithm", algorithm]) == 0
        assert "0 messages, 1 flow-level collectives" in capsys.readouterr().out


def test_the_summary_says_message_when_flow_mode_fell_back():
    from simdist.training.programs.data_parallel import _fidelity

    fell_back, _ = run(6, "flow", tasks_per_machine=4, algorithm="hierarchical",
                       options={"pieces": 2})  # unequal machines: no pipelined closed form
    assert fell_back.flows == 0 and fell_back.messages > 0
    assert _fidelity(fell_back).startswith("fidelity message: flow mode ran no collective")
    flows, _ = run(6, "flow", tasks_per_machine=4)
    assert flows.flows == 2 and _fidelity(flows) == "fidelity flow"
    sparse, _ = run(4, "flow", embedding_dim=4)
    assert _fidelity(sparse) == ("fidelity flow for 2 collectives, 24 messages besides")
