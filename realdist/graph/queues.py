"""Real TF1 queues: the facts simdist's queues must match, and PaddingFIFOQueue's batches.

``queue_facts()`` records, from real TensorFlow in one fresh process
(``realdist.graph.queue_probe``), what ``tf.compat.v1``'s FIFOQueue, PaddingFIFOQueue,
RandomShuffleQueue and PriorityQueue do: the ops each method adds (default name and
``name="q"``), the static shapes it returns, the values some of them hand out, and every
way they fail, as the error's class, code, node, kernel ``message``, the ``first_line``
after TF's "Graph execution error:" and the whole ``e.message`` and ``str(e)`` (stack
frames shortened: TF's to paths inside site-packages, the probe's own without line
numbers). ``tests/data/tf_queue_facts.json`` holds them (``realdist queues facts --write``);
a realtf test regenerates them and compares.

Things the facts show that are easy to miss: a queue without a ``shared_name`` appears in
messages as ``_N_<op name>`` (N counts the process's anonymous resources); a
PaddingFIFOQueue's single dequeue calls itself "FIFOQueue" but its dequeue_many
"PaddingFIFOQueue"; shared-queue messages name dtypes as TF's C++ does ("float"); a
timed-out run's error names no node; ``close()`` waits behind pending enqueues while
``close(cancel_pending_enqueues=True)`` cancels them, and a second ``close()`` is a
CancelledError ("... is already closed."); a timed-out
dequeue_many loses what it had taken from a FIFOQueue (not from a PriorityQueue); a
PriorityQueue's dequeue_up_to on a closed queue fails even with elements left (and drops
them); a QueueRunner treats only OutOfRangeError as "closed" unless told otherwise.

``padded_batch(shapes, values)`` is what ``PaddingFIFOQueue.dequeue_many`` returns for those
elements on real TF: the lesson's "predict the padded shape" exercise checks against it.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import numpy as np

from simdist.base import errors
from simdist.base.files import write_atomic

from realdist.graph import queue_probe
from realdist.graph import queue_probe_values
from realdist.runtime.localcluster import run_local

FACTS_PATH = Path(__file__).resolve().parents[2] / "tests" / "data" / "tf_queue_facts.json"
PREFIX = "Graph execution error:\n\n"
FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def _probe(call: str, timeout: float) -> dict:
    code = "\n".join(inspect.getsource(m) for m in (queue_probe, queue_probe_values))
    return run_local(code + f"\nemit('out', {call})\n", timeout)["out"]


def queue_facts(timeout: float = 180) -> dict:
    """The facts, recorded now from real TF (about 20 s)."""
    return _normalise(_probe("probe()", timeout))


def _normalise(facts):
    """Every raw error (see ``queue_probe.error``) replaced by ``error_record``'s."""
    if isinstance(facts, dict):
        if "e.message" in facts and "class" in facts:
            return error_record(facts)
        return {key: _normalise(value) for key, value in facts.items()}
    if isinstance(facts, list):
        return [_normalise(value) for value in facts]
    return facts


def error_record(raw: dict) -> dict:
    """class, code, node, the kernel's ``message`` (without TF's "Graph execution error:",
    "Detected at node ..." and "[[{{node ...}}]]" wrapping), its ``first_line``, and the
    whole ``e.message`` and ``str(e)`` with their stack frames shortened (``_short_paths``)."""
    text = raw["e.message"] if raw["e.message"] is not None else raw["str"]
    body = text.removeprefix(PREFIX)
    message = body.split(f"\nNode: '{raw['node']}'\n", 1)[-1] if raw["node"] else body
    message = message.split("\n\t [[", 1)[0]
    record = {"class": raw["class"], "code": raw["code"], "node": raw["node"],
              "message": _short_paths(message), "first_line": body.split("\n", 1)[0],
              "graph_execution_error": text.startswith(PREFIX)}
    if raw["e.message"] is not None:
        record["e.message"] = _short_paths(raw["e.message"])
        record["str"] = _short_paths(raw["str"])
    return record


def _short_paths(text: str) -> str:
    """Frames in TF: the path after site-packages/; frames of the probe ("<string>"): no
    line number (it is realdist's, not TF's)."""
    return FRAME.sub(lambda m: 'File "<string>", line ?' if m[1] == "<string>" else
                     f'File "{m[1].split("site-packages/")[-1]}", line {m[2]}', text)


def load_facts(path=FACTS_PATH) -> dict:
    path = Path(path)
    if not path.is_file():
        raise errors.NotFoundError(f"no queue fact sheet at {path} (it ships with a checkout "
                                   "of DistLab, in tests/data/)")
    return json.loads(path.read_text())


def write_facts(facts: dict, path=FACTS_PATH) -> Path:
    return write_atomic(path, json.dumps(facts, indent=1, sort_keys=True) + "\n")


def differences(old, new, where: str = "") -> list[str]:
    """Where two fact sheets differ, as "path: old -> new" lines."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [line for key in sorted(set(old) | set(new), key=str)
                for line in differences(old.get(key), new.get(key), f"{where}/{key}")]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [line for i, (a, b) in enumerate(zip(old, new))
                for line in differences(a, b, f"{where}[{i}]")]
    return [] if old == new else [f"{where or '/'}: {old!r} -> {new!r}"]


# -- PaddingFIFOQueue's batches ----------------------------------------------------------------


def padded_batch(shapes, values, dtypes=None, timeout: float = 120):
    """What real TF's ``PaddingFIFOQueue(shapes=shapes).dequeue_many(len(values))`` gives
    after enqueueing ``values``: one numpy array per component (the array itself for one
    component). ``shapes``: each component's shape, None for a dimension padded to the
    batch's longest; ``values``: one element each, a tuple of components where there are
    several; ``dtypes``: TF dtype names (default: int32, float32, string or bool from the
    first element)."""
    shapes = [None if s is None else [None if d is None else int(d) for d in s]
              for s in shapes]
    elements = [tuple(v) if len(shapes) > 1 else (v,) for v in values]
    if not elements or any(len(e) != len(shapes) for e in elements):
        raise errors.InvalidArgumentError(
            f"padded_batch: {len(shapes)} component shape(s) {shapes} but the elements "
            f"{values!r}: expected at least one element of {len(shapes)} component(s)")
    dtypes = list(dtypes) if dtypes is not None else [_dtype(c) for c in elements[0]]
    elements = [[_plain(c) for c in e] for e in elements]
    out = _probe(f"attempt(lambda: padded({shapes!r}, {dtypes!r}, {elements!r}))", timeout)
    if "error" in out:
        record = error_record(out["error"])
        cls = getattr(errors, record["class"], errors.InvalidArgumentError)
        raise cls(f"padded_batch: real TF says {record['class']}: {record['message']}")
    arrays = [np.array(v, dtype=str if d == "string" else d)
              for v, d in zip(out["value"]["values"], dtypes)]
    return arrays[0] if len(arrays) == 1 else arrays


def _dtype(value) -> str:
    kind = np.asarray(value).dtype.kind
    return {"i": "int32", "u": "int32", "f": "float32", "b": "bool"}.get(kind, "string")


def _plain(value):
    return np.asarray(value).tolist()

