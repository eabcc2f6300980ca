"""Progress of a real TensorFlow run in a notebook cell or a terminal.

A run of real TensorFlow takes tens of seconds on a small machine (starting TensorFlow,
servers, worker processes), where the simulator answers at once. A lesson cell that starts
one says so first (``announce``), then shows a bar (``Bar``): moved by the training steps
that ``realdist run`` prints (``run_realdist``), or by the clock for a call that prints
nothing while it runs (``running``). The bar rewrites its line with ``\\r``, which Jupyter
and terminals show in place.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

#: a row of the step table ``realdist run`` prints: step, loss, step time (ms)
_STEP_ROW = re.compile(r"^\s*(\d+)\s+\S+\s+[\d.]+\s*$")


def announce(what: str, about_s: float, stream=None) -> None:
    """One line before a slow cell's work starts: what runs, and about how long it takes."""
    print(f"real TensorFlow: {what} (about {about_s:.0f} s on a 2-core machine)...",
          file=stream or sys.stdout, flush=True)


class Bar:
    """A one-line progress bar: ``[######------]  6/12 steps  3 s``."""

    def __init__(self, total: int, unit: str = "steps", width: int = 30, stream=None):
        self.total, self.unit, self.width = max(total, 1), unit, width
        self.stream = stream or sys.stdout
        self.start = time.monotonic()

    def line(self, done: float) -> str:
        filled = int(self.width * min(done, self.total) / self.total)
        count = f"{done:.0f}/{self.total}" if self.unit != "s" else \
            f"{done:.0f} s of about {self.total}"
        return (f"[{'#' * filled}{'-' * (self.width - filled)}] {count} "
                f"{'' if self.unit == 's' else self.unit}").rstrip()

    def update(self, done: float) -> None:
        print("\r" + self.line(done), end="", file=self.stream, flush=True)

    def close(self, note: str = "") -> None:
        """End the bar's line (it stays as it was left) and say how long it took."""
        elapsed = time.monotonic() - self.start
        print(f"\n{note or 'done'} in {elapsed:.0f} s", file=self.stream, flush=True)


def run_realdist(args: list[str], steps: int, about_s: float, timeout: float = 300,
                 env=None, command=None) -> subprocess.CompletedProcess:
    """Run ``realdist ARGS`` (``command``: another program printing the same step table),
    saying so first and moving a bar with each step it prints; returns what it printed,
    as ``subprocess.run(..., capture_output=True)`` does (stderr in ``stdout`` too)."""
    command = list(command or [sys.executable, "-m", "realdist"]) + list(args)
    announce(" ".join(["realdist", *args]), about_s)
    bar = Bar(steps)
    bar.update(0)
    lines: list[str] = []
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            lines.append(line)
            row = _STEP_ROW.match(line)
            if row:
                bar.update(int(row.group(1)) + 1)
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    bar.close("done" if proc.returncode == 0 else f"realdist exited with {proc.returncode}")
    return subprocess.CompletedProcess(command, proc.returncode, "".join(lines), "")


@contextmanager
def running(what: str, about_s: float, stream=None):
    """``with running("a ps, 2 workers and 3 clients", 45): ...``: say so, then move a bar
    with the clock (once a second) until the block ends."""
    announce(what, about_s, stream)
    bar = Bar(int(about_s), unit="s", stream=stream)
    stop = threading.Event()

    def tick():
        while not stop.wait(1.0):
            bar.update(time.monotonic() - bar.start)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield bar
    finally:
        stop.set()
        ticker.join()
        bar.close()
