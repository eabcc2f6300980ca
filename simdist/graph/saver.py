"""Models tf.compat.v1.train.Saver and its checkpoint files: save, restore, latest_checkpoint.

As TF's sharded Saver (the one ``MonitoredTrainingSession`` makes) does, a ``SaveV2`` op
runs on each task that holds variables and writes that task's variables; a ``RestoreV2``
op on each task reads them back and assigns them. Each takes the time to move its bytes at
``DISK_BYTES_PER_S`` (a local SSD) on top of the run.

Files: ``save(sess, "dir/model.ckpt", global_step=10)`` returns ``"dir/model.ckpt-10"`` as
TF does and keeps TF's ``checkpoint`` state file (``model_checkpoint_path`` and
``all_model_checkpoint_paths``), so ``latest_checkpoint(dir)`` and ``max_to_keep`` behave
as TF's. Differs from TF on purpose: the values are one NumPy ``PREFIX.npz`` file, not TF's
``.index`` / ``.data-*`` / ``.meta`` files (simdist has no string tensors to name them in
the graph, so the kernels find the file through their Saver).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from simdist.base.errors import InvalidArgumentError, NotFoundError
from simdist.graph.control_flow_ops import group
from simdist.graph.graph import create_op, get_default_graph
from simdist.graph.registry import NOT_DIFFERENTIABLE, no_flops, register
from simdist.graph.variables import assign, global_variables

#: the speed of the disk checkpoints go to (a local SSD), bytes per second
DISK_BYTES_PER_S = 500e6
STATE_FILE = "checkpoint"


class Saver:
    """tf.compat.v1.train.Saver(var_list=None, max_to_keep=5, sharded=True): ``save`` and
    ``restore`` sessions' variables (``sharded`` is accepted; simdist always shards by
    task, as TF's sharded saver does)."""

    def __init__(self, var_list=None, max_to_keep=5, sharded=True, name="save"):
        variables = list(var_list) if var_list is not None else global_variables()
        if not variables:
            raise ValueError("No variables to save")
        if isinstance(max_to_keep, bool) or not isinstance(max_to_keep, int) or max_to_keep < 0:
            raise InvalidArgumentError(f"Saver: max_to_keep={max_to_keep!r}, expected an "
                                       "int >= 0 (0 or None: keep every checkpoint)")
        self._variables, self.max_to_keep = variables, max_to_keep
        self._names = [v.op.name for v in variables]
        self._to_write: dict = {}  # what the SaveV2 kernels of a run hand over
        self._to_read: dict = {}  # what the RestoreV2 kernels of a run take
        graph = get_default_graph()
        by_task: dict = {}
        for v in variables:
            by_task.setdefault(v.device, []).append(v)
        saves, assigns = [], []
        with graph.name_scope(name):
            for k, (device, group_vars) in enumerate(sorted(by_task.items())):
                with graph.device(device):
                    saves.append(create_op(
                        "SaveV2", [v._as_tensor() for v in group_vars], [],
                        {"saver": self, "names": [v.op.name for v in group_vars]},
                        "SaveV2" if k == 0 else f"SaveV2_{k}"))
                    restored = create_op(
                        "RestoreV2", [],
                        [(v.dtype, v.shape) for v in group_vars],
                        {"saver": self, "names": [v.op.name for v in group_vars]},
                        "RestoreV2" if k == 0 else f"RestoreV2_{k}").outputs
                    assigns += [assign(v, value).op for v, value in zip(group_vars, restored)]
            self.save_op = group(*saves, name="control_dependency")
            self.restore_op = group(*assigns, name="restore_all")

    def save(self, sess, save_path, global_step=None, write_state=True) -> str:
        """Write every variable to ``save_path`` (``-STEP`` appended with ``global_step``, a
        number or the global step variable); returns the checkpoint's prefix."""
        if global_step is not None and not isinstance(global_step, (int, np.integer)):
            global_step = int(sess.run(global_step))
        prefix = str(save_path) + (f"-{int(global_step)}" if global_step is not None else "")
        folder = Path(prefix).parent
        if not folder.is_dir():
            raise NotFoundError(f"Parent directory of {prefix} doesn't exist, can't save.")
        self._to_write = {}
        sess.run(self.save_op)
        np.savez(prefix + ".npz", **self._to_write)
        self._to_write = {}
        if write_state:
            self._update_state(folder, prefix)
        return prefix

    def restore(self, sess, save_path):
        """Assign every variable the value it had in the checkpoint ``save_path``."""
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        path = Path(str(save_path) + ".npz")
        if not path.is_file():
            raise ValueError(f"The passed save_path is not a valid checkpoint: {save_path}")
        with np.load(path) as data:
            self._to_read = {name: data[name] for name in data.files}
        missing = [n for n in self._names if n not in self._to_read]
        if missing:
            raise NotFoundError(f"Key {missing[0]} not found in checkpoint {save_path}")
        try:
            sess.run(self.restore_op)
        finally:
            self._to_read = {}

    def _update_state(self, folder: Path, prefix: str):
        state = get_checkpoint_state(folder)
        paths = [p for p in (state["all_model_checkpoint_paths"] if state else []) if p != prefix]
        paths.append(prefix)
        if self.max_to_keep:
            for old in paths[:-self.max_to_keep]:
                Path(old + ".npz").unlink(missing_ok=True)
            paths = paths[-self.max_to_keep:]
        text = f'model_checkpoint_path: "{prefix}"\n' + "".join(
            f'all_model_checkpoint_paths: "{p}"\n' for p in paths)
        tmp = folder / (STATE_FILE + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, folder / STATE_FILE)


def get_checkpoint_state(checkpoint_dir) -> dict | None:
    """The ``checkpoint`` state file of ``checkpoint_dir`` as a dict, or None without one."""
    path = Path(checkpoint_dir) / STATE_FILE
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    latest = re.search(r'^model_checkpoint_path: "(.*)"$', text, re.M)
    return {"model_checkpoint_path": latest.group(1) if latest else None,
            "all_model_checkpoint_paths": re.findall(r'^all_model_checkpoint_paths: "(.*)"$',
                                                     text, re.M)}


def latest_checkpoint(checkpoint_dir) -> str | None:
    """tf.train.latest_checkpoint: the prefix of the newest checkpoint, or None."""
    state = get_checkpoint_state(checkpoint_dir)
    if not state or not state["model_checkpoint_path"]:
        return None
    prefix = state["model_checkpoint_path"]
    return prefix if Path(prefix + ".npz").is_file() else None


def _disk_time(nbytes: int) -> int:
    return int(nbytes / DISK_BYTES_PER_S * 1e9)


def _save_kernel(op, args, rt):
    saver = op.attrs["saver"]
    for name, value in zip(op.attrs["names"], args):
        saver._to_write[name] = np.array(value)
    yield rt.env.timeout(_disk_time(sum(int(np.asarray(a).nbytes) for a in args)))
    return []


def _restore_kernel(op, args, rt):
    saver = op.attrs["saver"]
    values = [saver._to_read[name] for name in op.attrs["names"]]
    yield rt.env.timeout(_disk_time(sum(int(v.nbytes) for v in values)))
    return [v.astype(t.dtype.as_numpy_dtype) for v, t in zip(values, op.outputs)]


for _type, _kernel in (("SaveV2", _save_kernel), ("RestoreV2", _restore_kernel)):
    register(_type, _kernel, flops=no_flops, gpu=lambda op: False, grad=NOT_DIFFERENTIABLE,
             stateful=True)
del _type, _kernel
