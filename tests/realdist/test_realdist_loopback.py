"""realdist's launcher, without TensorFlow (the TF checks are in test_realdist_multiworker):
servers in a private network (only a loopback), job directories of killed launchers removed,
no more worker processes than a machine holds."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from realdist.distribute import multiworker
from realdist.runtime.localcluster import PrivateNetwork

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]

LISTEN = """
import socket, sys
a = socket.socket(); a.bind(("0.0.0.0", 0)); a.listen()   # every interface, as TF does
b = socket.create_connection(("127.0.0.1", a.getsockname()[1]))  # the loopback is up
print(a.getsockname()[1], flush=True)
sys.stdin.read()
"""


def listening_ports() -> set[int]:
    ports = set()
    for name in ("tcp", "tcp6"):
        for line in open(f"/proc/self/net/{name}").read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_a_server_on_every_interface_of_the_private_network_is_not_on_this_machine():
    with PrivateNetwork() as net:
        assert net.isolated, net.reason
        child = subprocess.Popen([sys.executable, "-c", LISTEN], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, preexec_fn=net.preexec_fn())
        try:
            port = int(child.stdout.readline())
            assert port not in listening_ports()
        finally:
            child.kill()
            child.wait()
            child.stdin.close()
            child.stdout.close()


def test_temporary_folders_of_dead_launchers_are_removed(tmp_path, monkeypatch):
    """A launcher killed with SIGKILL leaves its folders; the next run removes them, for
    every kind of folder realdist makes, and keeps those of live processes."""
    from realdist.runtime import tempdirs

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    assert multiworker.JOB_DIR_PREFIX in tempdirs.PREFIXES
    stale = [tmp_path / f"{prefix}{dead}-abc" for prefix in tempdirs.PREFIXES]
    live = [tmp_path / f"{prefix}{os.getpid()}-def" for prefix in tempdirs.PREFIXES]
    for folder in stale + live:
        folder.mkdir()
        (folder / "worker0.log").write_text("x")
    with tempdirs.owned_tempdir("realdist-cluster-") as mine:
        assert Path(mine).name.startswith(f"realdist-cluster-{os.getpid()}-")
        assert not any(f.exists() for f in stale) and all(f.exists() for f in live)
    assert not Path(mine).exists()
    with pytest.raises(ValueError, match="expected one of"):
        tempdirs.owned_tempdir("mine-")


def test_realdist_refuses_more_local_workers_than_a_machine_holds():
    from simdist.base.errors import InvalidArgumentError
    from simdist.training.exercises import Exercise

    exercise = Exercise(strategy="multi_worker_mirrored", workers=100, devices_per_worker=1,
                        global_batch=128)
    with pytest.raises(InvalidArgumentError, match="--workers 100: each worker is a "
                                                   "TensorFlow process of its own"):
        multiworker.run_multi_worker(exercise)
