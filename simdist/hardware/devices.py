"""Hardware of a simulated cluster: device and link profiles, machine layout, cost model.

A *device* (one CPU core, one GPU, one TPU core) runs ops; its time for an op is the roofline
cost model::

    max(flops / (peak_flops x efficiency), nbytes / mem_bandwidth) + launch_overhead_ns

A *link* carries a message of n bytes in ``latency_ns + ceil(n / bandwidth)`` and holds each
end's port for ``message_ns + ceil(n / bandwidth)`` of it (a cost per message). A *system* is a
named machine type: which device every task uses, the link between tasks on one machine and the
network between machines. A ``Layout`` says how many tasks share a machine. A calibrated
device adds the host's own work of TF's runtime, its ``HostCosts`` (``host_costs.py``).

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
from simdist.hardware.checks import (ceil_div, check_choice, check_efficiency, check_int,
                                     check_name, check_positive)
from simdist.hardware.host_costs import HOST_COST_NAMES, HostCosts
from simdist.hardware.units import exact_quantity

DEVICE_TYPES = ("CPU", "GPU", "TPU")
LINK_KINDS = ("network", "pcie", "nvlink", "shm")
DEFAULT_SYSTEM = "cpu"


class UnknownProfileError(NotFoundError):
    """A device, link or system profile name that the catalog does not have."""


class ProfileFileError(InvalidArgumentError):
    """A user hardware-profile file that cannot be read or has a bad entry."""


# --- profiles --------------------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceProfile:
    """One device: peak FLOP/s, memory bandwidth (bytes/s), memory (bytes), op overhead (ns).

    ``host_costs`` are the host-side costs a calibrated profile (``simdist calibrate``)
    measures (``HostCosts``; a profiles file sets them as fields of the device, by their
    names); ``virtual``: the devices are logical devices cut from one physical device
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
    host_costs: HostCosts = HostCosts()
    virtual: bool = False

    def __post_init__(self):
        check_name("device name", self.name)
        check_choice(f"device {brief(self.name)}: device_type", self.device_type, DEVICE_TYPES)
        check_positive(f"device {brief(self.name)}: peak_flops", self.peak_flops)
        check_int(f"device {brief(self.name)}: mem_bandwidth", self.mem_bandwidth, 1)
        check_int(f"device {brief(self.name)}: memory", self.memory, 1)
        check_int(f"device {brief(self.name)}: launch_overhead_ns", self.launch_overhead_ns, 0)
        check_efficiency(self.efficiency)
        if not isinstance(self.host_costs, HostCosts):
            raise InvalidArgumentError(
                f"device {brief(self.name)}: host_costs must be a HostCosts, got "
                f"{brief(self.host_costs)}")
        if not isinstance(self.virtual, bool):
            raise InvalidArgumentError(
                f"device {brief(self.name)}: virtual must be true or false, got "
                f"{brief(self.virtual)}")

    def compute_time_ns(self, flops: float, nbytes: int = 0, efficiency: float | None = None,
                        ops: int = 0, tasks: int = 1) -> int:
        """Roofline time of one op in ns: max(compute, memory), rounded up, plus the overhead
        (and the dispatch of ``ops`` TF ops when the call stands for that many, on a cluster
        of ``tasks`` tasks: ``HostCosts.ops_ns``).

        The compute part uses float arithmetic (IEEE-754, so the same on every machine); the
        memory part is exact integer arithmetic.
        """
        eff = self.efficiency if efficiency is None else efficiency
        check_efficiency(eff)
        if isinstance(flops, bool) or not isinstance(flops, numbers.Real) or not flops >= 0:
            raise InvalidArgumentError(f"flops must be a number >= 0, got {brief(flops)}")
        check_int("nbytes", nbytes, 0)
        check_int("ops", ops, 0)
        check_int("tasks", tasks, 1)
        compute = math.ceil(flops * 1e9 / (self.peak_flops * eff)) if flops else 0
        memory = ceil_div(int(nbytes) * 10**9, self.mem_bandwidth)
        return (max(compute, memory) + self.launch_overhead_ns
                + self.host_costs.ops_ns(ops, tasks))


@dataclass(frozen=True)
class LinkProfile:
    """One link: one-way latency (ns), bandwidth (bytes/s per direction) and the time each
    end's port is busy per message whatever its size (ns).

    ``latency_ns`` is a small message's one-way time, as a ping-pong measures it.
    ``message_ns`` is the part of it during which the sending and the receiving port are
    busy with the message: the host's network stack and the NIC's per-message work (LogP's
    overhead o: Culler et al., "LogP: Towards a Realistic Model of Parallel Computation",
    PPoPP 1993). A lone message of n bytes takes ``latency_ns + n/B`` whatever
    ``message_ns`` is; a port starts at most one message per ``message_ns``, so k small
    messages through one port take k x ``message_ns`` more than one.
    """

    name: str
    kind: str
    latency_ns: int
    bandwidth: int
    message_ns: int = 0

    def __post_init__(self):
        check_name("link name", self.name)
        check_choice(f"link {brief(self.name)}: kind", self.kind, LINK_KINDS)
        check_int(f"link {brief(self.name)}: latency_ns", self.latency_ns, 1)
        check_int(f"link {brief(self.name)}: bandwidth", self.bandwidth, 1)
        check_int(f"link {brief(self.name)}: message_ns", self.message_ns, 0)
        if self.message_ns >= self.latency_ns:
            raise InvalidArgumentError(
                f"link {brief(self.name)}: message_ns must be less than latency_ns "
                f"({self.latency_ns}), got {self.message_ns}: a small message's one-way "
                "time includes the ends' time on it")

    def serialization_ns(self, nbytes: int) -> int:
        """How long a message of nbytes holds each end's port: message_ns + ceil(nbytes *
        1e9 / bandwidth), exact integers."""
        check_int("nbytes", nbytes, 0)
        return self.message_ns + ceil_div(int(nbytes) * 10**9, self.bandwidth)

    @property
    def flight_ns(self) -> int:
        """From a message's start on the sending port to its first bit at the receiving
        port: latency_ns - message_ns."""
        return self.latency_ns - self.message_ns

    def transfer_time_ns(self, nbytes: int) -> int:
        """Time for a message of nbytes over a free link: latency + nbytes / bandwidth."""
        return self.flight_ns + self.serialization_ns(nbytes)


@dataclass(frozen=True)
class SystemProfile:
    """A named machine type: its device, its intra-machine link and the network between machines."""

    name: str
    device: str
    intra_link: str
    network: str
    description: str = ""

    def __post_init__(self):
        check_name("system name", self.name)
        for field in ("device", "intra_link", "network"):
            check_name(f"system {brief(self.name)}: {field}", getattr(self, field))
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
                **{name: "ns" for name in HOST_COST_NAMES}, "virtual": "bool"},
    "links": {"kind": "str", "latency_ns": "ns", "bandwidth": "B/s",
              "message_ns": "ns"},
    "systems": {"device": "str", "intra_link": "str", "network": "str", "description": "str"},
}
_SECTION_CLASS = {"devices": DeviceProfile, "links": LinkProfile, "systems": SystemProfile}
_KIND_WORD = {"devices": "device", "links": "link", "systems": "hardware"}


def file_record(profile) -> dict:
    """A device, link or system profile as its entry in a profiles file: every field the
    file can set (``_FILE_FIELDS``: a device's host costs among its fields), so that loading
    the entry gives the profile back."""
    section = next(s for s, cls in _SECTION_CLASS.items() if isinstance(profile, cls))
    values = dataclasses.asdict(profile)
    values.update(values.pop("host_costs", {}))
    return {field: values[field] for field in _FILE_FIELDS[section]}


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
    int_fields = {f.name for c in (cls, HostCosts) for f in dataclasses.fields(c)
                  if f.type == "int"}
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
    costs = {field: values.pop(field) for field in HOST_COST_NAMES if field in values}
    try:
        if costs:  # a device's host costs: those the file gives, over the profile's
            values["host_costs"] = dataclasses.replace(
                HostCosts() if existing is None else existing.host_costs, **costs)
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
        check_int("tasks_per_machine", self.tasks_per_machine, 1)
        check_int("devices_per_task", self.devices_per_task, 1)

    def machine_of(self, task_order: int) -> int:
        """The machine that holds the task with this canonical order."""
        if task_order < 0:
            raise OutOfRangeError(f"task order must be >= 0, got {brief(task_order)}")
        return task_order // self.tasks_per_machine

    def num_machines(self, num_tasks: int) -> int:
        """How many machines num_tasks tasks fill."""
        check_int("num_tasks", num_tasks, 0)
        return ceil_div(num_tasks, self.tasks_per_machine)

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
        """The smallest latency of any link between two distinct tasks of num_tasks: no
        message sent in a time window of this width is due (its last bit's earliest
        arrival) within it."""
        check_int("num_tasks", num_tasks, 0)
        if num_tasks <= 1:
            return self.network.latency_ns
        latencies = []
        if self.layout.tasks_per_machine >= 2:
            latencies.append(self.intra_link.latency_ns)
        if self.layout.num_machines(num_tasks) >= 2:
            latencies.append(self.network.latency_ns)
        return min(latencies)
