"""A lesson's checks in a child process, so that the learner's code can neither end nor hang
the checker: ``os._exit()`` or an endless loop in an exercise becomes a failed check.

``CheckChild`` starts ``python -m course.check_child``, which loads the lesson's checks and
the learner's file and runs the checks it is given, one JSON message a line on a pipe of its
own (the learner's prints still go to stdout). The child leads its own process group, dies
with the checker (a parent-death signal) and is killed with everything it started when the
checker is done with it. ``pack``/``unpack`` carry a hint's translation (``lang.tr``) across.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from course.lang import Text, tr
from realdist.runtime.processes import kill_group

#: seconds each check (and the import of the learner's file) may take unless told otherwise
TIMEOUT_S = 60.0
#: seconds the child may take to start Python and load the lesson's checks.py (ours, not the
#: learner's code)
START_S = 120.0
#: the module the child runs
CHILD = "course.check_child"


def pack(value):
    """A JSON-ready copy of ``value``, a ``tr`` text kept as {"en": ..., "zh": ...}."""
    if isinstance(value, Text):
        return {"en": str(value), "zh": value.zh}
    if isinstance(value, dict):
        return {key: pack(item) for key, item in value.items()}
    return value


def unpack(value):
    """The inverse of ``pack``."""
    if isinstance(value, dict):
        if set(value) == {"en", "zh"}:
            return tr(value["en"], value["zh"])
        return {key: unpack(item) for key, item in value.items()}
    return value


def how_it_ended(returncode: int) -> str:
    """'exit status 0', or 'signal SIGKILL' for a process a signal ended."""
    if returncode is not None and returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


class CheckChild:
    """A child process running the checks ``indices`` (of the lesson's ``CHECKS``) against
    the learner's file ``path``; ``next(seconds)`` reads its messages."""

    def __init__(self, lesson_dir, path, indices: list[int]):
        read, write = os.pipe()
        root = str(Path(__file__).resolve().parents[1])  # so that ``course`` imports
        env = dict(os.environ, PYTHONUNBUFFERED="1", DISTLAB_CHECKER_PID=str(os.getpid()),
                   PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH"))
                                              if p))
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", CHILD, str(write), str(Path(lesson_dir).resolve()),
                 str(Path(path).resolve()), ",".join(map(str, indices))],
                pass_fds=(write,), stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)
        finally:
            os.close(write)
        self.fd, self.buffer, self.returncode = read, b"", None

    def next(self, seconds: float) -> dict:
        """The child's next message; ``{"silent": seconds}`` if none came within ``seconds``,
        ``{"ended": returncode}`` if the child ended first."""
        deadline = time.monotonic() + seconds
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return {"silent": seconds}
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return {"ended": self._ended()}
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:  # not ours: the child is no longer to be trusted
            message = None
        return unpack(message) if isinstance(message, dict) else {"ended": self._ended()}

    def _ended(self) -> int:
        try:
            self.returncode = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # it closed the pipe but lives on: end it
            self.close()
            self.returncode = self.proc.returncode
        return self.returncode

    def close(self) -> None:
        """Kill the child and every process it started, reap it, close the pipe."""
        kill_group(self.proc)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
