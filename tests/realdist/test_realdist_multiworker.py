"""realdist's MultiWorkerMirroredStrategy: one local process per worker on real TensorFlow.

Weight parity with simdist, the rule by which TF hands the pieces of a global batch to the
workers and their replicas, and failures: a worker that crashes or hangs ends the run with a
clear error in time, and no worker process survives (not even when the launcher is killed).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from simdist.distribute.input_lib import split_global_batch
from simdist.training import simulate_exercise
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise, RunResult, max_weight_difference
from tests.conftest import ROOT
from tests.realdist.test_realdist import PARITY_TOLERANCE

from realdist.distribute.multiworker import FAULT_ENV, multi_worker_split, worker_devices_env
from realdist.runtime.processes import kill_group

pytestmark = pytest.mark.realtf

EXERCISE = Exercise(strategy="multi_worker_mirrored", workers=2, devices_per_worker=1,
                    communication="ring")


def realdist_run(tmp_path, *options, fault=None, timeout=100):
    """``realdist run multi_worker_mirrored`` (2 workers x 1) with its temp files in tmp_path;
    the result's ``workers`` are the worker processes seen while it ran (``workers_of``)."""
    env = {**os.environ, "TMPDIR": str(tmp_path), **({FAULT_ENV: fault} if fault else {})}
    seen = {}
    with open(tmp_path / "stdout", "w+") as out, open(tmp_path / "stderr", "w+") as err:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "realdist", "run", "multi_worker_mirrored", "--workers", "2",
             "--replicas", "1", *options], cwd=ROOT, stdout=out, stderr=err, text=True,
            env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        try:
            while launcher.poll() is None and time.monotonic() < deadline:
                seen.update((w.pid, w) for w in workers_of(launcher.pid))
                time.sleep(0.05)
        finally:
            kill_group(launcher)
        out.seek(0)
        err.seek(0)
        proc = subprocess.CompletedProcess(launcher.args, launcher.returncode, out.read(),
                                           err.read())
    proc.workers = list(seen.values())
    return proc


def workers_of(pid: int) -> list[psutil.Process]:
    """The live worker processes below process ``pid``: forked by its TF zygote, each named
    after its task (``worker:0``)."""
    try:
        below = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for proc in below:
        try:
            if proc.name().startswith("worker:"):
                found.append(proc)
        except psutil.NoSuchProcess:
            pass
    return found


def still_running(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still alive (``is_running`` is not fooled by a reused pid)."""
    return [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mwms")
    proc = realdist_run(tmp, "--communication", "ring", "--result", str(tmp / "real.json"),
                        "--trace", str(tmp / "trace.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, RunResult.load(tmp / "real.json")


@pytest.mark.timeout(120)
def test_weights_match_the_simulator(run):
    _, real = run
    diff = max_weight_difference(simulate_exercise(EXERCISE), real)
    print(f"multi_worker_mirrored 2x1: max weight difference after 20 steps = {diff:.3g}")
    assert real.exercise == EXERCISE
    assert diff <= PARITY_TOLERANCE
    np.testing.assert_allclose(real.losses, simulate_exercise(EXERCISE).losses, rtol=1e-5,
                               atol=1e-6)
    assert real.losses[-1] < real.losses[0] / 100


@pytest.mark.timeout(120)
def test_cli_reports_every_step_and_both_workers(run):
    proc, real = run
    rows = [line.split() for line in proc.stdout.splitlines() if line[:5].strip().isdigit()]
    assert [int(r[0]) for r in rows] == list(range(20))
    assert [float(r[1]) for r in rows] == pytest.approx(real.losses, abs=1e-6)  # 6 decimals
    assert "CollectiveAllReduceStrategy on worker:0 CPU:0, worker:1 CPU:0" in proc.stdout
    assert real.metadata["cross_device_ops"] == "CollectiveAllReduce (RING)"
    for pid in ("worker:0", "worker:1"):
        steps = [s for s in real.trace.spans if s.pid == pid and s.lane == "steps"]
        assert [s.name for s in steps] == [f"step {k}" for k in range(20)]
    assert real.trace.processes == ["worker:0", "worker:1"]
    assert len(real.step_times_ns) == 20 and min(real.step_times_ns) > 0


def expected_split(examples, global_batch, workers, replicas):
    """simdist's rule: piece j of a global batch (split_global_batch over workers x replicas)
    goes to worker j % workers, local replica j // workers."""
    steps = []
    for start in range(0, examples, global_batch):
        ids = list(range(start, min(start + global_batch, examples)))
        got = [[None] * replicas for _ in range(workers)]
        for j, size in enumerate(split_global_batch(len(ids), workers * replicas)):
            got[j % workers][j // workers], ids = ids[:size], ids[size:]
        steps.append(got)
    return [[step[w] for step in steps] for w in range(workers)]


@pytest.mark.timeout(90)
def test_two_workers_split_a_global_batch_by_the_rule():
    # 11 examples in batches of 5: [3 | 2], [3 | 2], then [1 | 0]: worker 1 gets nothing
    got = multi_worker_split(2, 11, 5, timeout=80)
    assert got == expected_split(11, 5, 2, 1)
    assert got[0] == [[[0, 1, 2]], [[5, 6, 7]], [[10]]]


# TF's MultiWorkerMirroredStrategy uses one replica per worker on CPUs (CPU:0 only). To see
# how it hands pieces to the local replicas of a worker -- what 2 GPUs per worker would do --
# this worker swaps TF's choice of local devices for 2 logical CPUs; the input pipeline that
# cuts and distributes the batch is TF's own, unchanged.
TWO_LOCAL_REPLICAS = textwrap.dedent("""
    import sys
    from realdist.runtime.tfenv import tf
    from tensorflow.python.distribute import collective_all_reduce_strategy as cars

    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    cars.CollectiveAllReduceExtended._initialize_local_devices = (
        lambda self, resolver, worker: ((f"{worker}/device:CPU:0", f"{worker}/device:CPU:1"),
                                        "CPU"))
    from realdist.distribute.multiworker import worker_main
    worker_main(sys.argv[1])
""")


@pytest.mark.timeout(90)
def test_two_workers_with_two_replicas_each_split_by_the_rule():
    got = multi_worker_split(2, 16, 7, timeout=80, worker=("-c", TWO_LOCAL_REPLICAS))
    # 7 over 4 replicas is [2, 2, 2, 1]: pieces 0 and 2 to worker 0, 1 and 3 to worker 1
    assert got[0][0] == [[0, 1], [4, 5]] and got[1][0] == [[2, 3], [6]]
    assert got == expected_split(16, 7, 2, 2)


def test_more_replicas_per_worker_than_tf_gives_cpus_is_a_clear_error():
    with pytest.raises(InvalidArgumentError, match=r"4 replicas per worker: TF's "
                       r"MultiWorkerMirroredStrategy uses one replica per worker on CPUs .* "
                       r"use --replicas 1"):
        worker_devices_env(Exercise(strategy="multi_worker_mirrored", workers=2), 0)
    gpus = worker_devices_env(Exercise(strategy="multi_worker_mirrored", workers=2,
                                       devices_per_worker=2), 4)
    assert gpus == [{"CUDA_VISIBLE_DEVICES": "0,1"}, {"CUDA_VISIBLE_DEVICES": "2,3"}]
    assert worker_devices_env(EXERCISE, 0) == [{"CUDA_VISIBLE_DEVICES": ""}] * 2


@pytest.mark.timeout(90)
def test_a_worker_that_crashes_ends_the_run_at_once(tmp_path):
    start = time.monotonic()
    proc = realdist_run(tmp_path, "--timeout", "60", fault="crash:1:2")
    assert time.monotonic() - start < 40
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith("realdist: UnavailableError: worker:1 exited with code 3 "
                                  "(crashed); the run is stopped and every worker killed")
    assert "REALDIST_FAULT: worker:1 crashes before step 2" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.workers) == 2 and still_running(proc.workers) == []


@pytest.mark.timeout(90)
def test_a_worker_that_hangs_ends_the_run_at_the_timeout(tmp_path):
    start = time.monotonic()
    proc = realdist_run(tmp_path, "--timeout", "30", fault="hang:1:2")
    took = time.monotonic() - start
    assert 30 <= took < 50
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # the chief reports steps 0 and 1, unless a loaded machine started TF too slowly for that
    assert re.match(r"realdist: DeadlineExceededError: the multi-worker run did not finish "
                    r"within its timeout of 30 s \([012] steps reported", proc.stderr)
    assert "still running: worker:0, worker:1 -- killed" in proc.stderr
    assert "REALDIST_FAULT: worker:1 hangs before step 2" in proc.stderr
    assert len(proc.workers) == 2 and still_running(proc.workers) == []


def start_hanging_run(tmp_path):
    """``realdist run multi_worker_mirrored`` (2 workers, worker 1 hangs before step 2), its
    temp files in tmp_path; returned once the workers are training."""
    launcher = subprocess.Popen(
        [sys.executable, "-m", "realdist", "run", "multi_worker_mirrored", "--workers", "2",
         "--replicas", "1", "--timeout", "60"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TMPDIR": str(tmp_path), FAULT_ENV: "hang:1:2"},
        start_new_session=True)
    for line in launcher.stdout:
        if line.split()[:1] == ["1"]:
            break
    return launcher


@pytest.mark.timeout(90)
def test_workers_die_with_a_killed_launcher(tmp_path):
    launcher = start_hanging_run(tmp_path)
    try:
        workers = workers_of(launcher.pid)
        assert sorted(w.name() for w in workers) == ["worker:0", "worker:1"]
        launcher.kill()  # SIGKILL: its finally never runs
        launcher.wait()
        deadline = time.monotonic() + 10
        while still_running(workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert still_running(workers) == []
    finally:
        launcher.kill()
        launcher.wait()
        launcher.stdout.close()
        launcher.stderr.close()


def listening_inodes(net: Path) -> set[str]:
    """The socket inodes listening for TCP in a network namespace's /proc/.../net."""
    inodes = set()
    for name in ("tcp", "tcp6"):
        path = net / name
        for line in (path.read_text().splitlines()[1:] if path.exists() else []):
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    return inodes


def socket_inodes(pid: str) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


@pytest.mark.timeout(90)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="network namespaces: Linux")
def test_tf_servers_listen_in_a_private_network_not_on_this_machine(tmp_path):
    """TF's gRPC server listens on every interface (it cannot be told otherwise): the workers
    run in a network namespace with only a loopback, so no interface of the machine has it."""
    launcher = start_hanging_run(tmp_path)
    try:
        pids = [str(w.pid) for w in workers_of(launcher.pid)]
        assert len(pids) == 2
        on_this_machine = listening_inodes(Path("/proc/self/net"))
        for pid in pids:
            mine = socket_inodes(pid)
            assert mine & listening_inodes(Path(f"/proc/{pid}/net"))  # TF listens, privately
            assert not mine & on_this_machine  # and on no interface of this machine
    finally:
        launcher.kill()
        launcher.wait()
        assert "warning" not in launcher.stderr.read()
        launcher.stdout.close()
        launcher.stderr.close()
