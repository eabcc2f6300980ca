"""run_mpi starts a job again when Open MPI's launcher failed to start (its PMIx listener:
no rank ran), and only then: a program's own failure is returned as it is."""

import sys

from simdist.sim import launcher

FAKE = """import pathlib, sys
tries = pathlib.Path(sys.argv[1])
n = int(tries.read_text()) + 1 if tries.exists() else 1
tries.write_text(str(n))
if n < int(sys.argv[2]):
    sys.stderr.write("-----\\\\nThe PMIx server's listener thread failed to start. We cannot\\\\n"
                     "continue.\\\\n")
    sys.exit(213)
print(f"ran on try {n}")
sys.exit(int(sys.argv[3]))
"""


def _fake(monkeypatch, tmp_path, succeed_on: int, code: int = 0):
    script = tmp_path / "fake_mpiexec.py"
    script.write_text(FAKE)
    tries = tmp_path / "tries"
    monkeypatch.setattr(launcher, "mpiexec_command", lambda n, args: [
        sys.executable, str(script), str(tries), str(succeed_on), str(code)])
    return tries


def test_a_launcher_that_failed_to_start_is_started_again(monkeypatch, tmp_path):
    tries = _fake(monkeypatch, tmp_path, succeed_on=2)
    proc = launcher.run_mpi(2, ["-c", "pass"], timeout=30)
    assert proc.returncode == 0 and proc.stdout == "ran on try 2\n"
    assert tries.read_text() == "2"


def test_it_gives_up_after_its_tries(monkeypatch, tmp_path):
    tries = _fake(monkeypatch, tmp_path, succeed_on=99)
    proc = launcher.run_mpi(2, ["-c", "pass"], timeout=30)
    assert proc.returncode == 213 and "listener thread failed to start" in proc.stderr
    assert tries.read_text() == str(launcher.LAUNCH_TRIES)


def test_a_program_that_fails_is_not_run_again(monkeypatch, tmp_path):
    tries = _fake(monkeypatch, tmp_path, succeed_on=1, code=1)
    proc = launcher.run_mpi(2, ["-c", "pass"], timeout=30)
    assert proc.returncode == 1 and tries.read_text() == "1"
