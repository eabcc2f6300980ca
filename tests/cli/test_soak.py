"""The soak test: each command at the largest sizes it accepts (just under its event limit or
its memory cap), run as a child process with a wall-clock limit, must either finish or stop
with one clear error line, never a traceback, and its peak memory (the child's own maximum
resident set) must stay within DistLab's 3 GiB cap for a run plus Python's own, so that it
fits a 4 GiB machine. The address space is capped at 8 GiB, so a runaway fails fast instead
of swapping. About a minute; the sizes come from the commands' own estimates (see
``simdist/base/checks.py``)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(240)

#: the most a run may hold (DistLab's cap) plus Python and numpy themselves
PEAK_RSS = (3 << 30) + (512 << 20)
SIMDIST = [sys.executable, "-m", "simdist"]

CASES = {
    # ~9.7 million events, just under simdist ps's 10 million: runs until its --timeout
    "ps": ["ps", "--workers", "64", "--steps", "440", "--timeout", "8"],
    # ~8.4 million events of a 1,024-worker all-reduce
    "data_parallel": ["run", "data_parallel", "--workers", "1024", "--steps", "4", "--quiet",
                      "--timeout", "8"],
    # 190 tasks x (two 8 MiB tokens + 16 KiB): 2.97 GiB, just under the 3 GiB cap
    "token_ring": ["run", "token_ring", "--tasks", "190", "--large-bytes", "8MiB", "--rounds",
                   "2", "--quiet", "--timeout", "30"],
    # 8 x 128 MiB of real values, held 3 times over: the 3 GiB cap exactly
    "allreduce": ["run", "allreduce", "--algorithm", "recursive-doubling", "--size", "128MiB",
                  "-p", "8", "--quiet", "--timeout", "30"],
}


def _capped():
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_largest_accepted_sizes_finish_or_stop_clearly_within_the_memory_cap(name):
    child = subprocess.Popen([*SIMDIST, *CASES[name]], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, preexec_fn=_capped)
    try:
        err = child.stderr.read()
    finally:
        _, status, usage = os.wait4(child.pid, 0)  # reaped, with its own peak memory
    code = os.waitstatus_to_exitcode(status)
    assert "Traceback" not in err and "MemoryError" not in err, err
    assert code in (0, 2), (code, err)
    if code == 2:  # a limit reached: said in one line
        last = err.strip().splitlines()[-1]
        assert last.startswith("simdist") and "error" in last and len(last) < 2000, err
        assert "--timeout" in last or "wall clock" in last, err  # not a refusal: it ran
    assert usage.ru_maxrss * 1024 <= PEAK_RSS, f"peak {usage.ru_maxrss // 1024} MB"
