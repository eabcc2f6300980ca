"""python -m benchmarks --quick: every study's CSV, figure and section of the page, and the
physical facts the studies show (they break if the model breaks)."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.driver import main
from benchmarks.studies import STUDIES
from benchmarks.studies.zoo import SERIES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("studies")
    assert main(["--quick", "--out", str(out)]) == 0
    return out


def rows(out, name):
    with open(out / f"{name}.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("name", list(STUDIES))
def test_each_study_writes_its_csv_columns_and_its_figure(quick, name):
    with open(quick / f"{name}.csv", newline="", encoding="utf-8") as handle:
        assert next(csv.reader(handle)) == STUDIES[name].fields
    assert len(rows(quick, name)) == len(STUDIES[name].points(True))
    png = (quick / f"{name}.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) < 150_000


def test_the_page_has_every_study_with_its_figure_table_and_citation(quick):
    page = (quick / "RESULTS.md").read_text(encoding="utf-8")
    for study in STUDIES.values():
        assert f"## {study.title}" in page and f"/{study.name}.png)" in page
        assert f"python -m benchmarks --only {study.name}" in page
    assert "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour" in page
    tables = [line for line in page.splitlines() if line.startswith("|---")]
    assert len(tables) == len(STUDIES)  # one summary table each


def test_ring_efficiency_is_at_most_one_and_falls_with_the_devices_on_a_network(quick):
    dense = [r for r in rows(quick, "scaling") if r["model"] == "dense"]
    efficiency = [float(r["efficiency"]) for r in sorted(dense, key=lambda r: int(r["devices"]))]
    assert efficiency[0] == 1.0 and all(e <= 1.0 for e in efficiency)
    assert all(a > b for a, b in zip(efficiency, efficiency[1:]))


def test_the_sparse_models_all_gather_scales_worse_than_the_dense_all_reduce(quick):
    last = {r["model"]: float(r["efficiency"]) for r in rows(quick, "scaling")
            if r["devices"] == "8"}
    assert last["sparse"] < last["dense"]


def test_float16_sends_half_the_bytes_and_steps_faster(quick):
    by = {(r["dtype"], r["devices"]): r for r in rows(quick, "gradient_dtype")}
    for d in ("2", "4", "8"):
        full, half = by[("float32", d)], by[("float16", d)]
        assert 2 * int(half["bytes_per_device_per_step"]) == int(full["bytes_per_device_per_step"])
        assert float(half["step_ms"]) < float(full["step_ms"])
    assert by[("float16", "1")]["step_ms"] == by[("float32", "1")]["step_ms"]


def test_more_ps_shards_are_faster_and_one_shard_falls_behind_the_ring(quick):
    at = {(r["series"], r["devices"]): float(r["step_ms"]) for r in rows(quick, "ps_vs_allreduce")}
    assert at[("ps, 4 shards", "32")] < at[("ps, 1 shard", "32")]
    assert at[("ring, 1 GPU/machine", "32")] < at[("ps, 4 shards", "32")]
    # one server's NIC carries (p-1) shards each way: four times the workers, ~four times
    assert at[("ps, 1 shard", "32")] > 3.5 * at[("ps, 1 shard", "8")]


def test_a_larger_batch_per_device_raises_the_efficiency(quick):
    grow = [r for r in rows(quick, "global_batch") if r["sweep"].startswith("global batch grows")]
    efficiency = [float(r["efficiency"]) for r in grow]
    assert all(a < b <= 1.0 for a, b in zip(efficiency, efficiency[1:]))


def test_backup_workers_cut_the_stragglers_effect(quick):
    hit = {r["backups"]: r for r in rows(quick, "stragglers") if r["stall_probability"] != "0.0"}
    assert float(hit["2"]["slowdown"]) < float(hit["0"]["slowdown"])
    assert float(hit["2"]["ms_per_global_step"]) < float(hit["0"]["ms_per_global_step"])
    assert all(float(r["slowdown"]) > 1.0 for r in hit.values())


def test_zoo_overlapped_never_below_not_overlapped_and_ps_on_4_gpu_machines_trails(quick):
    zoo = rows(quick, "zoo")
    assert {r["series"] for r in zoo} == {s.label for s in SERIES}
    at = {(r["system"], r["model"], r["devices"], r["series"]): r for r in zoo}
    pairs = [(r, at[(*key[:3], "ring, not overlapped")]) for key, r in at.items()
             if key[3] == "ring, overlapped"]
    assert pairs
    for on, off in pairs:  # resnet50's 4 buckets: most of the all-reduce hidden
        assert float(off["efficiency"]) < float(on["efficiency"]) <= 1.0
        assert float(on["hidden"]) > 0.5 and off["hidden"] == "0.0"
        ps = at[(*[on[k] for k in ("system", "model", "devices")],
                 "ps, a shard per 4-GPU machine, overlapped")]
        assert ps["fidelity"] == "message" and float(ps["efficiency"]) < float(on["efficiency"])


def test_only_runs_one_study_and_the_page_keeps_the_others(tmp_path, quick):
    for name in STUDIES:
        if name != "gradient_dtype":
            (tmp_path / f"{name}.csv").write_bytes((quick / f"{name}.csv").read_bytes())
    (tmp_path / "RESULTS.md").write_bytes((quick / "RESULTS.md").read_bytes())
    assert main(["--quick", "--only", "gradient_dtype", "--out", str(tmp_path)]) == 0
    page = (tmp_path / "RESULTS.md").read_text(encoding="utf-8")
    assert all(f"## {s.title}" in page for s in STUDIES.values())
    # the studies not run keep their time from the page as it was
    assert page.count("s on this run's machine.") == len(STUDIES)
    assert not (tmp_path / "scaling.png").exists()  # not run: its figure was not drawn


def test_an_unknown_study_is_a_one_line_error(capsys):
    assert main(["--only", "scaling,bogus"]) == 2
    err = capsys.readouterr().err
    assert "--only 'scaling,bogus': expected study names from scaling," in err


def test_python_m_benchmarks_runs_from_the_repository_root(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--only",
                           "gradient_dtype", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "ETA" in proc.stderr and "float32 vs float16 gradients" in proc.stdout
