"""What a launcher of real TF processes watches in them: when each ended and which is
stopped.

When one task of a cluster dies (a ps killed with SIGKILL), others fail after it (a worker
whose session meets the dead ps exits with an error), so a launcher that looks every few ms
can find several ended at one look: ``ProcessWatch`` knows which ended first, a thread per
process waiting for its exit (``waitid`` with ``WNOWAIT``, which leaves the reaping to
``subprocess``) and noting the time. A process that is stopped (SIGSTOP, a debugger: state
``T`` or ``t`` in ``/proc/PID/stat``) does nothing its peers wait for, and never ends by
itself: ``stopped`` says since when.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import NamedTuple

from simdist.base.errors import UnavailableError

from realdist.runtime.processes import log_tail

#: how long a task's process may stay stopped before the launcher ends the run
STOPPED_S = 2.0


class Ended(NamedTuple):
    """A watched process that ended: its label (the task, "#N" for a restart), its task,
    its exit code (-N: killed by signal N), when it ended (``time.monotonic_ns``)."""

    label: str
    task: str
    code: int
    at: int
    proc: object


class Stopped(NamedTuple):
    """A watched process found stopped: its label, task, pid and since when (ns)."""

    label: str
    task: str
    pid: int
    since: int


def describe_exit(code: int) -> str:
    """'killed by SIGKILL' for -9, 'raised an error' for 1, 'crashed' for another code."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return "crashed" if code != 1 else "raised an error"


def process_state(pid: int) -> str:
    """The state letter of ``/proc/PID/stat`` ("R", "S", "T"...; "" where unknown)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 1:].split()
    return fields[0] if fields else ""


class ProcessWatch:
    """The processes a launcher started (``add``), their ends in order (``ended``) and the
    stopped ones (``stopped``)."""

    def __init__(self):
        self.procs: dict = {}  # label -> (task, subprocess.Popen)
        self.ended_at: dict = {}  # label -> time.monotonic_ns() of its exit
        self.stopped_since: dict = {}  # label -> when it was first seen stopped

    def add(self, label: str, task: str, proc) -> None:
        self.procs[label] = (task, proc)
        if hasattr(os, "waitid") and hasattr(os, "WNOWAIT"):
            threading.Thread(target=self._wait, args=(label, proc.pid), daemon=True).start()

    def _wait(self, label: str, pid: int) -> None:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        except OSError:  # reaped already (ChildProcessError), or interrupted
            pass
        self.ended_at.setdefault(label, time.monotonic_ns())

    def ended(self) -> list[Ended]:
        """The processes that have ended, the first to end first."""
        out = []
        for label, (task, proc) in self.procs.items():
            code = proc.poll()
            if code is not None:
                at = self.ended_at.setdefault(label, time.monotonic_ns())
                out.append(Ended(label, task, code, at, proc))
        return sorted(out, key=lambda e: e.at)

    def stopped(self) -> list[Stopped]:
        """The running processes in state T or t, the longest stopped first."""
        now, out = time.monotonic_ns(), []
        for label, (task, proc) in self.procs.items():
            if proc.returncode is None and process_state(proc.pid) in ("T", "t"):
                out.append(Stopped(label, task, proc.pid,
                                   self.stopped_since.setdefault(label, now)))
            else:
                self.stopped_since.pop(label, None)
        return sorted(out, key=lambda s: s.since)

    def note(self, killed=()) -> str:
        """For a run past its deadline: " (stopped: worker:1; died: worker:0 killed by
        SIGKILL)", the tasks stopped now and those whose process died, other than the
        ``killed`` processes (a failure the launcher injected); "" if none."""
        stopped = ", ".join(s.task for s in self.stopped())
        died = ", ".join(f"{e.task} {describe_exit(e.code)}" for e in self.ended()
                         if e.code != 0 and not any(e.proc is p for p in killed))
        parts = [f"stopped: {stopped}"] * bool(stopped) + [f"died: {died}"] * bool(died)
        return f" ({'; '.join(parts)})" if parts else ""


def check_failed(watch: ProcessWatch, schedule, procs: dict, clients, tmp: Path,
                 survivable=()) -> None:
    """Raise UnavailableError naming the task whose process failed first: a client, or a
    server (a ps) whose process ended with a code other than 0 and that the schedule did
    not kill; a client the schedule killed and does not restart fails too. The death of a
    ``survivable`` server (ParameterServerStrategy's worker, whose functions the
    coordinator runs on another) is not a failure."""
    failed = [e for e in watch.ended() if e.code != 0 and e.task not in survivable and (
        not any(e.proc is p for p in schedule.killed)
        or (e.task in clients and procs[e.task] is e.proc and not schedule.down(e.task)))]
    if not failed:
        return
    first, later = failed[0], failed[1:]
    after = "" if not later else " (after it: " + ", ".join(
        f"{e.task} exited with code {e.code}" for e in later) + ")"
    raise UnavailableError(
        f"task {first.task} exited with code {first.code} ({describe_exit(first.code)}), "
        f"the first task to fail{after}; the cluster is stopped. End of its log:\n"
        f"{log_tail(tmp / (first.label + '.log'))}")


def check_stopped(watch: ProcessWatch, tmp: Path) -> None:
    """Raise UnavailableError naming a task whose process has been stopped (SIGSTOP) for
    ``STOPPED_S``: its peers wait for it, and it never ends by itself."""
    stopped = watch.stopped()
    if stopped and time.monotonic_ns() - stopped[0].since >= STOPPED_S * 1e9:
        s = stopped[0]
        raise UnavailableError(
            f"task {s.task} is stopped (its process {s.pid} is in state T, as after SIGSTOP) "
            f"for {STOPPED_S:g} s; the tasks that wait for it cannot go on: the cluster is "
            f"stopped. End of its log:\n{log_tail(tmp / (s.label + '.log'))}")
