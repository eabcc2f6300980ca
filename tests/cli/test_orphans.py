"""No orphans from a killed benchmark launcher (issue 30, item 1): ``simdist bench scale`` and
``simdist bench allreduce`` start mpiexec; killing the launcher by SIGTERM or SIGKILL once
its ranks are up leaves no mpiexec (prterun) and no rank of that job. The rank counts they
accept are capped (``simdist.sim.launcher.max_ranks``) with a one-line error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from simdist.sim.launcher import max_ranks

ROOT = Path(__file__).resolve().parents[2]
MARK = "DISTLAB_ORPHAN_TEST"

#: each launcher, with a job that runs long enough to be killed while its ranks are up
LAUNCHERS = {
    "scale": ["bench", "scale", "--ranks", "2", "--devices", "1024", "--steps", "50",
              "--fidelity", "message", "--tracing", "off", "--no-target", "--max-point-s",
              "600"],
    "allreduce": ["bench", "allreduce", "--ranks", "2", "--sizes", "64MiB", "--iters",
                  "100000", "--timeout", "120"],
}
#: what names a rank of each launcher's job on its command line
RANK_MARK = {"scale": "simdist.commands.bench.scale", "allreduce": "simdist.commands.bench.allreduce"}


def marked(token: str) -> dict[int, str]:
    """pid -> command line of every live process whose environment carries ``token``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"{MARK}={token}".encode() not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone, or a zombie
            continue
        if stat.rsplit(")", 1)[1].split()[0] != "Z":
            found[int(entry.name)] = cmdline
    return found


def wait_for(condition, seconds: float, step: float = 0.2):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(step)
    return condition()


@pytest.mark.mpi
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["TERM", "KILL"])
@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
@pytest.mark.timeout(120)
def test_killed_launcher_leaves_no_process(launcher, signum, tmp_path):
    token = uuid.uuid4().hex
    env = {**os.environ, MARK: token}
    args = LAUNCHERS[launcher] + (["--csv", str(tmp_path / "s.csv")] if launcher == "scale"
                                  else [])
    proc = subprocess.Popen([sys.executable, "-m", "simdist", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # as `setsid simdist ...`: no group kill
    try:
        def started():  # both ranks (a loaded machine takes a while to start them)
            ranks = [p for p, cmd in marked(token).items()
                     if RANK_MARK[launcher] in cmd and cmd.startswith(sys.executable)]
            return ranks if len(ranks) >= 2 else None
        ranks = wait_for(started, 60) or []
        assert len(ranks) >= 2, f"the ranks did not start: {marked(token)}"
        time.sleep(2)  # past MPI's start-up, into the work
        proc.send_signal(signum)
        proc.wait(timeout=15)
        left = wait_for(lambda: not marked(token), 10) or marked(token)
        assert left is True, f"left running after SIG{signum.name[3:]}: {left}"
    finally:
        for pid in marked(token):
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("launcher", ["scale", "allreduce"])
def test_rank_count_is_capped(launcher, tmp_path):
    too_many = max_ranks() + 1
    proc = subprocess.run([sys.executable, "-m", "simdist", "bench", launcher, "--ranks",
                           str(too_many), "--csv" if launcher == "scale" else "--iters",
                           str(tmp_path / "s.csv") if launcher == "scale" else "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"--ranks {too_many}" in lines[0] and f"1 to {max_ranks()} ranks" in lines[0]
    assert "mpiexec" not in proc.stdout  # refused before any job starts
