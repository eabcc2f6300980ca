"""realdist.runtime.progress: a slow real-TensorFlow cell says so, then shows a bar."""

import io
import sys
import time

from realdist.runtime.progress import Bar, run_realdist, running

STEPS = """\
realdist: mirrored, 4 replica(s); starting TensorFlow...
 step         loss  step time (ms)
    0     2.474258          497.30
    1     2.449937           10.10
    2     2.420000            9.90
realdist: final loss 2.420000
"""


def test_the_bar_counts_steps_and_seconds():
    assert Bar(4).line(1) == "[#######-----------------------] 1/4 steps"
    assert Bar(40, unit="s", width=10).line(10) == "[##--------] 10 s of about 40"
    assert Bar(3, width=3).line(9) == "[###] 9/3 steps"  # more than expected: a full bar


def test_run_realdist_says_what_runs_and_moves_the_bar_with_each_step(capsys):
    fake = [sys.executable, "-c", f"import sys; sys.stdout.write({STEPS!r})"]
    proc = run_realdist(["run", "mirrored"], steps=3, about_s=20, command=fake)
    out = capsys.readouterr().out
    assert proc.returncode == 0 and proc.stdout == STEPS
    assert out.startswith("real TensorFlow: realdist run mirrored (about 20 s on a 2-core "
                          "machine)...\n")
    assert "\r[##########--------------------] 1/3 steps" in out
    assert "\r[##############################] 3/3 steps" in out
    assert out.rstrip().endswith("done in 0 s")


def test_run_realdist_reports_a_failure_and_a_timeout(capsys):
    failing = [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"]
    proc = run_realdist([], steps=2, about_s=1, command=failing)
    assert (proc.returncode, proc.stdout) == (3, "boom\n")
    assert "realdist exited with 3" in capsys.readouterr().out
    start = time.monotonic()
    hanging = [sys.executable, "-c", "import time; time.sleep(60)"]
    assert run_realdist([], steps=2, about_s=1, timeout=1, command=hanging).returncode != 0
    assert time.monotonic() - start < 30


def test_running_moves_a_bar_with_the_clock_until_the_block_ends():
    stream = io.StringIO()
    with running("servers and clients", 2, stream=stream):
        time.sleep(1.3)
    text = stream.getvalue()
    assert text.startswith("real TensorFlow: servers and clients (about 2 s on a 2-core "
                           "machine)...\n")
    assert "1 s of about 2" in text and "done in 1 s" in text
