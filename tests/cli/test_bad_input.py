"""Ordinary mistakes are one line naming the value and what was expected, exit status 2, never
a traceback: options, hardware-profile values, deeply nested JSON, program files, TF_CONFIG."""

import json
import os
import subprocess
import sys

import pytest

from simdist.commands.cli import main as simdist_main

from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(60)

PROGRAM_HEAD = ("from simdist.hardware.cluster import ClusterSpec\n"
                "from simdist.hardware.devices import Layout\n"
                "from simdist.training.programs import Program\n")
PROGRAM_TAIL = ("PROGRAM = Program('p', 'a test program', "
                "lambda args: (ClusterSpec({'worker': 2}), Layout()), main)\n")


def program_file(tmp_path, body, head=""):
    path = tmp_path / "prog.py"
    path.write_text(head + PROGRAM_HEAD + "def main(ctx, args):\n" + body + PROGRAM_TAIL)
    return str(path)


def one_line_error(argv, capsys, expected):
    """simdist ``argv`` fails with exit status 2 and one line that holds ``expected``."""
    assert simdist_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("simdist") and err.count("\n") == 1, err
    assert expected in err, err


@pytest.mark.parametrize("argv, expected", [
    (["run", "token_ring", "--seed", "-1"], "--seed must be an int >= 0 and < 2**63, got -1"),
    (["run", "mirrored", "--seed", "-3"], "--seed must be an int >= 0 and < 2**63, got -3"),
    (["run", "mirrored", "--profile", ""], "unknown hardware profile '': expected one of"),
    (["run", "token_ring", "--rounds", "-1"], "--rounds -1: expected a number of laps >= 0"),
    (["run", "allreduce", "--size", str(10 ** 19)],
     "TiB of real values, held about 3 times over in flight), more than DistLab's cap of 3 GiB "
     "for one run (it keeps a run inside a 4 GiB machine): add --phantom"),
])
def test_bad_options(argv, expected, capsys):
    one_line_error(argv, capsys, expected)


@pytest.mark.parametrize("argv, expected", [
    (["run", "token_ring", "--small-bytes", "-5"],
     "argument --small-bytes: size '-5' is -5 bytes: expected a whole number of bytes >= 1"),
    (["run", "token_ring", "--large-bytes", "0"],
     "argument --large-bytes: size '0' is 0 bytes: expected a whole number of bytes >= 1"),
])
def test_bad_sizes_are_argparse_errors(argv, expected, capsys):
    """A size option's type refuses the value while parsing: argparse's usage, then its
    one error line (exit status 2)."""
    with pytest.raises(SystemExit) as stop:
        simdist_main(argv)
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"simdist run: error: {expected}", last


@pytest.mark.parametrize("name, text, expected", [
    ("p.yaml", "devices:\n  cpu-core:\n    peak_flops: .inf\n", "inf is not a finite number"),
    ("p.yaml", "devices:\n  cpu-core:\n    peak_flops: 1e400 FLOPS\n",
     "'1e400 FLOPS' is out of range: expected at most 1e+300"),
    ("p.yaml", "devices:\n  cpu-core:\n    peak_flops: 1e-99999999 FLOPS\n",
     "'1e-99999999 FLOPS' is out of range"),
    ("p.json", '{"devices": {"cpu-core": {"peak_flops": 1e400}}}', "inf is not a finite number"),
    ("p.json", '{"devices": {"cpu-core": {"peak_flops": 1%s}}}' % ("0" * 400),
     "100000000000000000...0000000000000000000 is out of range"),
    ("p.json", '{"devices": ' + "[" * 50_000 + "]" * 50_000 + "}",
     "nests JSON arrays or objects too deeply to read"),
    ("p.json", b"\x89PNG\r\n\x1a\n\x00\xff", "is not text (byte 0 is not UTF-8)"),
    ("p.json", '{"devices": {"cpu-core": ', "the file ends early: truncated?"),
])
def test_bad_values_in_a_profiles_file(tmp_path, capsys, name, text, expected):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    one_line_error(["run", "token_ring", "--profiles-file", str(path)], capsys, expected)


@pytest.mark.parametrize("argv, expected", [
    (["compare", "nope.json", "nope.json"], "simdist compare: error: "),
    (["plot-collectives", "--profile", "nope", "-o", "x.png"],
     "simdist plot-collectives: error: "),
    (["ps", "--plot", "x.txt"], "simdist ps: error: --plot"),
    (["bench", "allreduce-formulas", "--profile", "nope"],
     "simdist bench allreduce-formulas: error: "),
])
def test_each_command_names_itself_in_its_error_line(tmp_path, monkeypatch, capsys, argv,
                                                     expected):
    monkeypatch.chdir(tmp_path)
    one_line_error(argv, capsys, expected)
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("command", [["summary"], ["plot", "-o", "x.png"], ["compare", "SAME"]])
def test_deeply_nested_json_in_a_trace_or_result(tmp_path, capsys, command):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    argv = [command[0], str(deep)] + [str(deep) if c == "SAME" else c for c in command[1:]]
    assert simdist_main(argv) == 2
    err = capsys.readouterr().err
    assert "nests JSON arrays or objects too deeply to read" in err and err.count("\n") == 1


def test_running_out_of_memory_is_one_line(tmp_path, capsys):
    prog = program_file(tmp_path, "    yield ctx.timeout(1)\n"
                                  "    import numpy as np\n"
                                  "    np.ones(2 ** 45, np.uint8)\n")
    one_line_error(["run", prog, "--quiet"], capsys, "simdist: error: out of memory (Unable "
                                                     "to allocate")


def test_sys_exit_in_a_task_is_an_error_naming_the_task(tmp_path, capsys):
    prog = program_file(tmp_path, "    yield ctx.timeout(3)\n"
                                  "    if ctx.task_id == 1:\n"
                                  "        import sys; sys.exit(0)\n")
    one_line_error(["run", prog, "--quiet"], capsys,
                   "task worker:1 called sys.exit(0) in its main: a task ends by returning")


def test_a_syntax_error_in_a_program_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "broken.py"
    path.write_text("def main(ctx, args:\n    pass\n")
    one_line_error(["run", str(path)], capsys, f"program file '{path}' line 1:")


def test_a_program_file_runs_once_per_process_and_not_for_help(tmp_path, capsys):
    log = tmp_path / "log.txt"
    prog = program_file(tmp_path, "    yield ctx.timeout(1)\n",
                        head=f"open({str(log)!r}, 'a').write('loaded\\n')\n")
    assert simdist_main(["run", prog, "--quiet"]) == 0
    assert log.read_text() == "loaded\n"
    with pytest.raises(SystemExit) as stop:
        simdist_main(["run", prog, "--help"])
    assert stop.value.code == 0
    assert "Python code that this command runs" in " ".join(capsys.readouterr().out.split())
    assert log.read_text() == "loaded\n"


def realdist(*args, env=None, module="realdist"):
    environment = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env=environment)


@pytest.mark.parametrize("tf_config, expected", [
    ("{bad", "TF_CONFIG is not valid JSON (Expecting property name"),
    ("[" * 100_000, "TF_CONFIG nests JSON arrays or objects too deeply"),
    (json.dumps({"cluster": {"worker": ["localhost:1"]}, "task": {"type": "w" * 5000,
                                                                  "index": 0}}),
     "job 'wwwwwwwwwwwwwwwwwwwwwwwwwww...wwwwwwwwwwwwwwwwwwwwwwwwwwww' is not in the cluster"),
])
def test_a_malformed_tf_config_stops_realdist_before_tensorflow(tf_config, expected):
    proc = realdist("run", "mirrored", "--steps", "1", env={"TF_CONFIG": tf_config})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("realdist: error: ") and expected in proc.stderr
    assert len(proc.stderr) < 400 and "starting TensorFlow" not in proc.stdout


def test_the_worker_entry_point_reports_bad_input_in_one_line(tmp_path):
    proc = realdist(module="realdist.distribute.multiworker")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "expected one job directory holding job.json" in proc.stderr
    (tmp_path / "job.json").write_text(json.dumps({"mode": "split", "examples": 4,
                                                   "global_batch": 2, "timeout": 5}))
    bad = json.dumps({"cluster": {"worker": ["localhost:1"]},
                      "task": {"type": "worker", "index": 5}})
    proc = realdist(str(tmp_path), env={"TF_CONFIG": bad}, module="realdist.distribute.multiworker")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "realdist worker: error: task index 5 out of range for job 'worker'" in proc.stderr


OBJECT_SEND = ("    if ctx.task_id == 0:\n"
               "        import numpy as np\n"
               "        ctx.send('worker:1', 'x', np.array([{'a': 1}], dtype=object))\n"
               "    else:\n"
               "        yield ctx.recv('worker:0', 'x')\n"
               "    yield ctx.timeout(1)\n")
OBJECT_ERROR = "payload array of dtype object holds Python objects, which cannot travel"


def test_an_object_array_payload_is_refused_at_the_send_in_process(tmp_path, capsys):
    one_line_error(["run", program_file(tmp_path, OBJECT_SEND), "--quiet"], capsys,
                   OBJECT_ERROR)


@pytest.mark.mpi
def test_an_object_array_payload_is_the_same_error_over_mpi(tmp_path):
    from simdist.sim.launcher import run_mpi

    proc = run_mpi(2, ["-m", "simdist", "run", program_file(tmp_path, OBJECT_SEND), "--quiet"],
                   timeout=50)
    assert proc.returncode != 0 and OBJECT_ERROR in proc.stderr
    assert "Traceback" not in proc.stderr


BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{k}: &{k} [{', '.join(['*' + p] * 9)}]\n" for p, k in zip("abcdefgh", "bcdefghi"))


@pytest.mark.parametrize("text, expected", [
    (BOMB, "line 2: YAML alias *a refused"),
    ("devices: " + "[" * 100_000 + "]" * 100_000, "line 1: nested more than 20 levels deep"),
    ("devices:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 40)),
     "line 20: nested more than 20 levels deep"),
    ("devices: [unclosed\n", "is not valid YAML: while parsing a flow sequence"),
])
def test_a_yaml_alias_bomb_or_deep_nesting_is_refused_at_once(tmp_path, capsys, text, expected):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    assert len(BOMB) < 400
    one_line_error(["list", "--profiles-file", str(path)], capsys, expected)


@pytest.mark.parametrize("timeout", ["nan", "inf", "-1", "0"])
def test_realdist_timeout_must_be_finite_and_positive(timeout):
    for command in (["run", "mirrored"], ["split", "mirrored"]):
        proc = realdist(*command, f"--timeout={timeout}")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert f"--timeout {float(timeout)}: expected a finite number of seconds > 0" \
            in proc.stderr
        assert "starting TensorFlow" not in proc.stdout


@pytest.mark.parametrize("body, expected", [
    ("    yield 42\n", "task worker:0 raised TypeError: process worker:0/main yielded 42; a "
                     "process must yield events"),
    ("    yield ctx.timeout(-1)\n", "task worker:0 raised ValueError: timeout delay must be an "
                                    "int >= 0 of nanoseconds, got -1 (at "),
    ("    yield ctx.timeout(1.5)\n", "got 1.5 (at "),
    ("    yield ctx.timeout(1)\n    1 / 0\n", "task worker:0 raised ZeroDivisionError: "
                                            "division by zero (at "),
])
def test_a_mistake_inside_a_task_is_one_line_naming_the_task_and_line(tmp_path, capsys, body,
                                                                      expected):
    prog = program_file(tmp_path, body)
    one_line_error(["run", prog, "--quiet"], capsys, expected)


def test_the_line_named_is_the_programs_own(tmp_path, capsys):
    prog = program_file(tmp_path, "    yield ctx.timeout(-1)\n")
    assert simdist_main(["run", prog, "--quiet"]) == 2
    assert f"(at {prog}, line 5, in main)" in capsys.readouterr().err


@pytest.mark.parametrize("argv, expected", [
    (["run", "mirrored", "--model", "mlp", "--dataset", "digits", "--hidden", "100000"],
     "hidden 100,000 is more than 65,536: the most this exercise can hold in memory"),
    (["run", "mirrored", "--global-batch", str(10 ** 7)], "global_batch (--global-batch) "
                                                          "10,000,000 is more than"),
    (["run", "token_ring", "--large-bytes", str(10 ** 10)], "--large-bytes 10000000000: "
                                                            "expected a size in bytes >= 1 and "
                                                            "<= 1073741824 (1 GiB)"),
])
def test_sizes_that_outgrow_memory_are_refused_up_front(argv, expected, capsys):
    one_line_error(argv, capsys, expected)


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_simdist_ps_over_more_ranks_than_tasks_is_refused_once_and_writes_nothing(tmp_path):
    from simdist.sim.launcher import run_mpi

    trace = tmp_path / "t.json"
    proc = run_mpi(4, ["-m", "simdist", "ps", "--workers", "2", "--steps", "2", "--trace",
                       str(trace)], timeout=100)
    assert proc.returncode != 0
    assert proc.stderr.count("simdist ps: error: mpiexec -n 4 is larger than the number of "
                             "simulated tasks (3)") == 1, proc.stderr
    assert "Traceback" not in proc.stderr and not trace.exists()
    two = run_mpi(2, ["-m", "simdist", "ps", "--workers", "2", "--steps", "2", "--trace",
                      str(trace)], timeout=100)
    assert two.returncode == 0 and two.stdout.count("global step 2") == 1 and trace.is_file()
