"""simdist run's files: every program runs with --quiet, the trace and result are written before
the report (a failing report loses nothing)."""

import json

import pytest

from simdist.commands.cli import main as simdist_main
from simdist.training.programs import program_names

pytestmark = pytest.mark.timeout(60)

#: small options, so that every program runs in well under a second
SMALL = {"token_ring": ["--large-bytes", "4096"], "allreduce": ["--size", "4096"],
         "data_parallel": ["--steps", "2", "--workers", "4"]}


@pytest.mark.parametrize("name", program_names())
def test_every_program_runs_with_quiet(name, capsys):
    args = SMALL.get(name, ["--steps", "2", "--global-batch", "16"])
    assert simdist_main(["run", name, "--quiet", *args]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"simdist: {name} on ") and len(out.splitlines()) == 1


def test_quiet_still_writes_the_result(tmp_path, capsys):
    result = tmp_path / "r.json"
    assert simdist_main(["run", "mirrored", "--quiet", "--steps", "2", "--result",
                         str(result)]) == 0
    assert f"result:   {result}" in capsys.readouterr().out
    assert len(json.loads(result.read_text())["losses"]) == 2


def test_parameter_server_all_reduce_on_six_tasks_and_two_shards_reports(tmp_path, capsys):
    trace = tmp_path / "t.json"
    assert simdist_main(["run", "allreduce", "--algorithm", "ps", "-p", "6", "--num-ps", "2",
                         "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "every task holds the sum (ok)" in out and "(+0.00%)" in out
    assert trace.stat().st_size > 0


def test_the_trace_is_written_before_a_report_that_fails(tmp_path):
    program = tmp_path / "bad_report.py"
    program.write_text(
        "from simdist.hardware.cluster import ClusterSpec\n"
        "from simdist.hardware.devices import Layout\n"
        "from simdist.training.programs import Program\n"
        "def main(ctx, args):\n"
        "    yield ctx.timeout(5)\n"
        "def report(result, hardware, args):\n"
        "    raise RuntimeError('the report is broken')\n"
        "PROGRAM = Program('bad_report', 'its report fails', "
        "lambda args: (ClusterSpec({'worker': 2}), Layout()), main, report=report)\n")
    trace = tmp_path / "t.json"
    with pytest.raises(RuntimeError, match="the report is broken"):
        simdist_main(["run", str(program), "--trace", str(trace)])
    assert json.loads(trace.read_text())["otherData"]["program"] == "bad_report"


def test_result_no_trace_leaves_the_trace_out_of_the_result(tmp_path, capsys):
    result, trace = tmp_path / "r.json", tmp_path / "t.json"
    assert simdist_main(["run", "mirrored", "--quiet", "--steps", "2", "--result", str(result),
                         "--result-no-trace", "--trace", str(trace)]) == 0
    assert json.loads(result.read_text())["trace"] is None
    assert json.loads(trace.read_text())["traceEvents"]  # the trace is in its own file
    from realdist.cli import build_parser

    args = build_parser().parse_args(["run", "mirrored", "--result", "r.json",
                                      "--result-no-trace"])
    assert args.result_no_trace  # realdist run takes it too


def test_trace_max_records_caps_the_trace_file_and_says_so(tmp_path, capsys):
    trace = tmp_path / "t.json"
    assert simdist_main(["run", "token_ring", "--trace", str(trace),
                         "--trace-max-records", "20"]) == 0
    assert "trace cut to its first 20 of 109 records (--trace-max-records)" \
        in capsys.readouterr().out
    data = json.loads(trace.read_text())
    assert data["otherData"]["truncated"] == {"records": 109, "before_ns": 29024}
    assert len([e for e in data["traceEvents"] if e["ph"] != "M"]) <= 20 + 20  # flows: 2 each
    assert simdist_main(["summary", str(trace)]) == 0
    assert simdist_main(["run", "token_ring", "--trace-max-records", "0"]) == 2
    assert "--trace-max-records 0: expected a number of records >= 1" in capsys.readouterr().err
