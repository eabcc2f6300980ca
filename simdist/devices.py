"""Hardware of a simulated cluster: device and link profiles, machine layout, cost model.

A *device* (one CPU core, one GPU, one TPU core) runs ops; its time for an op is the roofline
cost model::

    max(flops / (peak_flops x efficiency), nbytes / mem_bandwidth) + launch_overhead_ns

A *link* carries a message of n bytes in ``latency_ns + ceil(n / bandwidth)``. A *system* is a
named machine type: which device every task uses, the link between tasks on one machine and the
network between machines. A ``Layout`` says how many tasks share a machine.

Every built-in number cites its source next to it. Users add or override profiles with a JSON
or YAML file (``HardwareCatalog.load_file``). Times are integer nanoseconds, rounded up.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from simdist.errors import InvalidArgumentError, NotFoundError, OutOfRangeError

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
        raise InvalidArgumentError(f"{what} must be a non-empty string, got {value!r}")


def _check_choice(what: str, value, choices) -> None:
    if value not in choices:
        raise InvalidArgumentError(
            f"{what} {value!r} is not valid: expected one of {', '.join(choices)}")


def _check_int(what: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"{what} must be an int, got {value!r}")
    if value < minimum:
        raise InvalidArgumentError(f"{what} must be >= {minimum}, got {value!r}")


def _check_positive(what: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise InvalidArgumentError(f"{what} must be a number > 0, got {value!r}")
    if not math.isfinite(value):
        raise InvalidArgumentError(f"{what} must be finite, got {value!r}")


def _check_efficiency(value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value <= 1:
        raise InvalidArgumentError(f"efficiency must be a number in (0, 1], got {value!r}")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --- profiles --------------------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceProfile:
    """One device: peak FLOP/s, memory bandwidth (bytes/s), memory (bytes), op overhead (ns)."""

    name: str
    device_type: str
    peak_flops: float
    mem_bandwidth: int
    memory: int
    launch_overhead_ns: int
    efficiency: float = 0.5

    def __post_init__(self):
        _check_name("device name", self.name)
        _check_choice(f"device {self.name!r}: device_type", self.device_type, DEVICE_TYPES)
        _check_positive(f"device {self.name!r}: peak_flops", self.peak_flops)
        _check_int(f"device {self.name!r}: mem_bandwidth", self.mem_bandwidth, 1)
        _check_int(f"device {self.name!r}: memory", self.memory, 1)
        _check_int(f"device {self.name!r}: launch_overhead_ns", self.launch_overhead_ns, 0)
        _check_efficiency(self.efficiency)

    def compute_time_ns(self, flops: float, nbytes: int = 0, efficiency: float | None = None,
                        ) -> int:
        """Roofline time of one op in ns: max(compute, memory), rounded up, plus the overhead.

        The compute part uses float arithmetic (IEEE-754, so the same on every machine); the
        memory part is exact integer arithmetic.
        """
        eff = self.efficiency if efficiency is None else efficiency
        _check_efficiency(eff)
        if isinstance(flops, bool) or not isinstance(flops, numbers.Real) or not flops >= 0:
            raise InvalidArgumentError(f"flops must be a number >= 0, got {flops!r}")
        _check_int("nbytes", nbytes, 0)
        compute = math.ceil(flops * 1e9 / (self.peak_flops * eff)) if flops else 0
        memory = _ceil_div(int(nbytes) * 10**9, self.mem_bandwidth)
        return max(compute, memory) + self.launch_overhead_ns


@dataclass(frozen=True)
class LinkProfile:
    """One link: one-way latency (ns) and bandwidth (bytes/s per direction)."""

    name: str
    kind: str
    latency_ns: int
    bandwidth: int

    def __post_init__(self):
        _check_name("link name", self.name)
        _check_choice(f"link {self.name!r}: kind", self.kind, LINK_KINDS)
        _check_int(f"link {self.name!r}: latency_ns", self.latency_ns, 1)
        _check_int(f"link {self.name!r}: bandwidth", self.bandwidth, 1)

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
            _check_name(f"system {self.name!r}: {field}", getattr(self, field))
        if not isinstance(self.description, str):
            raise InvalidArgumentError(
                f"system {self.name!r}: description must be a string, got {self.description!r}")


# --- built-in profiles -----------------------------------------------------------------------
# GB = 10**9 bytes (vendors' unit for bandwidth); GiB = 2**30 bytes (memory capacities).

GiB = 2**30

_BUILTIN_DEVICES = (
    DeviceProfile(
        "cpu-core", "CPU",
        # Skylake-SP core with AVX-512: 2 FMA units x 16 fp32 lanes x 2 FLOP x 2.0 GHz (a typical
        # AVX-512 all-core clock of a Xeon Gold, Intel Xeon Scalable spec update) = 128 GFLOP/s.
        peak_flops=2 * 16 * 2 * 2.0e9,
        # Typical single-thread STREAM triad measurement on Skylake-SP (a socket's 6 channels of
        # DDR4-2666 give 128 GB/s, shared by all its cores): teaching round number.
        mem_bandwidth=12 * 10**9,
        memory=4 * GiB,  # teaching assumption: one core's share of a server's RAM
        launch_overhead_ns=2_000,  # teaching assumption: TF executor per-op dispatch on CPU
        efficiency=0.5,  # teaching assumption: typical TF kernels, not a tuned GEMM
    ),
    DeviceProfile(
        "gtx-1080-ti", "GPU",
        # NVIDIA GeForce GTX 1080 Ti spec: 3584 CUDA cores x 2 FLOP x 1582 MHz boost.
        peak_flops=3584 * 2 * 1.582e9,
        mem_bandwidth=484 * 10**9,  # NVIDIA spec: 11 Gbps GDDR5X x 352-bit bus / 8
        memory=11 * GiB,  # NVIDIA spec: 11 GB GDDR5X
        launch_overhead_ns=5_000,  # teaching assumption: CUDA launch + TF op dispatch, ~5 us
        efficiency=0.5,  # teaching assumption
    ),
    DeviceProfile(
        "k80", "GPU",
        # One GK210 die of a Tesla K80 (TF sees each die as a GPU). NVIDIA K80 datasheet:
        # 2 x 2496 CUDA cores, 8.73 TFLOPS fp32 at 875 MHz boost -> 2496 x 2 x 875 MHz per die.
        peak_flops=2496 * 2 * 0.875e9,
        mem_bandwidth=240 * 10**9,  # K80 datasheet: 480 GB/s per board, half per die
        memory=12 * GiB,  # K80 datasheet: 24 GB GDDR5 per board, half per die
        launch_overhead_ns=5_000,  # teaching assumption
        efficiency=0.5,  # teaching assumption
    ),
    DeviceProfile(
        "v100", "GPU",
        peak_flops=15.7e12,  # NVIDIA V100 datasheet, SXM2: 15.7 TFLOPS fp32 (125 tensor)
        mem_bandwidth=900 * 10**9,  # V100 datasheet: HBM2 900 GB/s
        memory=16 * GiB,  # V100 datasheet: 16 GB HBM2 (a 32 GB model exists too)
        launch_overhead_ns=5_000,  # teaching assumption
        efficiency=0.5,  # teaching assumption
    ),
    DeviceProfile(
        "a100", "GPU",
        peak_flops=19.5e12,  # NVIDIA A100 datasheet, SXM4 40GB: 19.5 TFLOPS fp32 (non-tensor)
        mem_bandwidth=1_555 * 10**9,  # A100 datasheet: 40GB HBM2, 1,555 GB/s
        memory=40 * GiB,  # A100 datasheet: 40 GB HBM2
        launch_overhead_ns=5_000,  # teaching assumption
        efficiency=0.5,  # teaching assumption
    ),
    DeviceProfile(
        "h100", "GPU",
        peak_flops=67e12,  # NVIDIA H100 datasheet, SXM5: 67 TFLOPS fp32 (non-tensor)
        mem_bandwidth=3_350 * 10**9,  # H100 datasheet: HBM3 3.35 TB/s
        memory=80 * GiB,  # H100 datasheet: 80 GB HBM3
        launch_overhead_ns=5_000,  # teaching assumption
        efficiency=0.5,  # teaching assumption
    ),
    DeviceProfile(
        "tpu-v3-core", "TPU",
        # Google Cloud TPU v3 docs: 123 TFLOPS bf16 per chip, two TensorCores per chip (MXU peak).
        peak_flops=123e12 / 2,
        mem_bandwidth=450 * 10**9,  # Cloud TPU v3 docs: HBM2 900 GBps per chip, half per core
        memory=16 * GiB,  # Cloud TPU v3 docs: 32 GiB HBM2 per chip, half per core
        launch_overhead_ns=1_000,  # teaching assumption: XLA runs fused, compiled programs
        efficiency=0.5,  # teaching assumption
    ),
)

_BUILTIN_LINKS = (
    # Ethernet: bandwidth = line rate / 8 (IEEE 802.3); latency = typical one-way small-message
    # latency measured with TCP or MPI for that class of Ethernet (teaching round numbers).
    LinkProfile("1gbe", "network", latency_ns=30_000,  # typical TCP one-way on 1 GbE: 25-50 us
                bandwidth=125_000_000),  # IEEE 802.3ab 1000BASE-T: 1 Gbit/s / 8
    LinkProfile("10gbe", "network", latency_ns=10_000,  # typical TCP one-way on 10 GbE
                bandwidth=1_250_000_000),  # IEEE 802.3ae: 10 Gbit/s / 8
    LinkProfile("25gbe", "network", latency_ns=5_000,  # typical TCP one-way on 25 GbE
                bandwidth=3_125_000_000),  # IEEE 802.3by: 25 Gbit/s / 8
    LinkProfile("100gbe", "network", latency_ns=2_000,  # typical MPI over RDMA (RoCE), 100 GbE
                bandwidth=12_500_000_000),  # IEEE 802.3ba: 100 Gbit/s / 8
    # PCI Express Base Spec 3.0: 8 GT/s x 16 lanes x 128b/130b encoding / 8 = 15.75 GB/s
    # theoretical (CUDA's bandwidthTest measures ~12 GB/s with pinned memory).
    LinkProfile("pcie3-x16", "pcie",
                latency_ns=5_000,  # teaching assumption: a small cudaMemcpy, driver included
                bandwidth=8 * 10**9 * 16 * 128 // 130 // 8),
    # NVLink latency: typical GPU peer-to-peer latency (CUDA sample p2pBandwidthLatencyTest
    # reports 1-3 us): teaching round number. Every pair is assumed fully linked.
    LinkProfile("nvlink2", "nvlink", latency_ns=2_000,
                bandwidth=6 * 25 * 10**9),  # V100 whitepaper: 6 links x 25 GB/s per direction
    LinkProfile("nvlink3", "nvlink", latency_ns=2_000,
                bandwidth=12 * 25 * 10**9),  # A100 whitepaper: 12 links x 25 GB/s per direction
    LinkProfile("nvlink4", "nvlink", latency_ns=2_000,
                bandwidth=18 * 25 * 10**9),  # H100 datasheet: 18 links, 900 GB/s bidirectional
    # Shared memory between processes of one host: typical MPI intra-node measurement (OSU
    # osu_latency ~0.3-0.5 us, osu_bw ~10 GB/s for large messages): teaching round numbers.
    LinkProfile("shm", "shm", latency_ns=500, bandwidth=10 * 10**9),
    # TPU v3 inter-chip interconnect (Jouppi et al., "A Domain-Specific Supercomputer for
    # Training Deep Neural Networks", CACM 2020): 4 ICI links of 656 Gbit/s per chip; one link,
    # taken as per direction. Latency 1 us is a teaching assumption. Kind "network": it also
    # joins the hosts of a pod.
    LinkProfile("ici-v3", "network", latency_ns=1_000, bandwidth=656 * 10**9 // 8),
)

_BUILTIN_SYSTEMS = (
    SystemProfile("cpu", "cpu-core", "shm", "10gbe",
                  "one CPU core per task; shared memory in a machine, 10 GbE between machines"),
    SystemProfile("cpu-1gbe", "cpu-core", "shm", "1gbe",
                  "one CPU core per task; shared memory in a machine, 1 GbE between machines"),
    SystemProfile("gtx1080ti-pcie-10gbe", "gtx-1080-ti", "pcie3-x16", "10gbe",
                  "GeForce GTX 1080 Ti workstations: PCIe 3.0 in a machine, 10 GbE between"),
    SystemProfile("k80-pcie-10gbe", "k80", "pcie3-x16", "10gbe",
                  "Tesla K80 servers (one GK210 per GPU): PCIe 3.0 in a machine, 10 GbE between"),
    SystemProfile("v100-nvlink2-25gbe", "v100", "nvlink2", "25gbe",
                  "DGX-1-like V100 SXM2 servers: NVLink 2 in a machine, 25 GbE between"),
    SystemProfile("a100-nvlink3-100gbe", "a100", "nvlink3", "100gbe",
                  "DGX A100-like servers: NVLink 3 in a machine, 100 GbE between"),
    SystemProfile("h100-nvlink4-100gbe", "h100", "nvlink4", "100gbe",
                  "DGX H100-like servers: NVLink 4 in a machine, 100 GbE between"),
    SystemProfile("tpu-v3", "tpu-v3-core", "ici-v3", "ici-v3",
                  "Cloud TPU v3 pod slice: one TensorCore per device, ICI everywhere"),
)


# --- quantities in user files ----------------------------------------------------------------

_PREFIXES = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_BASE_UNITS = {  # unit of the result -> {suffix: factor}; a prefix may precede the suffix
    "FLOP/s": {"FLOPS": 1, "FLOP/s": 1, "flops": 1, "flop/s": 1},
    "B/s": {"B/s": 1, "Bps": 1, "bit/s": Fraction(1, 8), "b/s": Fraction(1, 8),
            "bps": Fraction(1, 8)},
    "B": {"B": 1, "bytes": 1},
    "ns": {},
}
_TIME_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9}
_EXAMPLES = {"FLOP/s": "'15.7 TFLOPS'", "B/s": "'900 GB/s' or '100 Gbit/s'",
             "B": "'16 GiB'", "ns": "'5 us'"}
_QUANTITY = re.compile(r"\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(\S*)\s*")


def _unit_factor(suffix: str, unit: str):
    if not suffix:
        return 1
    if unit == "ns":
        return _TIME_UNITS.get(suffix)
    for base, factor in _BASE_UNITS[unit].items():
        if suffix.endswith(base) and suffix[:-len(base)] in _PREFIXES:
            return _PREFIXES[suffix[:-len(base)]] * factor
    return None


def _exact_quantity(value, unit: str) -> Fraction:
    if unit not in _BASE_UNITS:
        raise InvalidArgumentError(
            f"unit {unit!r} is not known: expected one of {', '.join(_BASE_UNITS)}")
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"{value!r} is not a finite number")
        return Fraction(value)
    match = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    factor = _unit_factor(match.group(2), unit) if match else None
    if factor is None:
        raise InvalidArgumentError(
            f"cannot read {value!r} as {unit}: expected a number or a string such as "
            f"{_EXAMPLES[unit]}")
    return Fraction(match.group(1)) * factor


def parse_quantity(value, unit: str) -> int | float:
    """A number, or a string with a unit, in base units: parse_quantity("5 us", "ns") == 5000.

    ``unit`` is "FLOP/s", "B/s", "B" or "ns". SI prefixes (k, M, G, T, P) are powers of 10,
    binary ones (Ki, Mi, Gi, Ti) powers of 2; "Gbit/s" and "Gbps" are bits. Returns an int
    when the value is whole, else a float.
    """
    exact = _exact_quantity(value, unit)
    return int(exact) if exact.denominator == 1 else float(exact)


# --- the catalog -----------------------------------------------------------------------------

# Fields a user file may set, per section: field -> "str" or the unit of the quantity.
_FILE_FIELDS = {
    "devices": {"device_type": "str", "peak_flops": "FLOP/s", "mem_bandwidth": "B/s",
                "memory": "B", "launch_overhead_ns": "ns", "efficiency": "fraction"},
    "links": {"kind": "str", "latency_ns": "ns", "bandwidth": "B/s"},
    "systems": {"device": "str", "intra_link": "str", "network": "str", "description": "str"},
}
_SECTION_CLASS = {"devices": DeviceProfile, "links": LinkProfile, "systems": SystemProfile}
_KIND_WORD = {"devices": "device", "links": "link", "systems": "hardware"}


def _file_value(value, unit: str, int_field: bool):
    """Convert one field of a user file; raises InvalidArgumentError saying what was expected."""
    if unit == "str":
        if not isinstance(value, str):
            raise InvalidArgumentError(f"expected a string, got {value!r}")
        return value
    if unit == "fraction":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidArgumentError(f"expected a number in (0, 1], got {value!r}")
        return float(value)
    exact = _exact_quantity(value, unit)
    if exact < 0:
        raise InvalidArgumentError(f"must not be negative, got {value!r}")
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
                f"unknown {_KIND_WORD[section]} profile {name!r}: expected one of "
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
        data = _read_profile_file(path)
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
                        f"{path}: systems entry {name!r}: field {field!r}: unknown "
                        f"{_KIND_WORD[section]} {value!r}: expected one of "
                        f"{', '.join(sorted(tables[section]))}")
        self.devices, self.links, self.systems = (tables["devices"], tables["links"],
                                                  tables["systems"])
        return self


def _read_profile_file(path: Path) -> dict:
    suffix = path.suffix.lower()
    if suffix not in (".json", ".yaml", ".yml"):
        raise ProfileFileError(
            f"{path}: unknown profile file type {path.suffix!r}: expected .json, .yaml or .yml")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ProfileFileError(f"{path}: cannot read the profile file: {error}") from None
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ProfileFileError(f"{path}: not valid JSON: {error}") from None
    else:
        import yaml  # imported here so that simdist starts fast

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ProfileFileError(f"{path}: not valid YAML: {error}") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ProfileFileError(
            f"{path}: expected a mapping with keys devices, links, systems; got {data!r}")
    for key in data:
        if key not in _SECTION_CLASS:
            raise ProfileFileError(
                f"{path}: unknown top-level key {key!r}: expected devices, links or systems")
    return data


def _file_entry(path: Path, section: str, name, fields, existing):
    """One profile of a user file: the existing profile updated, or a new one."""
    where = f"{path}: {section} entry {name!r}"
    if not isinstance(name, str) or not name:
        raise ProfileFileError(f"{where}: a profile name must be a non-empty string")
    fields = {} if fields is None else fields
    if not isinstance(fields, dict):
        raise ProfileFileError(f"{where}: expected a mapping of fields, got {fields!r}")
    cls, allowed = _SECTION_CLASS[section], _FILE_FIELDS[section]
    int_fields = {f.name for f in dataclasses.fields(cls) if f.type == "int"}
    values = {}
    for field, value in fields.items():
        if field not in allowed:
            raise ProfileFileError(
                f"{where}: unknown field {field!r}: expected one of {', '.join(allowed)}")
        try:
            values[field] = _file_value(value, allowed[field], field in int_fields)
        except InvalidArgumentError as error:
            raise ProfileFileError(f"{where}: field {field!r}: {error}") from None
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
            raise OutOfRangeError(f"task order must be >= 0, got {task_order!r}")
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
