"""Models tf.compat.v1.train.Saver and its checkpoint files: save, restore, latest_checkpoint.

As TF's sharded Saver (the one ``MonitoredTrainingSession`` makes) does, a ``SaveV2`` op
runs on each task that holds variables and writes that task's variables; a ``RestoreV2``
op on each task reads them back and assigns them. Each takes the time to move its bytes at
``DISK_BYTES_PER_S`` (a local SSD) on top of the run.

Files: ``save(sess, "dir/model.ckpt", global_step=10)`` returns ``"dir/model.ckpt-10"`` as
TF does and keeps TF's ``checkpoint`` state file (``model_checkpoint_path`` and
``all_model_checkpoint_paths``), so ``latest_checkpoint(dir)`` and ``max_to_keep`` behave
as TF's. The checkpoint's prefix is fed to the run as TF's Saver feeds it (``save/Const``, a
string tensor), so each task's ``SaveV2`` writes its own shard
(``PREFIX_temp/part-K-of-N.npz``, as TF's ``PREFIX_temp/part-K-of-N``) wherever it runs, even
on another MPI rank, and the saver merges the shards. Differs from TF on purpose: the values
are one NumPy ``PREFIX.npz`` file, not TF's ``.index`` / ``.data-*`` / ``.meta`` files.

A part of a ``PartitionedVariable`` is saved as TF saves it: as a slice of the whole
variable's key (``SaveV2``'s ``shape_and_slices``, the part's ``save_slice_info`` spec such as
``"10 4 0,4:0,4"``). The merge joins the slices that cover a whole variable into one array
under its name (TF's checkpoint lists ``w`` with its full shape), so a checkpoint restores
into any partitioning of the same variable, or into an unpartitioned one.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from simdist.base.errors import InvalidArgumentError, NotFoundError
from simdist.base.files import write_atomic
from simdist.graph.array_ops import placeholder
from simdist.graph.dtypes import string
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
        self._keys = [_key(v) for v in variables]
        graph = get_default_graph()
        by_task: dict = {}
        for v in variables:
            by_task.setdefault(v.device, []).append(v)
        saves, assigns = [], []
        self._shards = len(by_task)
        with graph.name_scope(name):
            self.filename = placeholder(string, [], name="Const")  # the checkpoint's prefix
            for k, (device, group_vars) in enumerate(sorted(by_task.items())):
                keys = [_key(v) for v in group_vars]
                names = [key.name for key in keys]
                slices = [key.slice for key in keys]
                with graph.device(device):
                    saves.append(create_op(
                        "SaveV2", [self.filename] + [v._as_tensor() for v in group_vars], [],
                        {"names": names, "shape_and_slices": slices, "shard": k,
                         "shards": self._shards},
                        "SaveV2" if k == 0 else f"SaveV2_{k}"))
                    restored = create_op(
                        "RestoreV2", [self.filename],
                        [(v.dtype, v.shape) for v in group_vars],
                        {"names": names, "shape_and_slices": slices},
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
        sess.run(self.save_op, {self.filename: _encode(prefix)})
        _merge_shards(prefix, self._shards)
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
            missing = [key.name for key in self._keys if not _has(key, data.files)]
        if missing:
            raise NotFoundError(f"Key {missing[0]} not found in checkpoint {save_path}")
        sess.run(self.restore_op, {self.filename: _encode(str(save_path))})

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


class _Key(NamedTuple):
    """A variable's entry in a checkpoint: TF's tensor name and its ``shape_and_slices``
    ("" for a whole variable)."""
    name: str
    slice: str


def _key(v) -> _Key:
    info = v._get_save_slice_info()
    return _Key(info.full_name, info.spec) if info is not None else _Key(v.op.name, "")


def _slice_name(key: _Key) -> str:
    """Where a slice that does not join a whole variable is kept in the ``.npz``."""
    return f"{key.name}@{key.slice}"


def _parse_slice(spec: str):
    """``"10 4 4,3:0,4"`` -> the full shape (10, 4) and the index (4:7, 0:4)."""
    *full, ranges = spec.split(" ")
    index = tuple(slice(int(start), int(start) + int(length))
                  for start, length in (r.split(",") for r in ranges.split(":")))
    return tuple(int(d) for d in full), index


def _has(key: _Key, files) -> bool:
    """Whether the checkpoint holds ``key``'s tensor at all: whole, or some slices of it."""
    return key.name in files or any(f.startswith(key.name + "@") for f in files)


def _read(data, key: _Key, where: str) -> np.ndarray:
    """``key``'s value, cut from the whole variable's array when ``key`` is a slice (TF's
    RestoreV2 with a ``shape_and_slices`` spec), with TF's messages when it cannot be."""
    if not _has(key, data.files):
        raise NotFoundError(f"Key {key.name} not found in checkpoint {where}")
    if not key.slice:
        return data[key.name]
    full, index = _parse_slice(key.slice)
    if key.name not in data.files:  # only some slices were saved: this exact one, or none
        if _slice_name(key) not in data.files:
            ranges = key.slice.split(" ")[-1]
            raise InvalidArgumentError(f"Does not have sufficient slices for partitioned "
                                       f"tensor {key.name} to restore in slice_spec: {ranges}")
        return data[_slice_name(key)]
    value = data[key.name]
    if value.shape != full:
        raise InvalidArgumentError(
            f"tensor_name = {key.name}; shape in shape_and_slice spec "
            f"[{','.join(map(str, full))}] does not match the shape stored in checkpoint: "
            f"[{','.join(map(str, value.shape))}]")
    return value[index]


def _join_slices(values: dict) -> dict:
    """The slices of one variable that cover it whole become one array under its name, as
    TF's checkpoint reader assembles them; a partial set stays as slices."""
    slices: dict = {}
    for name in [n for n in values if "@" in n]:
        full_name, spec = name.split("@", 1)
        slices.setdefault(full_name, []).append((spec, values[name]))
    for full_name, parts in slices.items():
        shape, _ = _parse_slice(parts[0][0])
        whole = np.zeros(shape, parts[0][1].dtype)
        covered = np.zeros(shape, bool)
        for spec, value in parts:
            index = _parse_slice(spec)[1]
            whole[index], covered[index] = value, True
        if covered.all():
            for spec, _ in parts:
                del values[f"{full_name}@{spec}"]
            values[full_name] = whole
    return values


def _disk_time(nbytes: int) -> int:
    return int(nbytes / DISK_BYTES_PER_S * 1e9)


def _encode(prefix: str) -> np.ndarray:
    return np.asarray(prefix.encode("utf-8"), np.bytes_)


def _shard_path(prefix: str, shard: int, shards: int) -> Path:
    return Path(f"{prefix}_temp") / f"part-{shard:05d}-of-{shards:05d}.npz"


def _merge_shards(prefix: str, shards: int) -> None:
    """TF's MergeV2Checkpoints: the tasks' shards become the checkpoint ``PREFIX.npz``."""
    values: dict = {}
    paths = [_shard_path(prefix, k, shards) for k in range(shards)]
    for path in paths:
        with np.load(path) as data:
            values.update({name: data[name] for name in data.files})
    buffer = io.BytesIO()
    np.savez(buffer, **_join_slices(values))
    write_atomic(prefix + ".npz", buffer.getvalue())
    for path in paths:
        path.unlink()
    paths[0].parent.rmdir()


def _save_kernel(op, args, rt):
    """SaveV2: this task's variables to its shard of the checkpoint ``args[0]`` names."""
    prefix = bytes(np.asarray(args[0]).item()).decode("utf-8")
    path = _shard_path(prefix, op.attrs["shard"], op.attrs["shards"])
    path.parent.mkdir(exist_ok=True)
    buffer = io.BytesIO()
    keys = map(_Key, op.attrs["names"], op.attrs["shape_and_slices"])
    np.savez(buffer, **{_slice_name(k) if k.slice else k.name: np.array(v)
                        for k, v in zip(keys, args[1:])})
    write_atomic(path, buffer.getvalue())
    yield rt.env.timeout(_disk_time(sum(int(np.asarray(a).nbytes) for a in args[1:])))
    return []


def _restore_kernel(op, args, rt):
    """RestoreV2: this task's variables from the checkpoint ``args[0]`` names."""
    prefix = bytes(np.asarray(args[0]).item()).decode("utf-8")
    with np.load(prefix + ".npz") as data:
        values = [_read(data, key, prefix)
                  for key in map(_Key, op.attrs["names"], op.attrs["shape_and_slices"])]
    yield rt.env.timeout(_disk_time(sum(int(v.nbytes) for v in values)))
    return [v.astype(t.dtype.as_numpy_dtype) for v, t in zip(values, op.outputs)]


for _type, _kernel in (("SaveV2", _save_kernel), ("RestoreV2", _restore_kernel)):
    register(_type, _kernel, flops=no_flops, gpu=lambda op: False, grad=NOT_DIFFERENTIABLE,
             stateful=True)
del _type, _kernel
