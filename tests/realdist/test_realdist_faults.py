"""realdist's fault paths (issue 30, item 8): a task's process that is stopped (SIGSTOP) or
killed by hand ends the run within seconds, naming that task, whatever program runs on the
localhost cluster, and the launcher names the task whose process died first. Each real
case signals its task as soon as the launcher started it (before TensorFlow is imported),
so each ends in a few seconds; without the launcher's watch each waited its timeout."""

import signal
import threading
import time
from contextlib import contextmanager
from types import SimpleNamespace

import psutil
import pytest

from realdist.runtime import watch
from realdist.training import ps_programs, queue_programs
from realdist.training.parameter_server_runner import run_parameter_server
from simdist.base.errors import UnavailableError
from simdist.training.exercises import Exercise
from tests.conftest import left_behind

TIMEOUT = 60  # each run's; a fault seen ends it within STOPPED_S + a few seconds


@contextmanager
def signal_on_start(task: str, sig: int):
    """Send ``sig`` to ``task``'s process (a child of the localhost cluster's launcher)
    as soon as it is started (a task forked from the launcher bears its name, one started
    as ``python -c`` has it in its command line); yields the pids signalled."""
    stop, sent = threading.Event(), []

    def look():
        while not stop.is_set():
            for proc in psutil.Process().children(recursive=True):
                try:
                    name, cmd = proc.name(), proc.cmdline()
                except psutil.Error:
                    continue
                if name == task or (len(cmd) > 2 and cmd[1] == "-c"
                                    and f"TASK = {task!r}" in cmd[2]):
                    proc.send_signal(sig)
                    sent.append(proc.pid)
                    return
            stop.wait(0.01)

    thread = threading.Thread(target=look, daemon=True)
    thread.start()
    try:
        yield sent
    finally:
        stop.set()
        thread.join()


def _parameter_server():
    exercise = Exercise(strategy="parameter_server", workers=2, ps=1, steps=4)
    run_parameter_server(exercise, timeout=TIMEOUT, processes=True)


def _ps_compare():
    ps_programs.real_train_on_ps(workers=2, mode="sync", steps=2, timeout=TIMEOUT)


def _loader_trainer():
    queue_programs.real_loader_trainer(steps=2, timeout=TIMEOUT)


@pytest.mark.realtf
@pytest.mark.timeout(TIMEOUT + 30)
@pytest.mark.parametrize("program, task, sig, expected", [
    # realdist run parameter_server --processes: the chief waited for the stopped worker
    (_parameter_server, "worker:1", signal.SIGSTOP,
     r"task worker:1 is stopped \(its process \d+ is in state T, as after SIGSTOP\) for 2 s"),
    # realdist ps (--compare): the workers waited for the dead ps
    (_ps_compare, "ps:0", signal.SIGKILL,
     r"task ps:0 exited with code -9 \(killed by SIGKILL\), the first task to fail"),
    # realdist queues loader-trainer: named worker:0, which failed after the ps
    (_loader_trainer, "ps:0", signal.SIGKILL,
     r"task ps:0 exited with code -9 \(killed by SIGKILL\), the first task to fail"),
], ids=["stopped-worker", "killed-ps", "queues-killed-ps"])
def test_a_stopped_or_killed_task_is_named_at_once_and_nothing_is_left(program, task, sig,
                                                                       expected):
    began = time.monotonic()
    with signal_on_start(task, sig) as sent, pytest.raises(UnavailableError, match=expected):
        program()
    assert sent and time.monotonic() - began < TIMEOUT / 2  # not at the timeout
    assert left_behind() == []


class _Proc:
    """A finished process as ``subprocess.Popen`` shows it."""

    def __init__(self, code):
        self.returncode, self.pid = code, 0

    def poll(self):
        return self.returncode


def test_the_task_that_died_first_is_named_though_both_are_seen_at_one_look(tmp_path):
    """ps:0 killed, worker:0 failing 5 ms later: one look of the launcher finds both."""
    found = watch.ProcessWatch()
    worker, ps = _Proc(1), _Proc(-9)
    found.procs = {"worker:0": ("worker:0", worker), "ps:0": ("ps:0", ps)}
    found.ended_at = {"ps:0": 1_000_000_000, "worker:0": 1_005_000_000}
    schedule = SimpleNamespace(killed=[], down=lambda task: False)
    with pytest.raises(UnavailableError, match=r"^task ps:0 exited with code -9 \(killed by "
                       r"SIGKILL\), the first task to fail \(after it: worker:0 exited with "
                       r"code 1\)"):
        watch.check_failed(found, schedule, {"worker:0": worker, "ps:0": ps}, ["worker:0"],
                           tmp_path)
    # past a deadline, both are said; a ps the schedule killed (a planned failure) is no
    # failure
    assert found.note() == " (died: ps:0 killed by SIGKILL, worker:0 raised an error)"
    schedule.killed = [ps]
    assert found.note(schedule.killed) == " (died: worker:0 raised an error)"
    with pytest.raises(UnavailableError, match=r"^task worker:0 exited with code 1 "):
        watch.check_failed(found, schedule, {"worker:0": worker, "ps:0": ps}, ["worker:0"],
                           tmp_path)


def test_the_state_of_a_process_is_read_from_proc():
    assert watch.process_state(psutil.Process().pid) in ("R", "S")
    assert watch.process_state(2 ** 22 + 1) == ""
    assert watch.describe_exit(-9) == "killed by SIGKILL" and watch.describe_exit(1) == \
        "raised an error"
