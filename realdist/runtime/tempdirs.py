"""Temporary folders of real runs that a killed launcher cannot leave behind.

Every folder a real run makes in the system's temporary directory (a multi-worker job's, a
local cluster's, a TF program's (``run_python``), the parameter-server runs' checkpoints,
``BackupAndRestore``'s backups) is named after the process that made it,
``PREFIX<pid>-<random>``, and removed when that process is done with it. A process killed
with SIGKILL never gets there: the next run removes every such folder whose process is gone
(``sweep``), before it makes its own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

#: the prefixes of realdist's temporary folders
PREFIXES = ("realdist-mwms-", "realdist-cluster-", "realdist-checkpoints-", "realdist-backup-",
            "realdist-program-")


def owned_tempdir(prefix: str) -> tempfile.TemporaryDirectory:
    """``tempfile.TemporaryDirectory`` named ``prefix<this pid>-...``, after ``sweep()``."""
    if prefix not in PREFIXES:
        raise ValueError(f"temporary folder prefix {prefix!r}: expected one of {PREFIXES}")
    sweep()
    return tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-")


def sweep() -> list[Path]:
    """Remove the temporary folders of realdist processes that died without their cleanup;
    returns them."""
    removed = []
    for prefix in PREFIXES:
        for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
            pid = folder.name[len(prefix):].split("-")[0]
            if pid.isdigit() and not alive(int(pid)):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (someone else's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
