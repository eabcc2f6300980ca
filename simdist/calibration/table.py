"""A user's own table of measured step or epoch times, for ``simdist calibrate --from-csv``.

One row per run, CSV with a header. Configuration columns (all but ``model`` optional):
``strategy`` (default mirrored), ``workers`` (1), ``replicas`` or ``devices`` (1),
``model``, ``dataset`` (the model's usual one), ``hidden`` (32), ``global_batch`` (64).
The time, in one of: ``step_ms``, ``step_s``, or ``epoch_s`` with ``examples`` (an epoch is
ceil(examples / global_batch) steps). An optional ``split`` column says which rows the fit
uses (``fit``, the default) and which it only predicts (``check``), to see its error on rows
it never saw; a row with no time is predicted only.

    strategy,replicas,model,global_batch,step_ms,split
    mirrored,1,mlp,256,3.1,fit
    mirrored,4,mlp,1024,6.4,check

A row of a real network (a zoo model such as ``resnet50``, a model file, or ``params`` and
``flops`` columns) on a ``hardware`` profile is a published table's row instead, simulated
as a ``data_parallel`` run and fitted to that hardware's costs (``gpu_table``, ``gpu_fit``);
a table holds rows of one sort or the other.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import NamedTuple

from simdist.calibration.fit import Measurement
from simdist.calibration.gpu_table import GPU_COLUMNS, GPU_TIMES, GpuRow, gpu_row, is_gpu_row
from simdist.base.errors import InvalidArgumentError, brief
from simdist.training.exercises import Exercise
from simdist.training.models import MODELS
from simdist.base.files import read_text

DEFAULT_DATASET = {"linear": "regression", "softmax": "digits", "mlp": "digits",
                   "embedding": "vocab"}
TIME_COLUMNS = ("step_ms", "step_s", "epoch_s", *GPU_TIMES)
KNOWN = {"strategy", "workers", "replicas", "devices", "model", "dataset", "hidden",
         "global_batch", "examples", "split", *TIME_COLUMNS, *GPU_COLUMNS}


class Row(NamedTuple):
    """One row: its line number, exercise, measured step time (ns or None), split, and how
    many steps its time covers (1 for a step time, an epoch's steps for an epoch time)."""

    line: int
    exercise: Exercise
    step_ns: float | None
    split: str
    steps: int

    @property
    def measurement(self) -> Measurement:
        return Measurement(self.exercise, self.step_ns)


def read_table(path) -> list[Row] | list[GpuRow]:
    """The rows of a user's table, each checked, with errors naming the line and value:
    ``Row``s of toy exercises, or ``GpuRow``s of a published table."""
    path = Path(path)
    lines = read_text(path, "table").splitlines()
    reader = csv.reader(lines)
    first = next(reader, None)
    if not first:
        raise InvalidArgumentError(f"{path}: empty table: expected a header line with model "
                                   f"and one of {', '.join(TIME_COLUMNS)}")
    header = [name.strip() for name in first]
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise InvalidArgumentError(f"{path}: column(s) {', '.join(map(repr, twice))} given "
                                   "more than once in the header: expected each column once")
    unknown = [name for name in header if name not in KNOWN]
    if unknown:
        raise InvalidArgumentError(f"{path}: unknown column(s) {', '.join(map(repr, unknown))}:"
                                   f" expected some of {', '.join(sorted(KNOWN))}")
    times = [c for c in TIME_COLUMNS if c in header]
    numbers = "params" in header and "flops" in header
    if not ("model" in header or numbers) or len(times) != 1:
        raise InvalidArgumentError(f"{path}: needs a model column and exactly one time column "
                                   f"of {', '.join(TIME_COLUMNS)}; has {', '.join(header)}")
    if times[0] in ("epoch_s", "run_s") and "examples" not in header:
        raise InvalidArgumentError(f"{path}: {times[0]} needs an examples column (the examples "
                                   "of an epoch)")
    rows, kinds = [], {}
    for values in reader:
        if not any(v.strip() for v in values):
            continue  # a blank line
        if len(values) != len(header):
            raise InvalidArgumentError(
                f"{path}, line {reader.line_num}: {len(values)} value(s) for the {len(header)} "
                f"columns of the header ({', '.join(header)}): expected one value per column "
                "(an empty one for none)")
        raw = {k: v.strip() for k, v in zip(header, values)}
        where = f"{path}, line {reader.line_num}"
        if is_gpu_row(raw, MODELS):
            rows.append(gpu_row(where, reader.line_num, raw, times[0], path.parent, kinds,
                                _integer(where, raw)))
        else:
            rows.append(_row(path, reader.line_num, raw, times[0]))
    if not rows:
        raise InvalidArgumentError(f"{path}: the table has a header but no rows")
    sorts = [isinstance(r, GpuRow) for r in rows]
    if any(sorts) and not all(sorts):
        gpu, toy = rows[sorts.index(True)], rows[sorts.index(False)]
        raise InvalidArgumentError(
            f"{path}: line {gpu.line} is a real network's row ({gpu.model.name}) and line "
            f"{toy.line} a toy exercise's ({toy.exercise.model}): expected rows of one sort "
            "(the toy ones fit this machine's CPU, the others their hardware column's "
            "profile)")
    return rows


def underdetermined(path, rows: list[Row]) -> str | None:
    """A line of warning when the rows a fit uses set fewer different exercises than
    there are costs they depend on (``fit.free_parameters``): many profiles then fit them
    equally well, and the fit picks one. None when there are enough."""
    from simdist.calibration.fit import RECORD_FIELDS, free_parameters

    used = [r for r in rows if r.split == "fit" and r.step_ns is not None]
    kinds = {tuple(getattr(r.exercise, f) for f in RECORD_FIELDS) for r in used}
    free = free_parameters([r.measurement for r in used])
    if len(kinds) >= len(free):
        return None
    return (f"{path}: {len(used)} row(s) to fit, {len(kinds)} different exercise(s), for "
            f"{len(free)} costs they depend on: the fit is underdetermined (many profiles "
            "match these rows; it keeps one), so its predictions of other exercises mean "
            f"little: measure at least {len(free)} different exercises (strategies, "
            "replicas, workers, batches)")


def _integer(where: str, raw: dict):
    """A reader of the row's whole-number columns: ``integer(name, default)``."""

    def integer(name, default):
        text = raw.get(name, "")
        if text == "":
            return default
        try:
            value = int(text)
        except ValueError:
            raise InvalidArgumentError(f"{where}: {name} {brief(text)}: expected a whole "
                                       "number") from None
        if value < 1:
            raise InvalidArgumentError(f"{where}: {name} {value}: expected a number >= 1")
        return value

    return integer


def _row(path, line: int, raw: dict, time_column: str) -> Row:
    where = f"{path}, line {line}"
    integer = _integer(where, raw)
    given = [name for name in GPU_COLUMNS if raw.get(name)]
    if given or time_column in GPU_TIMES:
        what = f"column {given[0]}" if given else f"time column {time_column}"
        raise InvalidArgumentError(f"{where}: {what} with the toy model "
                                   f"{brief(raw.get('model'))}: it belongs to rows of a real "
                                   "network (a zoo model, a model file, or params and flops)")
    model = raw.get("model", "")
    replicas = integer("replicas", None) or integer("devices", 1)
    try:
        exercise = Exercise(strategy=raw.get("strategy") or "mirrored", model=model,
                            dataset=raw.get("dataset") or DEFAULT_DATASET.get(model, "digits"),
                            workers=integer("workers", 1), devices_per_worker=replicas,
                            hidden=integer("hidden", 32),
                            global_batch=integer("global_batch", 64), steps=3)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"{where}: {error}") from None
    split = raw.get("split") or "fit"
    if split not in ("fit", "check"):
        raise InvalidArgumentError(f"{where}: split {brief(split)}: expected fit or check")
    steps = 1
    if time_column == "epoch_s":
        steps = math.ceil(integer("examples", None) / exercise.global_batch)
    text = raw.get(time_column, "")
    if text == "":
        return Row(line, exercise, None, split, steps)
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise InvalidArgumentError(f"{where}: {time_column} {brief(text)}: expected a time > 0")
    scale = {"step_ms": 1e6, "step_s": 1e9, "epoch_s": 1e9}[time_column]
    return Row(line, exercise, value * scale / steps, split, steps)
