"""The child processes real runs start: what they run first, what they emit, how they end.

A TF program runs in a fresh Python (the test or notebook process never initialises
TensorFlow): ``PRELUDE`` imports TensorFlow (``tf``, ``tf1`` in graph mode) and defines
``emit(key, value)``, which prints ``MARK`` and a JSON object on stdout; ``read_outputs``
reads those lines back. ``child_env`` is the environment every such process gets,
``free_ports`` picks loopback ports for TF's servers, ``kill_group`` ends a process and its
group, ``read_back`` reads a child's output file, ``log_tail`` quotes the end of a child's
log in an error. ``TF_ENV_DEFAULTS``: the settings ``realdist.runtime.tfenv`` gives
TensorFlow unless the user did.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

MARK = "@@DISTLAB "
PRELUDE = """
import json, os, sys
import numpy as np
import tensorflow as tf
tf1 = tf.compat.v1
tf1.disable_eager_execution()
def emit(key, value):
    print("@@DISTLAB " + json.dumps({key: value}, default=lambda x: np.asarray(x).tolist()),
          flush=True)
"""


#: what every TF child imports first (``PRELUDE``'s imports): what a launcher or a zygote
#: that forks them imports once
IMPORTS = "import json, os, sys\nimport numpy as np\nimport tensorflow as tf\n"
#: what ``realdist.runtime.tfenv`` sets before importing TensorFlow unless the user did: the
#: C++ runtime's info lines hidden, ``tf.keras`` as ``tf_keras``
TF_ENV_DEFAULTS = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_USE_LEGACY_KERAS": "1"}


def import_env(env: dict) -> dict:
    """The part of a child's environment that TensorFlow reads as it is imported."""
    return {k: env[k] for k in ("TF_CPP_MIN_LOG_LEVEL", "TF_USE_LEGACY_KERAS") if k in env}


def child_env(tmpdir=None) -> dict:
    """This process's environment for a TF child: C++ logs on (placement lines), gRPC failing
    fast, no GPU, and no inherited ``TF_CONFIG``. ``tmpdir``: the child's ``TMPDIR``, a
    folder its launcher removes, so that what the child leaves there (AutoGraph's
    ``__autograph_generated_file*.py``, which a SIGKILLed process never deletes) goes too."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", GRPC_FAIL_FAST="use_caller",
               CUDA_VISIBLE_DEVICES="-1")
    env.pop("TF_CONFIG", None)
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return env


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (bound together, then released for TF)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def read_outputs(path: Path) -> dict:
    """What a task emitted into its stdout file ``path``: each key keeps its last value, and
    a key ending in ``[]`` collects every value in order (``emit("run[]", ...)`` gives
    ``outputs["run"]``), so that a task killed midway leaves what it emitted so far."""
    outputs: dict = {}
    text = path.read_text(errors="replace") if path.exists() else ""
    for line in text.splitlines():
        if line.startswith(MARK):
            for key, value in json.loads(line[len(MARK):]).items():
                if key.endswith("[]"):
                    outputs.setdefault(key[:-2], []).append(value)
                else:
                    outputs[key] = value
    return outputs


def read_back(file) -> str:
    """All that a child wrote into ``file`` (an open binary file, e.g. a TemporaryFile)."""
    file.seek(0)
    return file.read().decode(errors="replace")


def kill_group(proc) -> None:
    """SIGKILL the process's whole group (it leads its own), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def log_tail(path: Path, lines: int = 12) -> str:
    """The last ``lines`` lines of a child's log, indented, for an error message."""
    text = path.read_text(errors="replace").splitlines() if path.exists() else []
    return "\n".join("    " + line for line in text[-lines:]) or "    (empty)"
