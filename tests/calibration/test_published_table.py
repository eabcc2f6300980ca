"""Calibration from a published GPU table (issue 29): rows of zoo models (or params and
flops) on a hardware profile, simulated as data_parallel runs, each hardware kind's costs
fitted (``simdist.calibration.gpu_table``, ``gpu_fit``, ``simdist calibrate --from-csv``)."""

import contextlib
import csv
import io
import json

import pytest

from simdist.base.errors import InvalidArgumentError
from simdist.calibration import gpu_fit
from simdist.calibration.gpu_table import GpuRow
from simdist.calibration.table import read_table
from simdist.commands.cli import main as simdist_main
from simdist.hardware.devices import HardwareCatalog

V100, K80 = "v100-nvlink2-25gbe", "k80-pcie-10gbe"
HEADER = ["model", "params", "flops", "hardware", "workers", "devices", "batch", "examples",
          "epochs", "epoch_s", "split"]
#: a made-up V100 cluster: what the fit must find again from the times simulated with it
TRUE = {"flop_time": 1e15 / (15.7e12 * 0.4), "network_byte_time": 400.0,
        "intra_byte_time": 10.0, "run_fixed_ns": 45e9, "step_overhead_ns": 3e6,
        "input_kb_ns": 30.0}
#: every cost with rows that tell it apart: two batches and two models on one GPU, 4 GPUs of
#: a machine at two epoch counts (the fixed cost), a model by numbers (one gradient: its
#: all-reduce not hidden) on 2 and 4 machines
FIT = [["resnet50", "", "", V100, 1, 1, 32, 128000, 1],
       ["resnet50", "", "", V100, 1, 1, 64, 128000, 1],
       ["mobilenet_v2", "", "", V100, 1, 1, 64, 128000, 1],
       ["resnet50", "", "", V100, 1, 4, 64, 128000, 1],
       ["resnet50", "", "", V100, 1, 4, 64, 128000, 5],
       ["big", "100M", "1G", V100, 2, 4, 32, 128000, 1],
       ["big", "100M", "1G", V100, 4, 4, 32, 128000, 1]]
CHECK = [["resnet101", "", "", V100, 2, 4, 64, 128000, 1],
         ["resnet50", "", "", V100, 1, 2, 32, 256000, 3],
         ["mobilenet_v2", "", "", V100, 4, 4, 32, 128000, 2]]


def write(path, rows, header=HEADER):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def synthetic(path, rows, true_by_kind, header=HEADER):
    """A table of ``rows`` (each: the columns before the time, then the split) with the
    times the simulator gives with each hardware kind's true costs (``true_by_kind``)."""
    write(path, [[*r[:-1], "", r[-1]] for r in rows], header)
    times = [gpu_fit.row_time(row, gpu_fit.step_ns(row, true_by_kind[row.kind.name]),
                              true_by_kind[row.kind.name]) for row in read_table(path)]
    return write(path, [[*r[:-1], f"{t / 1e9:.6f}", r[-1]] for r, t in zip(rows, times)],
                 header)


def calibrate(table, out):
    """``simdist calibrate --from-csv``: its exit code and what it printed."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = simdist_main(["calibrate", "--from-csv", str(table), "-o", str(out)])
    return code, stdout.getvalue(), stderr.getvalue()


def errors(text: str, title: str) -> list[float]:
    """The error column of the errors table under ``title``."""
    part = text[text.index(title):].split("\n\n")[0]
    return [float(line.split()[-1].rstrip("%")) for line in part.splitlines()
            if line.startswith("line ") and line.endswith("%")]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    folder = tmp_path_factory.mktemp("published")
    rows = [[*r, "fit"] for r in FIT] + [[*r, "check"] for r in CHECK]
    table = synthetic(folder / "v100.csv", rows, {V100: TRUE})
    out = folder / "fitted.json"
    code, text, err = calibrate(table, out)
    assert code == 0, err
    return text, out


def test_the_fit_recovers_the_costs_the_table_was_made_from(published):
    text, out = published
    costs = json.loads(out.read_text())["calibration"][f"{V100}-calibrated"]["costs"]
    for name, value in TRUE.items():
        assert costs[name]["fitted"], name
        assert costs[name]["value"] == pytest.approx(value, rel=0.03), name
    # rows off by 1% would move the compute, network and fixed costs by a few percent only
    assert max(costs[n]["spread_at_1pct"] for n in ("flop_time", "network_byte_time",
                                                     "run_fixed_ns")) < 0.1
    assert "per-step overhead: a small share of every row's time" in text  # the others not
    assert "not determined by this table" not in text  # every cost was
    assert "link latencies:" in text and "memory bandwidth:" in text  # never fitted


def test_the_check_rows_are_predicted_within_a_few_percent(published):
    text, out = published
    assert max(abs(e) for e in errors(text, "fit residuals")) < 1.0
    predicted = errors(text, "predicted (rows marked check")
    assert len(predicted) == len(CHECK) and max(abs(e) for e in predicted) < 3.0
    assert "line 9: resnet101 2x4 v100-nvlink2-25gbe batch 64" in text
    # the profile holds the fitted device: simdist run --profiles-file reads it
    catalog = HardwareCatalog.from_file(out)
    device = catalog.device(catalog.system(f"{V100}-calibrated").device)
    assert device.peak_flops * device.efficiency == pytest.approx(15.7e12 * 0.4, rel=0.03)


def test_each_kind_fits_its_own_costs_and_names_those_its_rows_cannot_set(tmp_path):
    # one GPU at two batches, steady step times: the compute and the step overhead only
    true = {V100: {**gpu_fit.start_costs(_kind(V100)), "flop_time": 200.0,
                   "step_overhead_ns": 2e6},
            K80: {**gpu_fit.start_costs(_kind(K80)), "flop_time": 1500.0,
                  "step_overhead_ns": 5e6}}
    rows = [[model, hardware, 1, batch, "", "fit"] for hardware in (V100, K80)
            for model, batch in (("mobilenet_v2", 16), ("mobilenet_v2", 64))]
    header = ["model", "hardware", "devices", "batch", "step_ms", "split"]
    table = write(tmp_path / "two.csv", [r[:-2] for r in rows],
                  ["model", "hardware", "devices", "batch"])
    steps = [gpu_fit.step_ns(r, true[r.kind.name]) for r in read_table(
        write(table, [[*r[:-2], 1] for r in rows], header[:-2] + ["step_ms"]))]
    write(table, [[*r[:-2], f"{s / 1e6:.6f}", "fit"] for r, s in zip(rows, steps)], header)
    code, text, err = calibrate(table, tmp_path / "two.json")
    assert code == 0, err
    assert f"2 hardware kinds: each fits its own costs to its own rows ({V100}: 2 row(s); " \
           f"{K80}: 2 row(s))" in text
    costs = json.loads((tmp_path / "two.json").read_text())["calibration"]
    for kind in (V100, K80):
        fitted = costs[f"{kind}-calibrated"]["costs"]
        assert fitted["flop_time"]["value"] == pytest.approx(true[kind]["flop_time"], rel=0.03)
        assert fitted["step_overhead_ns"]["value"] == pytest.approx(
            true[kind]["step_overhead_ns"], rel=0.03)
        assert not fitted["network_byte_time"]["fitted"]
    said = text[text.index(f"{K80}: costs fitted"):]
    for line in ("per-run fixed cost (0 s): every row is a steady step time",
                 "network bandwidth (1.25 GB/s): no row spans several machines (workers > 1)",
                 "intra-machine bandwidth (15.75 GB/s): no row has several GPUs on a machine",
                 "input time per KB (0 ns/KB): moves with the effective compute"):
        assert line in said
    assert max(abs(e) for e in errors(text, f"{K80}: fit residuals")) < 1.0


def _kind(system):
    from simdist.calibration.gpu_table import Kind

    return Kind(system, HardwareCatalog.default(), system)


def test_rows_read_their_models_hardware_and_times(tmp_path):
    (tmp_path / "net.toml").write_text('name = "net"\nparams = "10M"\nflops = "2G"\n'
                                       'input_bytes = "1KiB"\n')
    (tmp_path / "gpu.yaml").write_text(
        "devices:\n  mygpu:\n    device_type: GPU\n    peak_flops: 10 TFLOP/s\n"
        "    mem_bandwidth: 500 GB/s\n    memory: 8 GiB\n    launch_overhead_ns: 5 us\n"
        "systems:\n  mybox:\n    device: mygpu\n    intra_link: pcie3-x16\n"
        "    network: 10gbe\n")
    path = write(tmp_path / "t.csv", [
        ["net.toml", "gpu.yaml", 2, 4, "", 256, "", 1000, "fit"],
        ["", "v100", 1, 1, "32", "", "25M", "", "check"]],
        ["model", "hardware", "workers", "devices", "batch", "global_batch", "params",
         "examples_per_s", "split"])
    with pytest.raises(InvalidArgumentError, match="params without flops"):
        read_table(path)
    path = write(tmp_path / "t.csv", [
        ["net.toml", "gpu.yaml", 2, 4, "", 256, "", "", 1000, "fit"],
        ["x", "v100", 1, 1, "32", "", "25M", "4G", "", "check"]],
        ["model", "hardware", "workers", "devices", "batch", "global_batch", "params",
         "flops", "examples_per_s", "split"])
    first, second = read_table(path)
    assert isinstance(first, GpuRow) and first.kind.system == "mybox"
    assert (first.model.name, first.input_bytes, first.tasks, first.batch) == (
        "net", 1024, 8, 32)
    assert first.measured_ns == pytest.approx(256 / 1000 * 1e9) and first.runs == 0
    assert second.kind.system == V100 and second.model.params == 25_000_000
    assert second.measured_ns is None and second.split == "check"


@pytest.mark.parametrize("header, row, message", [
    (["model", "hardware", "step_ms"], ["resnet50", "p100", 1],
     "line 2: unknown hardware 'p100': expected one of a100-nvlink3-100gbe, cpu, cpu-1gbe, "
     "gtx1080ti-pcie-10gbe, h100-nvlink4-100gbe, k80-pcie-10gbe, tpu-v3, v100-nvlink2-25gbe, "
     "or a profiles file"),
    (["model", "hardware", "step_ms"], ["resnet", V100, 1],
     "line 2: unknown model 'resnet': expected a toy model (linear, softmax, mlp, embedding), "
     "a zoo model (mobilenet_v2, resnet50, resnet101, vgg16, inception_v3, bert_base"),
    (["model", "step_ms"], ["resnet50", 1], "line 2: model resnet50 needs a hardware column"),
    (["model", "hardware", "step_ms"], ["mlp", V100, 1],
     "line 2: column hardware with the toy model 'mlp'"),
    (["model", "hardware", "step_ms"], ["vgg16", "gpus.yaml", 1],
     "line 2: hardware 'gpus.yaml': "),
    (["model", "hardware", "run_s"], ["vgg16", V100, 1], "run_s needs an examples column"),
    (["model", "hardware", "strategy", "step_ms"], ["vgg16", V100, "parameter_server", 1],
     "strategy 'parameter_server' with a zoo model: expected mirrored or "
     "multi_worker_mirrored"),
    (["model", "hardware", "devices", "global_batch", "step_ms"], ["vgg16", V100, 3, 64, 1],
     "global_batch 64 over 3 GPUs: expected a multiple of the GPUs"),
])
def test_bad_published_rows_are_refused_in_one_line(tmp_path, header, row, message):
    with pytest.raises(InvalidArgumentError) as error:
        read_table(write(tmp_path / "t.csv", [row], header))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_table_mixing_toy_and_zoo_rows_is_refused(tmp_path, capsys):
    table = write(tmp_path / "t.csv", [["mlp", "", 1], ["resnet50", V100, 2]],
                  ["model", "hardware", "step_ms"])
    assert simdist_main(["calibrate", "--from-csv", str(table)]) == 2
    err = capsys.readouterr().err
    assert "line 3 is a real network's row (resnet50) and line 2 a toy exercise's (mlp)" in err
    assert err.count("\n") == 1


def test_an_unknown_hardware_is_one_line_naming_it_and_the_known_ones(tmp_path, capsys):
    table = write(tmp_path / "t.csv", [["resnet50", "p100", 2]], ["model", "hardware", "step_ms"])
    assert simdist_main(["calibrate", "--from-csv", str(table)]) == 2
    err = capsys.readouterr().err
    assert "line 2: unknown hardware 'p100': expected one of" in err and V100 in err
    assert err.count("\n") == 1


def test_the_guides_example_table_reads_as_two_hardware_kinds():
    from tests.conftest import ROOT

    rows = read_table(ROOT / "docs/examples/published_gpu_table.csv")
    assert all(isinstance(r, GpuRow) for r in rows) and len(rows) == 17
    assert {r.kind.name for r in rows} == {V100, "gtx1080ti-pcie-10gbe"}
    assert sum(r.split == "check" for r in rows) == 5


def test_data_parallel_with_the_fitted_profile_charges_the_host_as_the_fit_does(tmp_path):
    """``simdist run data_parallel --profile SYSTEM-calibrated`` prices each step's host work
    (the fitted overhead and input time per KB) as the fit's own simulation of the row did."""
    from simdist.hardware.devices import Hardware, Layout
    from simdist.sim.scheduler import simulate
    from simdist.training.programs.data_parallel import GRADIENT_BYTES, train
    from simdist.training.programs.overlap import FUSION_BYTES, OverlapLog, backward_plan

    row = read_table(write(tmp_path / "t.csv", [[*FIT[1], "", "check"]]))[0]
    plan = backward_plan(row.model, row.batch, GRADIENT_BYTES["float32"], FUSION_BYTES)

    def step(costs, host):
        hardware = Hardware.from_catalog(gpu_fit.fitted_catalog(row.kind, costs, host=host),
                                         f"{row.kind.system}-calibrated",
                                         Layout(tasks_per_machine=row.gpus))

        def main(ctx):
            return (yield from train(ctx, row.model.params, 3, row.batch,
                                     flops_per_example=row.model.training_flops, plan=plan,
                                     log=OverlapLog(plan.buckets), input_bytes=row.input_bytes))

        ends = next(iter(simulate({"worker": row.tasks}, main, hardware=hardware,
                                  trace=False).returns.values()))
        return ends[-1] - ends[-2]

    host = TRUE["step_overhead_ns"] + row.batch * row.input_bytes / 1000 * TRUE["input_kb_ns"]
    assert host > 1e6  # the row's input makes the host's work count
    assert step(TRUE, host=True) == pytest.approx(gpu_fit.step_ns(row, TRUE), abs=1000)
    assert step(TRUE, host=True) - step(TRUE, host=False) == pytest.approx(host, abs=1000)
