"""The child processes DistLab starts die with their launcher (no orphans, by any signal)."""

from __future__ import annotations

import ctypes
import signal
import sys


def die_with_parent() -> None:
    """In a child before exec (``preexec_fn``): SIGKILL when its parent ends (Linux
    ``prctl(PR_SET_PDEATHSIG)``; kept across exec); elsewhere nothing."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
