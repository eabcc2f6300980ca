"""The one import line a DistLab script needs: ``from distlab import tf``.

A TF1 script written the way TF1's guides write it (``ClusterSpec``, ``Server``,
``replica_device_setter``, ``MonitoredTrainingSession``...) runs unchanged in both halves:
``simdist tf1 SCRIPT`` gives it ``simdist.graph`` (the simulator) and ``realdist tf1 SCRIPT``
gives it ``tensorflow.compat.v1`` in graph mode. The launchers say which through
``DISTLAB_HALF`` ("sim", the default, or "real"). ``report(key, value)`` records a result
(a number, a list, a dict of them) that both launchers collect per task, so that the two
halves can be set side by side.
"""

from __future__ import annotations

import json
import os

#: the line prefix a real task's results are printed with (realdist's ``processes.MARK``)
MARK = "@@DISTLAB "
#: where simdist's launcher collects results ({task: {key: value}}), set by the launcher
RESULTS: dict | None = None
#: the task whose client runs now ("job:index"), set by simdist's launcher
CURRENT_TASK: str | None = None


def half() -> str:
    """Which half runs this script: "sim" or "real"."""
    value = os.environ.get("DISTLAB_HALF", "sim")
    if value not in ("sim", "real"):
        raise ValueError(f"DISTLAB_HALF={value!r}: expected 'sim' or 'real'")
    return value


def __getattr__(name):
    if name != "tf":
        raise AttributeError(f"module 'distlab' has no attribute {name!r}")
    if half() == "real":
        import tensorflow as tensorflow

        tf1 = tensorflow.compat.v1
        tf1.disable_eager_execution()
        return tf1
    import simdist.graph as tf1

    return tf1


def report(key: str, value) -> None:
    """Record one result of this task (its last value per key wins)."""
    if half() == "real":
        print(MARK + json.dumps({key: _plain(value)}), flush=True)
    elif RESULTS is not None and CURRENT_TASK is not None:
        RESULTS.setdefault(CURRENT_TASK, {})[key] = _plain(value)


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value
