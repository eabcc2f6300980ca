"""Rows of a published GPU table for ``simdist calibrate --from-csv``: a real network (a zoo
model, a model file, or ``params`` and ``flops`` columns) on a named hardware profile, each
row simulated as a ``data_parallel`` run (``gpu_fit``), as tf_cnn_benchmarks' or Horovod's
tables of images/s on 1, 4, 8... GPUs report them.

Columns besides ``table.py``'s: ``hardware`` (a system of the built-in catalog, a device that
one system holds, or a profiles file ``FILE`` or ``FILE:SYSTEM``; relative paths from the
table's folder), ``params`` and ``flops`` (forward FLOPs of one example) for a model given by
numbers, ``input_bytes`` (one example's input; default the model's), ``batch`` (examples per
GPU; or ``global_batch``, over all GPUs; default 32 per GPU), ``epochs`` (default 1). A row
runs ``workers`` machines (default 1) of ``devices`` GPUs each (default 1), one
data-parallel task per GPU. Its time, in one of: ``step_ms`` or ``step_s`` (a steady step),
``examples_per_s`` (all GPUs together, steady), ``epoch_s`` (a run's time over its
``epochs``, so its fixed cost counts once, spread over them) or ``run_s`` (the whole run of
``epochs`` epochs); an epoch is ceil(``examples`` / global batch) steps.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

from simdist.base.errors import InvalidArgumentError, SimdistError, brief
from simdist.hardware.devices import HardwareCatalog, read_profile_file

#: columns only a GPU row takes
GPU_COLUMNS = ("hardware", "params", "flops", "input_bytes", "batch", "epochs")
#: time columns only a GPU row takes
GPU_TIMES = ("run_s", "examples_per_s")
PROFILE_SUFFIXES = (".json", ".yaml", ".yml")
DEFAULT_BATCH = 32  # data_parallel's --batch
#: the strategies a GPU row may name: data_parallel's ring all-reduce is what they run
STRATEGIES = ("mirrored", "multi_worker_mirrored")


class Kind(NamedTuple):
    """A hardware kind of the table: its name as the table gives it, the catalog holding it
    (the built-ins, or with a user's profiles file) and the system it starts the fit from."""

    name: str
    catalog: HardwareCatalog
    system: str


class GpuRow(NamedTuple):
    """One row of a published table: ``machines`` x ``gpus`` data-parallel tasks of ``batch``
    examples each; its measured time (ns, or None) covers ``steps`` steps plus ``runs`` times
    the run's fixed cost (0 for a steady step time, 1 for a run, 1/epochs for an epoch)."""

    line: int
    kind: Kind
    model: object  # simdist.models.Model
    machines: int
    gpus: int
    batch: int
    input_bytes: int
    steps: int
    runs: float
    measured_ns: float | None
    split: str

    @property
    def tasks(self) -> int:
        return self.machines * self.gpus

    @property
    def config(self) -> tuple:
        """What sets the simulated step time (rows sharing it share one simulation)."""
        m = self.model
        return (self.kind.name, m.name, m.params, m.forward_flops, self.machines, self.gpus,
                self.batch, self.input_bytes)

    @property
    def label(self) -> str:
        return (f"line {self.line}: {self.model.name} {self.machines}x{self.gpus} "
                f"{self.kind.name} batch {self.batch}")


def is_gpu_row(raw: dict, toy_models) -> bool:
    """Whether a row is a published-table row: a model that is no toy model, or numbers (a
    toy model's row refuses the published table's columns)."""
    return (raw.get("model", "") not in toy_models or bool(raw.get("params"))
            or bool(raw.get("flops")))


def gpu_row(where: str, line: int, raw: dict, time_column: str, folder: Path,
            kinds: dict, integer) -> GpuRow:
    """The row ``raw`` (column -> text) of a published table; ``kinds`` caches the hardware
    kinds by name, ``integer(name, default)`` reads a whole number >= 1."""
    for name in ("dataset", "hidden"):
        if raw.get(name):
            raise InvalidArgumentError(f"{where}: {name} {brief(raw[name])} with model "
                                       f"{brief(raw.get('model', ''))}: {name} belongs to the "
                                       "toy models (linear, softmax, mlp, embedding)")
    strategy = raw.get("strategy") or STRATEGIES[0]
    if strategy not in STRATEGIES:
        raise InvalidArgumentError(f"{where}: strategy {brief(strategy)} with a zoo model: "
                                   f"expected {' or '.join(STRATEGIES)} (simulated as "
                                   "data_parallel's ring all-reduce)")
    model = _model(where, raw, folder)
    hardware = raw.get("hardware", "")
    if not hardware:
        raise InvalidArgumentError(f"{where}: model {model.name} needs a hardware column: "
                                   f"expected one of {', '.join(_systems())} or a profiles "
                                   "file")
    if hardware not in kinds:
        kinds[hardware] = _kind(where, hardware, folder)
    machines = integer("workers", 1)
    gpus = integer("replicas", None) or integer("devices", 1)
    batch = _batch(where, raw, machines * gpus, integer)
    input_bytes = _size(where, raw, "input_bytes", model.input_bytes)
    epochs = integer("epochs", 1)
    split = raw.get("split") or "fit"
    if split not in ("fit", "check"):
        raise InvalidArgumentError(f"{where}: split {brief(split)}: expected fit or check")
    steps, runs = 1, 0.0
    if time_column in ("epoch_s", "run_s"):
        per_epoch = math.ceil(integer("examples", None) / (batch * machines * gpus))
        steps, runs = ((per_epoch, 1 / epochs) if time_column == "epoch_s" else
                       (per_epoch * epochs, 1.0))
    value = _time(where, raw.get(time_column, ""), time_column)
    measured = None
    if value is not None:
        measured = (batch * machines * gpus / value * 1e9 if time_column == "examples_per_s"
                    else value * (1e6 if time_column == "step_ms" else 1e9))
    return GpuRow(line, kinds[hardware], model, machines, gpus, batch, input_bytes, steps,
                  runs, measured, split)


def _model(where: str, raw: dict, folder: Path):
    from simdist.models import model_named
    from simdist.models.catalog import CATALOG
    from simdist.models.loader import SUFFIXES, model_from_dict

    name = raw.get("model", "")
    numbers = {k: raw[k] for k in ("params", "flops") if raw.get(k)}
    if numbers:
        if len(numbers) < 2:
            raise InvalidArgumentError(f"{where}: {' and '.join(numbers)} without "
                                       f"{'flops' if 'params' in numbers else 'params'}: a "
                                       "model by numbers needs both (flops: forward FLOPs "
                                       "of one example)")
        return model_from_dict({"name": name or "model", **numbers}, where=where)
    if Path(name).suffix.lower() in SUFFIXES and not Path(name).is_absolute():
        name = str(folder / name)
    try:
        return model_named(name)
    except SimdistError as error:  # not in the zoo, or a model file's own error
        if Path(name).suffix.lower() in SUFFIXES:
            raise InvalidArgumentError(f"{where}: {error}") from None
        raise InvalidArgumentError(
            f"{where}: unknown model {brief(name)}: expected a toy model (linear, softmax, "
            f"mlp, embedding), a zoo model ({', '.join(CATALOG)}, transformer_lm), a .json "
            "or .toml model file, or params and flops columns") from None


def _systems() -> list[str]:
    return sorted(HardwareCatalog.default().systems)


def _kind(where: str, value: str, folder: Path) -> Kind:
    """The hardware kind ``value`` names: a built-in system, a device one system holds, or a
    profiles file (``FILE``: its only system; ``FILE:SYSTEM``)."""
    catalog = HardwareCatalog.default()
    if value in catalog.systems:
        return Kind(value, catalog, value)
    holding = [s.name for s in catalog.systems.values() if s.device == value]
    if len(holding) == 1:  # the system's kind, by its name: one fit with its other rows
        return Kind(holding[0], catalog, holding[0])
    file, _, system = value.partition(":")
    if Path(file).suffix.lower() not in PROFILE_SUFFIXES:
        raise InvalidArgumentError(
            f"{where}: unknown hardware {brief(value)}: expected one of "
            f"{', '.join(_systems())}, or a profiles file (.json or .yaml: FILE or "
            "FILE:SYSTEM)")
    path = Path(file) if Path(file).is_absolute() else folder / file
    try:
        catalog = HardwareCatalog.from_file(path)
        own = sorted(read_profile_file(path).get("systems") or {})
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"{where}: hardware {brief(value)}: {error}") from None
    if not system:
        if len(own) != 1:
            raise InvalidArgumentError(
                f"{where}: hardware {brief(value)}: the file defines "
                f"{len(own)} systems ({', '.join(own) or 'none'}): expected FILE:SYSTEM "
                "naming one, or a file of one system")
        system = own[0]
    if system not in catalog.systems:
        raise InvalidArgumentError(f"{where}: hardware {brief(value)}: no system "
                                   f"{brief(system)}: expected one of "
                                   f"{', '.join(sorted(catalog.systems))}")
    return Kind(value, catalog, system)


def _batch(where: str, raw: dict, gpus: int, integer) -> int:
    if raw.get("batch") and raw.get("global_batch"):
        raise InvalidArgumentError(f"{where}: batch and global_batch both given: expected "
                                   "one (batch: per GPU; global_batch: over all GPUs)")
    if raw.get("global_batch"):
        total = integer("global_batch", None)
        if total % gpus:
            raise InvalidArgumentError(f"{where}: global_batch {total} over {gpus} GPUs: "
                                       "expected a multiple of the GPUs (or a batch column, "
                                       "per GPU)")
        return total // gpus
    return integer("batch", DEFAULT_BATCH)


def _size(where: str, raw: dict, name: str, default: int) -> int:
    from simdist.hardware.units import parse_size

    text = raw.get(name, "")
    if text == "":
        return default
    if text == "0":
        return 0
    try:
        return parse_size(text)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"{where}: {name}: {error}") from None


def _time(where: str, text: str, column: str) -> float | None:
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        what = "a rate > 0" if column == "examples_per_s" else "a time > 0"
        raise InvalidArgumentError(f"{where}: {column} {brief(text)}: expected {what}")
    return value
