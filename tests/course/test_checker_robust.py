"""The lesson checker cannot be fooled or hung (issue 30, item 7): an exercise that calls
exit(), sys.exit(0), raise SystemExit(0) or os._exit(0), loops forever or sleeps for days is a
failed check naming the problem; ``simdist check`` exits 1 within its ``--timeout``, and
leaves no process behind (the child that ran the learner's code, and what it started, are
killed and reaped)."""

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from course import lessons
from tests.conftest import ROOT

LIMIT = 3  # --timeout of these runs, seconds

#: exercise body -> what the report says
CASES = {
    "exit": ("exit()", "your code called exit() or sys.exit()"),
    "sys_exit": ("sys.exit(0)", "your code called exit() or sys.exit(0)"),
    "raise": ("raise SystemExit(0)", "your code called exit() or sys.exit(0)"),
    "os_exit": ("os._exit(0)",
                "exercise ring_all_reduce ended the checker's process (exit status 0)"),
    "loop": ("while True: pass",
             f"exercise ring_all_reduce did not finish within the checker's limit of {LIMIT} s"),
    "sleep": ("time.sleep(10**6)",
              f"exercise ring_all_reduce did not finish within the checker's limit of {LIMIT} s"),
}

#: the learner's file: writes its process's pid and a grandchild's, then does ``{body}``
LEARNER = '''import os, subprocess, sys, time
from pathlib import Path


def ring_all_reduce(ctx, members, value):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    Path({pids!r}).write_text(f"{{os.getpid()}} {{sleeper.pid}}")
    {body}


def predict_fastest(*args, **kwargs):
    {body}
'''


def learner_file(tmp_path, body: str) -> Path:
    path = tmp_path / "exercises.py"
    path.write_text(LEARNER.format(pids=str(tmp_path / "pids"), body=body), encoding="utf-8")
    return path


def simdist_check(*args, timeout=60):
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "simdist", "check", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - start


def gone(pid: int, within: float = 5.0) -> bool:
    """True once ``pid`` is no process (or a zombie about to be reaped by init)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.timeout(90)
@pytest.mark.parametrize("case", CASES)
def test_an_exercise_that_exits_or_hangs_is_a_failed_check(tmp_path, case):
    body, says = CASES[case]
    proc, seconds = simdist_check("01", "ring_all_reduce", "--file",
                                  str(learner_file(tmp_path, body)), "--timeout", str(LIMIT))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert says in proc.stdout, proc.stdout
    assert "0 of 3 checks pass" in proc.stdout
    assert seconds < 40  # the first check's limit, not one per check, then a fresh child
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert all(gone(pid) for pid in pids), f"left running: {pids}"


@pytest.mark.timeout(60)
def test_a_whole_lesson_goes_on_after_an_exercise_ends_the_process(tmp_path):
    proc, _ = simdist_check("01", "--file", str(learner_file(tmp_path, "os._exit(0)")),
                            "--timeout", str(LIMIT), "--lang", "zh")
    assert proc.returncode == 1
    assert "练习 ring_all_reduce 结束了检查程序的进程" in proc.stdout
    assert "练习 predict_fastest 结束了检查程序的进程" in proc.stdout  # a fresh child ran it
    assert "提示: 删掉 os._exit()" in proc.stdout
    assert "9 项检查中通过 0 项" in proc.stdout


@pytest.mark.timeout(60)
@pytest.mark.parametrize("top, says", [
    ("import os\nos._exit(0)\n", "importing exercises.py ended the checker's process"),
    ("exit()\n", "importing exercises.py called exit() or sys.exit()"),
    ("while True:\n    pass\n", "importing exercises.py did not finish within"),
])
def test_a_file_that_exits_or_hangs_on_import_fails_every_check(tmp_path, top, says):
    path = tmp_path / "exercises.py"
    path.write_text(top, encoding="utf-8")
    proc, _ = simdist_check("01", "--file", str(path), "--timeout", str(LIMIT))
    assert proc.returncode == 1
    assert proc.stdout.count("✗") == 9 and says in proc.stdout, proc.stdout


@pytest.mark.timeout(90)
def test_check_all_reports_a_hanging_exercise_as_failing(tmp_path):
    folder = tmp_path / "lessons"
    shutil.copytree(ROOT / "lessons" / "01_collectives", folder / "01_collectives")
    mine = tmp_path / "mine" / "01_collectives"
    mine.mkdir(parents=True)
    learner_file(mine, "while True: pass")
    proc, seconds = simdist_check("--all", "--lessons-dir", str(folder), "--workspace",
                                  str(mine.parent), "--timeout", str(LIMIT))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "✗ ring_all_reduce" in proc.stdout and "✗ predict_fastest" in proc.stdout
    assert seconds < 60
    assert all(gone(int(pid)) for pid in (mine / "pids").read_text().split())


def test_in_process_checks_survive_exit_too(tmp_path):
    """Without a child process (``run_checks``, a notebook's check cell) SystemExit is a
    failed check as well, never the end of the checker."""
    path = tmp_path / "exercises.py"
    path.write_text("def ring_all_reduce(ctx, members, value):\n    raise SystemExit(0)\n",
                    encoding="utf-8")
    results = lessons.run_checks("01", file=path, exercise="ring_all_reduce")
    assert results and not any(r.passed for r in results)
    assert "called exit() or sys.exit(0)" in results[0].message
    assert "remove the exit()" in results[0].hint
    path.write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    results = lessons.run_checks("01", file=path)
    assert all("importing exercises.py called exit() or sys.exit(3)" in r.message
               for r in results)


def test_the_solution_passes_in_a_child_process_and_the_limit_is_checked():
    results = lessons.run_checks("01", solution=True, timeout=60)
    assert results and all(r.passed for r in results)
    assert lessons.run_checks("01", solution=True)[0].title == results[0].title
    for bad in ("0", "-1", "nan", "inf", "soon"):
        proc, _ = simdist_check("01", "--timeout", bad)
        assert proc.returncode == 2 and "--timeout" in proc.stderr, (bad, proc.stderr)
