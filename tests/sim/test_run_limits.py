"""A simulated run has limits (--max-events, --max-sim-time, --timeout) with defaults, the
Python API's too (events and simulated time): a program that never ends stops with one line
naming the limit and its progress; sizes whose cost is far beyond --max-events are refused up
front; under mpiexec a rank that stops answering ends the job, named."""

import time

import pytest

from simdist import simulate
from simdist.commands.cli import main as simdist_main
from simdist.sim.limits import RunLimitError, RunLimits
from simdist.sim.launcher import run_mpi

from tests.cli.test_bad_input import one_line_error, program_file

pytestmark = pytest.mark.timeout(60)

FOREVER = "    while True:\n        yield ctx.timeout(10)\n"
SIM_FOREVER = "    while True:\n        yield ctx.timeout(10 ** 12)\n"
SPIN = "    yield ctx.timeout(5)\n    while True:\n        pass\n"
STUCK_IN_TIME = "    while True:\n        yield ctx.timeout(0)\n"


def test_too_many_events(tmp_path, capsys):
    one_line_error(["run", program_file(tmp_path, FOREVER), "--max-events", "50000"], capsys,
                   "the run stopped at its limit of 50000 events (--max-events): 50002 events, "
                   "25 time windows and 0 messages so far, simulated time 250.0 µs, 2 "
                   "processes still running")


def test_too_much_simulated_time_by_default(tmp_path, capsys):
    one_line_error(["run", program_file(tmp_path, SIM_FOREVER)], capsys,
                   "the run stopped at its limit of 86400.0 s of simulated time "
                   "(--max-sim-time): 176 events")
    one_line_error(["run", program_file(tmp_path, SIM_FOREVER), "--max-sim-time", "5 s"],
                   capsys, "its limit of 5.0 s of simulated time")


def test_the_wall_clock_timeout_names_the_progress(tmp_path, capsys):
    start = time.monotonic()
    one_line_error(["run", program_file(tmp_path, FOREVER), "--timeout", "1",
                    "--max-events", "1000000000"], capsys,
                   "the run stopped at its wall-clock timeout of 1 s (--timeout): ")
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("body", [SPIN, STUCK_IN_TIME], ids=["spins", "stuck-in-time"])
def test_a_task_that_never_lets_a_window_end_is_stopped_too(tmp_path, capsys, body):
    start = time.monotonic()
    one_line_error(["run", program_file(tmp_path, body), "--timeout", "1"], capsys,
                   "the run passed its wall-clock timeout of 1 s (--timeout) inside one time "
                   "window: a task's code runs without yielding")
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("handler", ["SIG_IGN", "SIG_DFL"])
def test_a_spinning_task_is_stopped_even_when_sigint_is_not_pythons(tmp_path, capsys, handler):
    """The backup timer interrupts the main thread through SIGINT; a host that ignores SIGINT
    (or leaves it to the OS) must not turn the timeout off. The handler is restored after."""
    import signal

    saved = signal.signal(signal.SIGINT, getattr(signal, handler))
    try:
        start = time.monotonic()
        one_line_error(["run", program_file(tmp_path, SPIN), "--timeout", "1"], capsys,
                       "inside one time window: a task's code runs without yielding")
        assert time.monotonic() - start < 10
        assert signal.getsignal(signal.SIGINT) is getattr(signal, handler)
    finally:
        signal.signal(signal.SIGINT, saved)

def test_limits_in_the_python_api_and_the_commands_by_default():
    def main(ctx):
        while True:
            yield ctx.timeout(10)

    with pytest.raises(RunLimitError, match="its limit of 1000 events"):
        simulate({"worker": 2}, main, limits=RunLimits(max_events=1000))
    # without limits= the commands' defaults (tests/training/test_api_limits.py)
    assert simulate.__kwdefaults__["limits"] == RunLimits(10_000_000, 86_400 * 10**9)


@pytest.mark.parametrize("argv, expected", [
    (["allreduce", "-p", "5000", "--phantom"], "these sizes make about 50,000,000 events, more "
                                               "than --max-events 10,000,000 (about 42 min"),
    (["mirrored", "--replicas", "2000", "--global-batch", "4000"], "about 640,002,000 events"),
    (["multi_worker_mirrored", "--workers", "50", "--replicas", "1", "--steps", "100",
      "--max-events", "100000"], "about 2,010,000 events, more than --max-events 100,000"),
    (["token_ring", "--tasks", "3000000"], "about 72,000,000 events"),
    (["mirrored", "--steps", str(10 ** 11)], "about 22,800,000,000,000 events"),
])
def test_sizes_beyond_the_bound_are_refused_with_their_cost(argv, expected, capsys):
    start = time.monotonic()
    one_line_error(["run", *argv], capsys, expected)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("option, value, expected", [
    ("--max-events", "0", "'0': expected a whole number >= 1"),
    ("--max-sim-time", "-5 s", "expected a simulated time > 0"),
    ("--timeout", "nan", "--timeout nan: expected a finite number of seconds > 0"),
    ("--timeout", "-1", "--timeout -1.0: expected a finite number of seconds > 0"),
])
def test_bad_limits_are_refused(option, value, expected, capsys):
    with pytest.raises(SystemExit) as stop:
        simdist_main(["run", "token_ring", f"{option}={value}"])
    assert stop.value.code == 2 and expected in capsys.readouterr().err


@pytest.mark.mpi
def test_a_limit_under_mpi_is_one_message_and_every_rank_stops(tmp_path):
    proc = run_mpi(2, ["-m", "simdist", "run", program_file(tmp_path, FOREVER),
                       "--max-events", "20000"], timeout=50)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.count("the run stopped at its limit of 20000 events") == 1


@pytest.mark.mpi
@pytest.mark.parametrize("body", [
    "    yield ctx.timeout(5)\n    if ctx.task_id == 1:\n"
    "        import os, signal\n        os.kill(os.getpid(), signal.SIGSTOP)\n"
    "    yield ctx.timeout(50)\n",
    SPIN.replace("while True", "while ctx.task_id == 1") + "    yield ctx.timeout(50)\n",
], ids=["stopped", "spinning"])
def test_a_rank_that_stops_answering_ends_the_job_named(tmp_path, body):
    start = time.monotonic()
    proc = run_mpi(2, ["-m", "simdist", "run", program_file(tmp_path, body), "--timeout", "2"],
                   timeout=50)
    assert proc.returncode != 0 and time.monotonic() - start < 30
    assert "rank 1 (at exchange 1) stopped answering: rank 0 waited 2 s (--timeout)" \
        in proc.stderr or "the run passed its wall-clock timeout of 2 s" in proc.stderr
