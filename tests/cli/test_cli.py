"""The simdist command: run, list, summary, plot, help, and clean errors for bad input."""

import json
import subprocess
import sys

import pytest

from simdist.commands.cli import main as simdist_main

from tests.conftest import ROOT


def run_cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "simdist", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def test_run_writes_trace_and_timeline_and_prints_summary(tmp_path, capsys):
    trace, png = tmp_path / "t.json", tmp_path / "t.png"
    assert simdist_main(["run", "token_ring", "--large-bytes", "65536", "--trace", str(trace),
                         "--timeline", str(png)]) == 0
    out = capsys.readouterr().out
    assert "token_ring on 4 tasks (inprocess, 1 rank(s))" in out
    assert "worker:3" in out and "machine:1 NIC" in out
    assert "small token  10gbe" in out and "latency" in out
    assert "large token  10gbe" in out and "bandwidth" in out
    assert "NIC queue" in out  # the pushed gradients queue on machine 0's NIC
    assert json.loads(trace.read_text())["otherData"]["program"] == "token_ring"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_and_plot_read_a_saved_trace(tmp_path, capsys):
    trace, png = tmp_path / "t.json", tmp_path / "p.png"
    assert simdist_main(["run", "token_ring", "--quiet", "--trace", str(trace)]) == 0
    capsys.readouterr()
    assert simdist_main(["summary", str(trace)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["task", "busy", "idle"]
    assert "worker:0" in out and "simulated time" in out
    assert simdist_main(["plot", str(trace), "-o", str(png)]) == 0
    assert png.stat().st_size > 10_000


def test_list_shows_programs_and_profiles(capsys):
    assert simdist_main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("token_ring", "cpu", "v100-nvlink2-25gbe", "10gbe", "nvlink3", "tpu-v3-core"):
        assert name in out


def test_python_dash_m_help_lists_commands_and_program_options():
    proc = run_cli("--help")
    assert proc.returncode == 0
    for command in ("run", "list", "summary", "plot", "bench"):
        assert command in proc.stdout
    proc = run_cli("run", "token_ring", "--help")
    assert proc.returncode == 0
    assert "--large-bytes" in proc.stdout and "--backend" in proc.stdout


@pytest.mark.parametrize("args, expected", [
    (["run", "token_ring", "--profile", "v200"], "unknown hardware profile 'v200'"),
    (["run", "no_such_program"], "unknown program 'no_such_program'"),
    (["run", "token_ring", "--tasks", "1"], "--tasks 1"),
    (["summary", "missing.json"], "trace file 'missing.json' does not exist"),
])
def test_bad_input_gives_one_clear_line_not_a_traceback(args, expected):
    proc = run_cli(*args)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr


def test_profiles_file_overrides_a_link(tmp_path, capsys):
    profiles = tmp_path / "p.yaml"
    profiles.write_text("links:\n  10gbe:\n    latency_ns: 50000\n")
    assert simdist_main(["run", "token_ring", "--profiles-file", str(profiles),
                         "--large-bytes", "4096"]) == 0
    assert "50.0 µs" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text('{"links": {"10gbe": {"latency_ns": -1}}}')
    proc = run_cli("run", "token_ring", "--profiles-file", str(bad))
    assert proc.returncode == 2 and "latency_ns" in proc.stderr and "-1" in proc.stderr


def test_deadlocked_program_reports_blocked_tasks(tmp_path):
    prog = tmp_path / "stuck.py"
    prog.write_text(
        "from simdist.hardware.cluster import ClusterSpec\n"
        "from simdist.hardware.devices import Layout\n"
        "from simdist.training.programs import Program\n"
        "def main(ctx, args):\n"
        "    yield ctx.recv('ps:0', 'weights')\n"
        "PROGRAM = Program('stuck', 'waits forever', "
        "lambda a: (ClusterSpec({'worker': 2, 'ps': 1}), Layout()), main)\n")
    proc = run_cli("run", str(prog), "--quiet")
    assert proc.returncode == 3
    assert "worker:0/main waits on recv(src=ps:0, tag='weights') on worker:0" in proc.stderr
    assert "Traceback" not in proc.stderr
