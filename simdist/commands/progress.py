"""The progress bar of the commands that run for minutes (``simdist bench scale``, ``simdist
calibrate``, ``simdist bench predict``, ``python -m benchmarks``). It reads the wall clock:
the commands measure the simulator, or real TensorFlow, from outside; the simulator itself
never does."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """A one-line bar on stderr with the points done and an ETA from the estimates of the
    points left (scaled by how the estimates compared with the wall times so far)."""

    def __init__(self, total: int, stream=None, width: int = 24):
        self.total, self.width, self.done = total, width, 0
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()
        self.tty = getattr(self.stream, "isatty", lambda: False)()

    def show(self, label: str, eta_s: float | None):
        filled = round(self.width * self.done / self.total) if self.total else self.width
        elapsed = time.perf_counter() - self.start
        eta = "?" if eta_s is None else _duration(eta_s)
        text = (f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                f"points, {_duration(elapsed)} elapsed, ETA {eta}: {label}")
        if self.tty:
            self.stream.write("\r" + text[:150].ljust(150))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"

