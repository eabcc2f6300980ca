"""Hardware of a simulated cluster: device and link profiles, machine layout, cost model.

A *device* (one CPU core, one GPU, one TPU core) runs ops; its time for an op is the roofline
cost model::

    max(flops / (peak_flops x efficiency), nbytes / mem_bandwidth) + launch_overhead_ns

A *link* carries a message of n bytes in ``latency_ns + ceil(n / bandwidth)``. A *system* is a
named machine type: which device every task uses, the link between tasks on one machine and the
network between machines. A ``Layout`` says how many tasks share a machine.

The built-in profiles, each number with its source, are in ``catalog.py``; users add or
override profiles with a JSON or YAML file (``HardwareCatalog.load_file``), whose quantities
``units.py`` reads ("900 GB/s", "16 GiB", "5 us"). Times are integer nanoseconds, rounded up.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

from simdist.hardware.catalog import DEVICES, LINKS, SYSTEMS
from simdist.base.errors import InvalidArgumentError, NotFoundError, OutOfRangeError, brief
from simdist.base.files import read_json, read_yaml
from simdist.hardware.units import exact_quantity

DEVICE_TYPES = ("CPU", "GPU", "TPU")
LINK_KINDS = ("network", "pcie", "nvlink", "shm")
DEFAULT_SYSTEM = "cpu"


class UnknownProfileError(NotFoundError):
    """A device, link or system profile name that the catalog does not have."""


class ProfileFileError(InvalidArgumentError):
    """A user hardware-profile file that cannot be read or has a bad entry."""


# --- validation helpers ----------------------------------------------------------------------

def _check_name(what: str, value) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"{what} must be a non-empty string, got {brief(value)}")


def _check_choice(what: str, value, choices) -> None:
    if value not in choices:
        raise InvalidArgumentError(
            f"{what} {brief(value)} is not valid: expected one of {', '.join(choices)}")


def _check_int(what: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"{what} must be an int, got {brief(value)}")
    if value < minimum:
        raise InvalidArgumentError(f"{what} must be >= {minimum}, got {brief(value)}")


def _check_positive(what: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise InvalidArgumentError(f"{what} must be a number > 0, got {brief(value)}")
    if not math.isfinite(value):
        raise InvalidArgumentError(f"{what} must be finite, got {brief(value)}")


def _check_efficiency(value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value <= 1:
        raise InvalidArgumentError(f"efficiency must be a number in (0, 1], got {brief(value)}")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --- profiles --------------------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceProfile:
    """One device: peak FLOP/s, memory bandwidth (bytes/s), memory (bytes), op overhead (ns).

    The last ten fields are the host-side costs a calibrated profile (``simdist calibrate``)
    measures; the built-in profiles leave them at 0, so that a step is its roofline ops and
    messages alone, as the lessons' closed forms have it:

    - ``op_overhead_ns``: TF's executor dispatching one op, for each TF op a simulated compute
      call stands for (a replica's forward and backward pass is ``Model.num_ops`` ops, an
      update one op per variable);
    - ``step_overhead_ns`` and ``replica_overhead_ns``: the host's own work per training step
      (the Python loop, the input iterator, the ``tf.function`` call) and per local replica
      (cutting the batch, dispatching the replica's function);
    - ``input_pipeline_overhead_ns``: the extra host work per step when the strategy wraps
      the dataset (tf.distribute's ``DistributedDataset``, OneDeviceStrategy's prefetch to
      its device): every strategy but the default one;
    - ``distributed_step_overhead_ns``: the extra host work per step of a strategy that runs
      through tf.distribute's mirrored machinery (``mirrored_run``, a ``DistributedIterator``),
      MirroredStrategy and MultiWorkerMirroredStrategy, even with one replica;
    - ``input_kb_ns``: the host's time per KB (1000 bytes) of a step's input, features and
      labels (the dataset's generator, the conversion to tensors, the split: measured on TF
      2.21 to grow with the batch's bytes: 64-pixel digits cost 4-8x more per example than
      8-feature rows);
    - ``collective_overhead_ns``: TF's collective executor starting one all-reduce on a
      device (a ``CollectiveReduceV2`` kernel: its instance, its group, its buffers), paid by
      every member of each all-reduce before its messages;
    - ``packed_tensor_overhead_ns``: per tensor of such an all-reduce, per member: in a
      ``tf.function`` TF's ``CollectiveReplicaLauncher.batch_all_reduce`` packs a step's
      gradients into one tensor (a reshape and a shape op per tensor, a concat) and cuts the
      result back (a split, a reshape per tensor), so a model's variable count costs ops
      that its forward and backward pass do not hold;
    - ``multi_worker_step_overhead_ns``: the extra host work per step of
      MultiWorkerMirroredStrategy over MirroredStrategy's (its collectives span a cluster's
      group, even of one worker; measured on TF 2.21 to cost a lone worker ~0.6 ms a step
      more than MirroredStrategy on one device);
    - ``shared_op_overhead_ns``: per TF op, for each other task of the cluster: a localhost
      cluster (realdist's) runs every task as a process on the same cores, so an op waits
      for a core the longer the more processes there are (measured on 2026-11-26:
      MultiWorkerMirrored's 39-op MLP cost ~5 ms a step more than its 27-op softmax
      regression on 2 workers, ~12 ms on 4, whatever the MLP's width; 0.5 ms in one
      process);
    - ``virtual``: the devices are logical devices cut from one physical device
      (``tf.config.set_logical_device_configuration``): they and the host share its cores, so
      their ops run one after another.
    """

    name: str
    device_type: str
    peak_flops: float
    mem_bandwidth: int
    memory: int
    launch_overhead_ns: int
    efficiency: float = 0.5
    op_overhead_ns: int = 0
    step_overhead_ns: int = 0
    replica_overhead_ns: int = 0
    collective_overhead_ns: int = 0
    input_pipeline_overhead_ns: int = 0
    distributed_step_overhead_ns: int = 0
    input_kb_ns: int = 0
    packed_tensor_overhead_ns: int = 0
    multi_worker_step_overhead_ns: int = 0
    shared_op_overhead_ns: int = 0
    virtual: bool = False

    def __post_init__(self):
        _check_name("device name", self.name)
        _check_choice(f"device {brief(self.name)}: device_type", self.device_type, DEVICE_TYPES)
        _check_positive(f"device {brief(self.name)}: peak_flops", self.peak_flops)
        _check_int(f"device {brief(self.name)}: mem_bandwidth", self.mem_bandwidth, 1)
        _check_int(f"device {brief(self.name)}: memory", self.memory, 1)
        for field in ("launch_overhead_ns", "op_overhead_ns", "step_overhead_ns",
                      "replica_overhead_ns", "collective_overhead_ns",
                      "input_pipeline_overhead_ns", "distributed_step_overhead_ns",
                      "input_kb_ns", "packed_tensor_overhead_ns",
                      "multi_worker_step_overhead_ns", "shared_op_overhead_ns"):
            _check_int(f"device {brief(self.name)}: {field}", getattr(self, field), 0)
        _check_efficiency(self.efficiency)
        if not isinstance(self.virtual, bool):
            raise InvalidArgumentError(
                f"device {brief(self.name)}: virtual must be true or false, got "
                f"{brief(self.virtual)}")

    def compute_time_ns(self, flops: float, nbytes: int = 0, efficiency: float | None = None,
                        ops: int = 0, tasks: int = 1) -> int:
        """Roofline time of one op in ns: max(compute, memory), rounded up, plus the overhead
        (and ``ops`` x ``op_overhead_ns`` when the call stands for ``ops`` TF ops, plus
        ``ops`` x ``shared_op_overhead_ns`` for each of the cluster's ``tasks`` but one).

        The compute part uses float arithmetic (IEEE-754, so the same on every machine); the
        memory part is exact integer arithmetic.
        """
        eff = self.efficiency if efficiency is None else efficiency
        _check_efficiency(eff)
        if isinstance(flops, bool) or not isinstance(flops, numbers.Real) or not flops >= 0:
            raise InvalidArgumentError(f"flops must be a number >= 0, got {brief(flops)}")
        _check_int("nbytes", nbytes, 0)
        _check_int("ops", ops, 0)
        _check_int("tasks", tasks, 1)
        compute = math.ceil(flops * 1e9 / (self.peak_flops * eff)) if flops else 0
        memory = _ceil_div(int(nbytes) * 10**9, self.mem_bandwidth)
        return (max(compute, memory) + self.launch_overhead_ns
                + ops * (self.op_overhead_ns + (tasks - 1) * self.shared_op_overhead_ns))

    def host_step_ns(self, replicas: int, input_bytes: int = 0, wrapped: bool = False,
                     distributed: bool = False, multi_worker: bool = False) -> int:
        """The host's work per training step of a task with ``replicas`` local replicas and
        ``input_bytes`` of input (``wrapped``: the strategy wraps the dataset;
        ``distributed``: it runs through the mirrored machinery; ``multi_worker``: it is
        MultiWorkerMirroredStrategy)."""
        _check_int("replicas", replicas, 0)
        _check_int("input_bytes", input_bytes, 0)
        return (self.step_overhead_ns + replicas * self.replica_overhead_ns
                + _ceil_div(input_bytes * self.input_kb_ns, 1000)
                + (self.input_pipeline_overhead_ns if wrapped else 0)
                + (self.distributed_step_overhead_ns if distributed else 0)
                + (self.multi_worker_step_overhead_ns if multi_worker else 0))


@dataclass(frozen=True)
class LinkProfile:
    """One link: one-way latency (ns) and bandwidth (bytes/s per direction)."""

    name: str
    kind: str
    latency_ns: int
    bandwidth: int

    def __post_init__(self):
        _check_name("link name", self.name)
        _check_choice(f"link {brief(self.name)}: kind", self.kind, LINK_KINDS)
        _check_int(f"link {brief(self.name)}: latency_ns", self.latency_ns, 1)
        _check_int(f"link {brief(self.name)}: bandwidth", self.bandwidth, 1)

    def serialization_ns(self, nbytes: int) -> int:
        """Time to put nbytes on the wire: ceil(nbytes * 1e9 / bandwidth), exact integers."""
        _check_int("nbytes", nbytes, 0)
        return _ceil_div(int(nbytes) * 10**9, self.bandwidth)

    def transfer_time_ns(self, nbytes: int) -> int:
        """Time for a message of nbytes over a free link: latency + serialization."""
        return self.latency_ns + self.serialization_ns(nbytes)


@dataclass(frozen=True)
class SystemProfile:
    """A named machine type: its device, its intra-machine link and the network between machines."""

    name: str
    device: str
    intra_link: str
    network: str
    description: str = ""

    def __post_init__(self):
        _check_name("system name", self.name)
        for field in ("device", "intra_link", "network"):
            _check_name(f"system {brief(self.name)}: {field}", getattr(self, field))
        if not isinstance(self.description, str):
            raise InvalidArgumentError(
                f"system {brief(self.name)}: description must be a string, got "
                f"{brief(self.description)}")


# --- the catalog -----------------------------------------------------------------------------

_BUILTIN_DEVICES = tuple(DeviceProfile(**fields) for fields in DEVICES)
_BUILTIN_LINKS = tuple(LinkProfile(**fields) for fields in LINKS)
_BUILTIN_SYSTEMS = tuple(SystemProfile(**fields) for fields in SYSTEMS)

# Fields a user file may set, per section: field -> "str" or the unit of the quantity.
_FILE_FIELDS = {
    "devices": {"device_type": "str", "peak_flops": "FLOP/s", "mem_bandwidth": "B/s",
                "memory": "B", "launch_overhead_ns": "ns", "efficiency": "fraction",
                "op_overhead_ns": "ns", "step_overhead_ns": "ns", "replica_overhead_ns": "ns",
                "collective_overhead_ns": "ns", "input_pipeline_overhead_ns": "ns",
                "distributed_step_overhead_ns": "ns", "input_kb_ns": "ns",
                "packed_tensor_overhead_ns": "ns", "multi_worker_step_overhead_ns": "ns",
                "shared_op_overhead_ns": "ns", "virtual": "bool"},
    "links": {"kind": "str", "latency_ns": "ns", "bandwidth": "B/s"},
    "systems": {"device": "str", "intra_link": "str", "network": "str", "description": "str"},
}
_SECTION_CLASS = {"devices": DeviceProfile, "links": LinkProfile, "systems": SystemProfile}
_KIND_WORD = {"devices": "device", "links": "link", "systems": "hardware"}


def file_record(profile) -> dict:
    """A device, link or system profile as its entry in a profiles file: every field the
    file can set (``_FILE_FIELDS``), so that loading the entry gives the profile back."""
    section = next(s for s, cls in _SECTION_CLASS.items() if isinstance(profile, cls))
    return {field: getattr(profile, field) for field in _FILE_FIELDS[section]}


def _file_value(value, unit: str, int_field: bool):
    """Convert one field of a user file; raises InvalidArgumentError saying what was expected."""
    if unit == "str":
        if not isinstance(value, str):
            raise InvalidArgumentError(f"expected a string, got {brief(value)}")
        return value
    if unit == "bool":
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"expected true or false, got {brief(value)}")
        return value
    if unit == "fraction":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidArgumentError(f"expected a number in (0, 1], got {brief(value)}")
        return float(value)
    exact = exact_quantity(value, unit)
    if exact < 0:
        raise InvalidArgumentError(f"must not be negative, got {brief(value)}")
    return round(exact) if int_field else float(exact)


class HardwareCatalog:
    """Named device, link and system profiles: the built-ins plus a user's file."""

    def __init__(self, devices=None, links=None, systems=None):
        self.devices: dict[str, DeviceProfile] = dict(devices or {})
        self.links: dict[str, LinkProfile] = dict(links or {})
        self.systems: dict[str, SystemProfile] = dict(systems or {})

    @classmethod
    def default(cls) -> HardwareCatalog:
        """A fresh catalog of the built-in profiles."""
        return cls({d.name: d for d in _BUILTIN_DEVICES}, {k.name: k for k in _BUILTIN_LINKS},
                   {s.name: s for s in _BUILTIN_SYSTEMS})

    @classmethod
    def from_file(cls, path) -> HardwareCatalog:
        """The built-ins, with a user file's profiles added or overriding them."""
        return cls.default().load_file(path)

    def _lookup(self, section: str, name: str):
        table = getattr(self, section)
        if name not in table:
            raise UnknownProfileError(
                f"unknown {_KIND_WORD[section]} profile {brief(name)}: expected one of "
                f"{', '.join(sorted(table))}")
        return table[name]

    def device(self, name: str) -> DeviceProfile:
        return self._lookup("devices", name)

    def link(self, name: str) -> LinkProfile:
        return self._lookup("links", name)

    def system(self, name: str) -> SystemProfile:
        return self._lookup("systems", name)

    def names(self) -> dict[str, list[str]]:
        """Sorted profile names per kind: {"devices": [...], "links": [...], "systems": [...]}."""
        return {section: sorted(getattr(self, section)) for section in _SECTION_CLASS}

    def load_file(self, path) -> HardwareCatalog:
        """Add or override profiles from a JSON or YAML file; returns self.

        Top-level keys: "devices", "links", "systems", each mapping a name to fields. An
        existing name keeps the fields the file does not give; a new name needs all of them.
        Nothing changes when the file has an error.
        """
        path = Path(path)
        data = read_profile_file(path)
        tables = {section: dict(getattr(self, section)) for section in _SECTION_CLASS}
        for section in _SECTION_CLASS:  # devices and links first: systems refer to them
            entries = data.get(section) or {}
            if not isinstance(entries, dict):
                raise ProfileFileError(
                    f"{path}: {section!r} must map profile names to fields, got {entries!r}")
            for name, fields in entries.items():
                tables[section][name] = _file_entry(path, section, name, fields,
                                                    tables[section].get(name))
        for name, system in tables["systems"].items():
            for field, section in (("device", "devices"), ("intra_link", "links"),
                                   ("network", "links")):
                value = getattr(system, field)
                if value not in tables[section]:
                    raise ProfileFileError(
                        f"{path}: systems entry {brief(name)}: field {brief(field)}: unknown "
                        f"{_KIND_WORD[section]} {brief(value)}: expected one of "
                        f"{', '.join(sorted(tables[section]))}")
        self.devices, self.links, self.systems = (tables["devices"], tables["links"],
                                                  tables["systems"])
        return self


def read_profile_file(path: Path) -> dict:
    suffix = path.suffix.lower()
    if suffix not in (".json", ".yaml", ".yml"):
        raise ProfileFileError(
            f"{path}: unknown profile file type {brief(path.suffix)}: expected .json, .yaml "
            "or .yml")
    if suffix == ".json":
        data = read_json(path, "profiles", ProfileFileError)
    else:
        data = read_yaml(path, "profiles", ProfileFileError)
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ProfileFileError(
            f"{path}: expected a mapping with keys devices, links, systems; got {brief(data)}")
    for key in data:
        if key not in _SECTION_CLASS and key != "calibration":
            raise ProfileFileError(
                f"{path}: unknown top-level key {brief(key)}: expected devices, links or "
                "systems (or calibration, the record simdist calibrate keeps)")
    return data


def _file_entry(path: Path, section: str, name, fields, existing):
    """One profile of a user file: the existing profile updated, or a new one."""
    where = f"{path}: {section} entry {brief(name)}"
    if not isinstance(name, str) or not name:
        raise ProfileFileError(f"{where}: a profile name must be a non-empty string")
    fields = {} if fields is None else fields
    if not isinstance(fields, dict):
        raise ProfileFileError(f"{where}: expected a mapping of fields, got {brief(fields)}")
    cls, allowed = _SECTION_CLASS[section], _FILE_FIELDS[section]
    int_fields = {f.name for f in dataclasses.fields(cls) if f.type == "int"}
    values = {}
    for field, value in fields.items():
        if field not in allowed:
            raise ProfileFileError(
                f"{where}: unknown field {brief(field)}: expected one of {', '.join(allowed)}")
        try:
            values[field] = _file_value(value, allowed[field], field in int_fields)
        except InvalidArgumentError as error:
            raise ProfileFileError(f"{where}: field {brief(field)}: {error}") from None
    if existing is None:
        required = [f.name for f in dataclasses.fields(cls)
                    if f.name != "name" and f.default is dataclasses.MISSING]
        missing = [field for field in required if field not in values]
        if missing:
            raise ProfileFileError(
                f"{where}: a new {_KIND_WORD[section]} profile needs the fields "
                f"{', '.join(required)}; missing {', '.join(missing)}")
    try:
        if existing is None:
            return cls(name=name, **values)
        return dataclasses.replace(existing, **values)
    except InvalidArgumentError as error:
        raise ProfileFileError(f"{where}: {error}") from None


# --- layout and resolved hardware ------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """How tasks map onto machines: consecutive task orders fill one machine after another."""

    tasks_per_machine: int = 1
    devices_per_task: int = 1

    def __post_init__(self):
        _check_int("tasks_per_machine", self.tasks_per_machine, 1)
        _check_int("devices_per_task", self.devices_per_task, 1)

    def machine_of(self, task_order: int) -> int:
        """The machine that holds the task with this canonical order."""
        if task_order < 0:
            raise OutOfRangeError(f"task order must be >= 0, got {brief(task_order)}")
        return task_order // self.tasks_per_machine

    def num_machines(self, num_tasks: int) -> int:
        """How many machines num_tasks tasks fill."""
        _check_int("num_tasks", num_tasks, 0)
        return _ceil_div(num_tasks, self.tasks_per_machine)

    def same_machine(self, a: int, b: int) -> bool:
        return self.machine_of(a) == self.machine_of(b)


@dataclass(frozen=True)
class Hardware:
    """The resolved hardware of one simulated run."""

    system: SystemProfile
    device: DeviceProfile
    intra_link: LinkProfile
    network: LinkProfile
    layout: Layout = Layout()

    @classmethod
    def from_catalog(cls, catalog: HardwareCatalog, system_name: str = DEFAULT_SYSTEM,
                     layout: Layout = Layout()) -> Hardware:
        """Look up a system and its device and links in a catalog."""
        system = catalog.system(system_name)
        return cls(system, catalog.device(system.device), catalog.link(system.intra_link),
                   catalog.link(system.network), layout)

    def link_between(self, task_a_order: int, task_b_order: int) -> LinkProfile:
        """The intra-machine link if both tasks share a machine, else the network."""
        if self.layout.same_machine(task_a_order, task_b_order):
            return self.intra_link
        return self.network

    def min_latency_ns(self, num_tasks: int) -> int:
        """The smallest latency of any link between two distinct tasks of num_tasks."""
        _check_int("num_tasks", num_tasks, 0)
        if num_tasks <= 1:
            return self.network.latency_ns
        latencies = []
        if self.layout.tasks_per_machine >= 2:
            latencies.append(self.intra_link.latency_ns)
        if self.layout.num_machines(num_tasks) >= 2:
            latencies.append(self.network.latency_ns)
        return min(latencies)
