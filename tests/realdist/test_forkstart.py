"""Tasks forked from a process that imported TensorFlow once (realdist/runtime/forkstart.py,
a cluster's launcher; realdist/runtime/zygote.py, a zygote per calling process):
a forked child gets what ``python -c CODE ARGS`` with ``subprocess.Popen`` would (its
environment, ``TMPDIR`` included, its argv, its stdout and stderr, exit statuses as the
interpreter gives them, its non-daemon threads waited for), bears the task's name, and a
localhost cluster's task runs forked, its temporary files in its launcher's folder."""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from realdist.runtime import forkstart, zygote
from realdist.runtime.localcluster import PrivateNetwork, Task, run_cluster


def _run(tmp_path, code, args=(), env=None, name="worker:0"):
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        child = forkstart.start(code, list(args), env or {"PATH": os.environ["PATH"]},
                                out, err, name)
    code = child.wait()
    return code, (tmp_path / "out").read_text(), (tmp_path / "err").read_text()


def test_a_forked_child_gets_its_environment_argv_name_and_files(tmp_path):
    code = ("import os, sys, tempfile\n"
            "print(sys.argv, os.environ['X'], os.environ.get('HOME'), tempfile.gettempdir())\n"
            "print(open('/proc/self/comm').read().strip(), __name__)\n"
            "print('to stderr', file=sys.stderr)")
    status, out, err = _run(tmp_path, code, ["a", "b"], {"X": "1", "TMPDIR": str(tmp_path)},
                            name="a-very-long-task-name")
    assert status == 0
    assert out.splitlines() == [f"['-c', 'a', 'b'] 1 None {tmp_path}",
                                "a-very-long-tas __main__"]  # the kernel keeps 15 bytes
    assert err == "to stderr\n"
    assert os.environ.get("X") is None  # the parent's environment is untouched


@pytest.mark.parametrize("code, status, err", [
    ("import sys\nsys.exit(3)", 3, ""),
    ("import sys\nsys.exit('bye')", 1, "bye\n"),
    ("raise ValueError('broken')", 1, "ValueError: broken"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL, ""),
])
def test_a_forked_child_ends_as_the_interpreter_would(tmp_path, code, status, err):
    got, _, stderr = _run(tmp_path, code)
    assert got == status and err in stderr
    if "ValueError" in code:  # the traceback starts at the task's code, as python -c's
        assert stderr.startswith('Traceback (most recent call last):\n  File "<string>"')


def test_a_forked_child_waits_for_its_non_daemon_threads(tmp_path):
    code = ("import threading, time\n"
            "threading.Thread(target=lambda: (time.sleep(0.3), print('late'))).start()\n"
            "print('main done')")
    began = time.monotonic()
    status, out, _ = _run(tmp_path, code)
    assert status == 0 and out.splitlines() == ["main done", "late"]
    assert time.monotonic() - began >= 0.3


def test_a_forked_child_is_polled_and_killed_as_popen(tmp_path):
    with open(tmp_path / "out", "wb") as out:
        child = forkstart.start("import time\ntime.sleep(60)", [], {}, out, out, "sleeper")
    assert child.poll() is None
    child.kill()
    assert child.wait() == -signal.SIGKILL and child.poll() == -signal.SIGKILL


def test_tasks_fork_only_where_asked(monkeypatch):
    monkeypatch.setenv("DISTLAB_FORK_TASKS", "0")
    assert not forkstart.enabled()
    monkeypatch.delenv("DISTLAB_FORK_TASKS")
    assert forkstart.enabled()


@pytest.mark.realtf
@pytest.mark.timeout(120)
def test_a_cluster_task_is_forked_and_its_temporary_files_go_with_its_launcher():
    code = ("import tempfile\nemit('tmp', tempfile.gettempdir())\n"
            "emit('name', open('/proc/self/comm').read().strip())\n"
            "emit('tf', tf.constant(2.0).numpy().item() if tf.executing_eagerly() else None)")
    out = run_cluster({}, [Task("main", code)], timeout=100)["outputs"]["main"]
    # AutoGraph's files, which a SIGKILLed task never deletes, go with the launcher's folder
    assert os.path.basename(out["tmp"]).startswith("realdist-cluster-")
    assert not os.path.exists(out["tmp"])
    assert out["name"] == "main"  # forked from the launcher, named after its task
    assert out["tf"] is None  # PRELUDE's graph mode, set in the task, not in the launcher


def _spawned_output(found, code, args=(), network=None, name="tf-program"):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = found.spawn(code, list(args), {"PATH": os.environ["PATH"]}, out.fileno(),
                            err.fileno(), name,
                            namespaces=network.namespaces() if network else None)
        status = child.wait(timeout=30)
        out.seek(0)
        err.seek(0)
        return status, out.read().decode(), err.read().decode()


def test_the_zygote_forks_programs_and_reports_how_they_ended():
    found = zygote.zygote("import json\n", {})
    assert found is zygote.zygote("import json\n", {})  # one per caller and imports
    status, out, _ = _spawned_output(found, "import sys, json\nprint(json.dumps(sys.argv))\n"
                                            "print(open('/proc/self/comm').read().strip())",
                                     ["x"], name="client0")
    assert status == 0 and out.splitlines() == ['["-c", "x"]', "client0"]
    assert _spawned_output(found, "raise SystemExit(4)")[0] == 4
    with tempfile.TemporaryFile() as out:
        child = found.spawn("import time\ntime.sleep(60)", [], {}, out.fileno(), out.fileno(),
                            "sleeper")
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=0.2)
        child.kill()
        assert child.wait(timeout=10) == -signal.SIGKILL


def test_the_zygote_ignores_an_interrupt_its_programs_take_as_python_does():
    # a Jupyter kernel's interrupt and a terminal's Ctrl-C reach the caller's process group
    found = zygote.zygote("import json\n", {})
    os.kill(found.proc.pid, signal.SIGINT)
    time.sleep(0.3)
    assert found.proc.poll() is None
    status, out, _ = _spawned_output(found, "import signal\nprint(signal.getsignal("
                                            "signal.SIGINT) is signal.default_int_handler)")
    assert status == 0 and out.strip() == "True"


def test_a_forked_tf_program_s_op_tracebacks_show_its_own_lines_as_python_c_does():
    from realdist.graph.tf1 import run_python

    code = ("q = tf1.FIFOQueue(2, tf1.float32)\n"
            "with tf1.Session() as sess:\n"
            "    sess.run(q.close())\n"
            "    try:\n"
            "        sess.run(q.dequeue())\n"
            "    except tf1.errors.OutOfRangeError as e:\n"
            "        emit('message', e.message)\n")
    message = run_python(code, timeout=120)[0]["message"]
    defined_at = message.split("defined at (most recent call last):\n", 1)[1]
    # the program's line, as in a fresh python -c; not TF's own frames, nor the zygote's
    assert re.match(r'    File "<string>", line \d+, in <module>\nNode:', defined_at)


def test_a_program_the_zygote_forks_runs_in_the_private_network():
    with PrivateNetwork() as net:
        if not net.isolated:
            pytest.skip(f"no private network namespace here ({net.reason})")
        status, out, err = _spawned_output(
            zygote.zygote("import json\n", {}),
            "import socket\nprint([name for _, name in socket.if_nameindex()])", network=net)
    assert status == 0, err
    assert out.strip() == "['lo']"  # the holder's namespace: its loopback only


def test_the_zygote_and_its_programs_die_with_a_killed_caller(tmp_path):
    caller = subprocess.Popen(
        [sys.executable, "-c",
         "import os, sys, time\nfrom realdist.runtime import zygote\n"
         "found = zygote.zygote('import json\\n', {})\n"
         "child = found.spawn('import time\\ntime.sleep(600)', [], {}, 1, 2, 'sleeper')\n"
         "print(found.proc.pid, child.pid, flush=True)\ntime.sleep(600)"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    pids = [int(p) for p in caller.stdout.readline().split()]
    caller.kill()
    caller.wait()
    caller.stdout.close()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(pids) == 2 and not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent's reaper does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.realtf
@pytest.mark.timeout(120)
def test_a_tf_program_s_temporary_files_go_with_its_run():
    from realdist.graph.tf1 import run_python

    out = run_python("import tempfile\nemit('tmp', tempfile.gettempdir())")[0]
    assert os.path.basename(out["tmp"]).startswith("realdist-program-")
    assert not os.path.exists(out["tmp"])  # AutoGraph's files, if any, went with it
