"""Tests for simdist.hardware.devices: cost formulas, built-in profiles (simdist.hardware.catalog), user files,
layout, hardware."""

import dataclasses
import json
import math
import re

import pytest

from simdist.hardware.devices import (DeviceProfile, Hardware, HardwareCatalog, Layout,
                                      LinkProfile, ProfileFileError, SystemProfile,
                                      UnknownProfileError, file_record)
from simdist.hardware.host_costs import HostCosts
from simdist.base.errors import InvalidArgumentError, NotFoundError, OutOfRangeError

from tests.conftest import literal




@pytest.fixture
def catalog():
    return HardwareCatalog.default()


# ---------------------------------------------------------------------------- cost formulas


def test_link_transfer_10gbe_one_mib(catalog):
    link = catalog.link("10gbe")
    assert link.bandwidth == 1_250_000_000 and link.latency_ns == 10_000
    # ceil(2**20 * 1e9 / 1.25e9) = ceil(838860.8), and the port's 2 us per message
    assert link.message_ns == 2_000 and link.flight_ns == 8_000
    assert link.serialization_ns(2**20) == 2_000 + 838_861
    assert link.transfer_time_ns(2**20) == 10_000 + 838_861
    assert link.transfer_time_ns(0) == link.latency_ns


def test_serialization_rounds_up_with_integers():
    link = LinkProfile("l", "network", latency_ns=7, bandwidth=3)
    assert link.serialization_ns(1) == 333_333_334  # 1e9 / 3 rounded up
    assert link.serialization_ns(3) == 10**9
    assert link.transfer_time_ns(1) == 7 + 333_333_334
    big = LinkProfile("big", "nvlink", latency_ns=1, bandwidth=10**12)
    assert big.serialization_ns(1) == 1  # 0.001 ns rounds up to 1
    assert isinstance(big.serialization_ns(10**15), int)


def test_pcie3_is_128b_130b_theoretical(catalog):
    assert catalog.link("pcie3-x16").bandwidth == 8 * 10**9 * 16 * 128 // 130 // 8
    assert catalog.link("nvlink2").bandwidth == 150 * 10**9
    assert catalog.link("nvlink3").bandwidth == 300 * 10**9


def test_compute_time_compute_bound():
    dev = DeviceProfile("d", "GPU", peak_flops=1e12, mem_bandwidth=10**9, memory=2**30,
                        launch_overhead_ns=5_000, efficiency=0.5)
    # 1e9 FLOP at 0.5e12 FLOP/s = 2 ms; 1000 bytes at 1 GB/s = 1 us
    assert dev.compute_time_ns(1e9, nbytes=1000) == 2_000_000 + 5_000
    assert dev.compute_time_ns(1e9, efficiency=1.0) == 1_000_000 + 5_000
    assert dev.compute_time_ns(3_000) == 6 + 5_000  # 3000 / 0.5e12 s = 6 ns
    assert dev.compute_time_ns(3_001) == 7 + 5_000  # 6.002 ns rounds up
    assert dev.compute_time_ns(1) == 1 + 5_000  # 0.002 ns rounds up


def test_compute_time_memory_bound():
    dev = DeviceProfile("d", "CPU", peak_flops=1e12, mem_bandwidth=3 * 10**9, memory=2**30,
                        launch_overhead_ns=100)
    # 1000 FLOP = 2 ns; 10 bytes at 3 GB/s = 3.33 ns -> 4
    assert dev.compute_time_ns(1000, nbytes=10) == 4 + 100
    assert dev.compute_time_ns(0, nbytes=3 * 10**9) == 10**9 + 100
    assert dev.compute_time_ns(0) == 100  # nothing to do: just the overhead
    assert isinstance(dev.compute_time_ns(12345.6, 789), int)


def test_compute_time_builtin_v100(catalog):
    v100 = catalog.device("v100")
    flops = 2 * 1024**3  # a 1024^3 matmul
    expected = math.ceil(flops * 1e9 / (15.7e12 * 0.5)) + v100.launch_overhead_ns
    assert v100.compute_time_ns(flops) == expected


@pytest.mark.parametrize("call, text", [
    (lambda d: d.compute_time_ns(-1), "-1"),
    (lambda d: d.compute_time_ns(1, nbytes=-8), "-8"),
    (lambda d: d.compute_time_ns(1, nbytes=1.5), "1.5"),
    (lambda d: d.compute_time_ns(1, efficiency=1.5), "1.5"),
    (lambda d: d.compute_time_ns(1, efficiency=0), "0"),
])
def test_compute_time_bad_arguments(catalog, call, text):
    with pytest.raises(InvalidArgumentError, match=literal(text)):
        call(catalog.device("cpu-core"))


def test_serialization_bad_nbytes(catalog):
    with pytest.raises(InvalidArgumentError, match=literal("-1")):
        catalog.link("shm").serialization_ns(-1)
    with pytest.raises(InvalidArgumentError, match=literal("'10'")):
        catalog.link("shm").transfer_time_ns("10")


# ---------------------------------------------------------------------------- profiles


@pytest.mark.parametrize("kwargs, text", [
    ({"device_type": "FPGA"}, "'FPGA'"),
    ({"peak_flops": 0}, "peak_flops"),
    ({"peak_flops": -1e12}, "-1000000000000.0"),
    ({"mem_bandwidth": 0}, "mem_bandwidth"),
    ({"mem_bandwidth": 9e11}, "900000000000.0"),
    ({"memory": -4}, "-4"),
    ({"launch_overhead_ns": -1}, "launch_overhead_ns"),
    ({"efficiency": 2}, "efficiency"),
    ({"name": ""}, "device name"),
])
def test_device_profile_validation(catalog, kwargs, text):
    with pytest.raises(InvalidArgumentError, match=literal(text)):
        dataclasses.replace(catalog.device("v100"), **kwargs)


@pytest.mark.parametrize("kwargs, text", [
    ({"latency_ns": 0}, "latency_ns must be >= 1, got 0"),
    ({"latency_ns": -5}, "-5"),
    ({"latency_ns": 1.5}, "1.5"),
    ({"bandwidth": 0}, "bandwidth"),
    ({"kind": "carrier-pigeon"}, "'carrier-pigeon'"),
])
def test_link_profile_validation(catalog, kwargs, text):
    with pytest.raises(InvalidArgumentError, match=literal(text)):
        dataclasses.replace(catalog.link("10gbe"), **kwargs)


def test_system_profile_validation():
    with pytest.raises(InvalidArgumentError, match=literal("network")):
        SystemProfile("s", "v100", "nvlink2", "")


def test_builtin_profiles_are_positive(catalog):
    assert set(catalog.devices) >= {"cpu-core", "gtx-1080-ti", "k80", "v100", "a100", "h100",
                                    "tpu-v3-core"}
    assert set(catalog.links) >= {"1gbe", "10gbe", "25gbe", "100gbe", "pcie3-x16", "nvlink2",
                                  "nvlink3", "shm"}
    for name, dev in catalog.devices.items():
        assert dev.name == name and dev.device_type in ("CPU", "GPU", "TPU")
        assert dev.peak_flops > 0 and dev.mem_bandwidth > 0 and dev.memory > 0
        assert dev.launch_overhead_ns > 0 and 0 < dev.efficiency <= 1
        assert all(isinstance(x, int) for x in (dev.mem_bandwidth, dev.memory,
                                                 dev.launch_overhead_ns))
    for name, link in catalog.links.items():
        assert link.name == name and link.latency_ns > 0 and link.bandwidth > 0
        assert isinstance(link.latency_ns, int) and isinstance(link.bandwidth, int)
        if link.kind == "network":
            assert link.latency_ns >= 1_000
    assert catalog.device("tpu-v3-core").device_type == "TPU"
    assert catalog.device("a100").peak_flops == 19.5e12
    assert catalog.link("1gbe").bandwidth == 10**9 // 8


def test_every_system_resolves(catalog):
    assert set(catalog.systems) >= {"cpu", "cpu-1gbe", "gtx1080ti-pcie-10gbe",
                                    "k80-pcie-10gbe", "v100-nvlink2-25gbe",
                                    "a100-nvlink3-100gbe", "tpu-v3"}
    assert any(name.startswith("h100-") for name in catalog.systems)
    for name, system in catalog.systems.items():
        hw = Hardware.from_catalog(catalog, name)
        assert hw.system is system and hw.device.name == system.device
        assert hw.intra_link.name == system.intra_link and hw.network.name == system.network
        assert system.description
    cpu = Hardware.from_catalog(catalog)
    assert (cpu.system.name, cpu.device.name, cpu.intra_link.name, cpu.network.name) == (
        "cpu", "cpu-core", "shm", "10gbe")
    assert cpu.layout == Layout()


def test_default_catalog_is_fresh():
    first = HardwareCatalog.default()
    first.devices.clear()
    assert "v100" in HardwareCatalog.default().devices


def test_unknown_profile_errors(catalog):
    with pytest.raises(UnknownProfileError, match=literal("unknown hardware profile 'v200': "
                                                    "expected one of a100-nvlink3-100gbe, cpu")):
        catalog.system("v200")
    with pytest.raises(NotFoundError, match=literal("'gtx-2080': expected one of a100, cpu-core")):
        catalog.device("gtx-2080")
    with pytest.raises(UnknownProfileError, match=literal("'2gbe'")) as info:
        catalog.link("2gbe")
    assert "10gbe, 1gbe" in str(info.value)  # sorted
    with pytest.raises(UnknownProfileError, match=literal("'nope'")):
        Hardware.from_catalog(catalog, "nope")


def test_names_sorted(catalog):
    names = catalog.names()
    assert set(names) == {"devices", "links", "systems"}
    for kind, listed in names.items():
        assert listed == sorted(getattr(catalog, kind))
    assert "cpu" in names["systems"]


# ---------------------------------------------------------------------------- user files


def write(tmp_path, name, data):
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data)
    elif name.endswith(".json"):
        path.write_text(json.dumps(data))
    else:
        import yaml

        path.write_text(yaml.safe_dump(data))
    return path


def test_load_json_overrides_and_adds(tmp_path, catalog):
    path = write(tmp_path, "hw.json", {
        "devices": {"v100": {"efficiency": 0.8},
                    "my-gpu": {"device_type": "GPU", "peak_flops": 2e12,
                               "mem_bandwidth": 10**11, "memory": 2**33,
                               "launch_overhead_ns": 3000}},
        "links": {"10gbe": {"latency_ns": 20000}},
        "systems": {"mine": {"device": "my-gpu", "intra_link": "pcie3-x16",
                             "network": "10gbe"}},
    })
    assert catalog.load_file(path) is catalog
    v100 = catalog.device("v100")
    assert v100.efficiency == 0.8 and v100.peak_flops == 15.7e12  # untouched fields kept
    assert catalog.link("10gbe") == LinkProfile("10gbe", "network", 20000, 1_250_000_000, 2000)
    mine = Hardware.from_catalog(catalog, "mine")
    assert mine.device == DeviceProfile("my-gpu", "GPU", 2e12, 10**11, 2**33, 3000)
    assert mine.device.efficiency == 0.5 and mine.system.description == ""
    assert mine.network.latency_ns == 20000


def test_every_builtin_profile_written_as_a_file_record_loads_back_the_same(tmp_path,
                                                                          catalog):
    # an empty catalog: every profile comes from the file, so a field file_record left
    # out would be missing (a new profile needs them all) or back at its default
    document = {section: {name: file_record(profile)
                          for name, profile in getattr(catalog, section).items()}
                for section in ("devices", "links", "systems")}
    loaded = HardwareCatalog().load_file(write(tmp_path, "all.json", document))
    for section in ("devices", "links", "systems"):
        assert getattr(loaded, section) == getattr(catalog, section)
    assert "packed_tensor_overhead_ns" in file_record(catalog.device("v100"))


def test_a_devices_host_costs_are_its_fields_in_a_file(tmp_path, catalog):
    """A file names each host cost as a field of its device: file_record writes them so, and
    a file that sets one cost of a profile keeps the profile's other costs."""
    costs = HostCosts(step_overhead_ns=1_000, input_kb_ns=3)
    v100 = dataclasses.replace(catalog.device("v100"), host_costs=costs)
    record = file_record(v100)
    assert (record["step_overhead_ns"], record["input_kb_ns"]) == (1_000, 3)
    assert "host_costs" not in record
    catalog.devices["v100"] = v100
    catalog.load_file(write(tmp_path, "hw.json", {"devices": {
        "v100": {"op_overhead_ns": "2 us"}, "copy": record}}))
    assert catalog.device("v100").host_costs == dataclasses.replace(costs, op_overhead_ns=2_000)
    assert catalog.device("copy") == dataclasses.replace(v100, name="copy")


def test_load_yaml_with_human_units(tmp_path):
    text = """
devices:
  tiny:
    device_type: CPU
    peak_flops: 15.7 TFLOPS
    mem_bandwidth: 900 GB/s
    memory: 16 GiB
    launch_overhead_ns: 5 us
    efficiency: 0.25
links:
  ib:
    kind: network
    latency_ns: 1.5 us
    bandwidth: 200 Gbit/s
  shm:
    bandwidth: 1.25e9
systems:
  cpu:
    network: ib
    description: my lab
"""
    for suffix in (".yaml", ".yml"):
        catalog = HardwareCatalog.from_file(write(tmp_path, "hw" + suffix, text))
        assert catalog.device("tiny") == DeviceProfile(
            "tiny", "CPU", 15.7e12, 900 * 10**9, 16 * 2**30, 5_000, 0.25)
        assert catalog.link("ib") == LinkProfile("ib", "network", 1_500, 25 * 10**9)
        assert catalog.link("shm").bandwidth == 1_250_000_000
        assert catalog.link("shm").latency_ns == HardwareCatalog.default().link("shm").latency_ns
        hw = Hardware.from_catalog(catalog)
        assert hw.network.name == "ib" and hw.system.description == "my lab"
        assert hw.device.name == "cpu-core"


def test_empty_yaml_changes_nothing(tmp_path, catalog):
    catalog.load_file(write(tmp_path, "empty.yaml", ""))
    assert catalog.names() == HardwareCatalog.default().names()


BAD_FILES = [
    ("hw.txt", "{}", "hw.txt", "'.txt'"),
    ("hw.json", "{not json", "not valid JSON", "hw.json"),
    ("hw.yaml", "devices: [unclosed", "not valid YAML", "hw.yaml"),
    ("hw.json", [1, 2], "expected a mapping", "[1, 2]"),
    ("hw.json", {"gpus": {}}, "unknown top-level key 'gpus'", "devices, links or systems"),
    ("hw.json", {"devices": [1]}, "'devices' must map", "[1]"),
    ("hw.json", {"devices": {"v100": {"flops": 1}}}, "devices entry 'v100'",
     "unknown field 'flops': expected one of device_type, peak_flops"),
    ("hw.json", {"devices": {"v100": 5}}, "devices entry 'v100'", "expected a mapping"),
    ("hw.json", {"devices": {"v100": {"peak_flops": -1e12}}}, "field 'peak_flops'",
     "must not be negative, got -1000000000000.0"),
    ("hw.json", {"devices": {"v100": {"peak_flops": 0}}}, "devices entry 'v100'",
     "peak_flops must be a number > 0, got 0"),
    ("hw.json", {"devices": {"v100": {"memory": "16 GiBs"}}}, "field 'memory'", "'16 GiBs'"),
    ("hw.json", {"devices": {"v100": {"efficiency": 1.5}}}, "devices entry 'v100'", "1.5"),
    ("hw.json", {"devices": {"v100": {"device_type": "QPU"}}}, "'QPU'", "CPU, GPU, TPU"),
    ("hw.json", {"devices": {"v100": {"device_type": 3}}}, "field 'device_type'",
     "expected a string, got 3"),
    ("hw.json", {"devices": {"new": {"device_type": "GPU"}}}, "devices entry 'new'",
     "missing peak_flops, mem_bandwidth, memory, launch_overhead_ns"),
    ("hw.json", {"links": {"10gbe": {"latency_ns": 0}}}, "links entry '10gbe'",
     "latency_ns must be >= 1, got 0"),
    ("hw.json", {"links": {"10gbe": {"latency_ns": "-5 us"}}}, "field 'latency_ns'", "'-5 us'"),
    ("hw.json", {"links": {"10gbe": {"bandwidth": True}}}, "field 'bandwidth'", "True"),
    ("hw.json", {"links": {"x": {"kind": "pcie", "latency_ns": 5}}}, "links entry 'x'",
     "missing bandwidth"),
    ("hw.json", {"systems": {"cpu": {"device": "v200"}}}, "systems entry 'cpu'",
     "unknown device 'v200': expected one of a100"),
    ("hw.json", {"systems": {"s": {"device": "v100", "intra_link": "nvlink9",
                                   "network": "10gbe"}}}, "field 'intra_link'", "'nvlink9'"),
    ("hw.json", {"systems": {"s": {"device": "v100"}}}, "systems entry 's'",
     "missing intra_link, network"),
    ("hw.yaml", "devices:\n  7: {}\n", "devices entry 7", "non-empty string"),
]


@pytest.mark.parametrize("name, data, text1, text2", BAD_FILES)
def test_bad_profile_files(tmp_path, catalog, name, data, text1, text2):
    path = write(tmp_path, name, data)
    with pytest.raises(ProfileFileError, match=literal(text1)) as info:
        catalog.load_file(path)
    message = str(info.value)
    assert text2 in message and str(path) in message
    assert isinstance(info.value, InvalidArgumentError)
    assert catalog.names() == HardwareCatalog.default().names()  # nothing changed


def test_failed_load_changes_nothing(tmp_path, catalog):
    path = write(tmp_path, "hw.json", {"links": {"10gbe": {"latency_ns": 1}},
                                       "systems": {"cpu": {"device": "nope"}}})
    with pytest.raises(ProfileFileError):
        catalog.load_file(path)
    assert catalog.link("10gbe").latency_ns == 10_000


def test_missing_file(tmp_path):
    with pytest.raises(ProfileFileError, match=literal("missing.yaml")):
        HardwareCatalog.from_file(tmp_path / "missing.yaml")


# ---------------------------------------------------------------------------- layout


def test_layout_mapping():
    layout = Layout(tasks_per_machine=3)
    assert [layout.machine_of(i) for i in range(7)] == [0, 0, 0, 1, 1, 1, 2]
    assert [layout.num_machines(n) for n in (0, 1, 3, 4, 6, 7)] == [0, 1, 1, 2, 2, 3]
    assert layout.same_machine(0, 2) and not layout.same_machine(2, 3)
    assert Layout().num_machines(5) == 5 and not Layout().same_machine(0, 1)
    assert Layout().devices_per_task == 1


@pytest.mark.parametrize("kwargs, text", [
    ({"tasks_per_machine": 0}, "tasks_per_machine must be >= 1, got 0"),
    ({"devices_per_task": -2}, "devices_per_task must be >= 1, got -2"),
    ({"tasks_per_machine": 1.5}, "1.5"),
])
def test_layout_validation(kwargs, text):
    with pytest.raises(InvalidArgumentError, match=literal(text)):
        Layout(**kwargs)


def test_layout_bad_order():
    with pytest.raises(OutOfRangeError, match=literal("-1")):
        Layout().machine_of(-1)


def test_link_between_and_min_latency(catalog):
    hw = Hardware.from_catalog(catalog, "v100-nvlink2-25gbe", Layout(tasks_per_machine=2))
    assert hw.link_between(0, 1).name == "nvlink2"
    assert hw.link_between(1, 2).name == "25gbe"
    assert hw.link_between(3, 2).name == "nvlink2"
    assert hw.min_latency_ns(1) == 5_000  # a single task: the network latency
    assert hw.min_latency_ns(2) == 2_000  # one machine: only NVLink is used
    assert hw.min_latency_ns(3) == 2_000
    one_per_machine = Hardware.from_catalog(catalog, "v100-nvlink2-25gbe")
    assert one_per_machine.link_between(0, 1).name == "25gbe"
    assert one_per_machine.min_latency_ns(4) == 5_000  # NVLink never used


def test_min_latency_intra_slower_than_network():
    slow = LinkProfile("slow", "pcie", latency_ns=50_000, bandwidth=10**9)
    fast = LinkProfile("fast", "network", latency_ns=1_000, bandwidth=10**9)
    dev = HardwareCatalog.default().device("cpu-core")
    system = SystemProfile("s", "cpu-core", "slow", "fast")
    hw = Hardware(system, dev, slow, fast, Layout(tasks_per_machine=4))
    assert hw.min_latency_ns(4) == 50_000  # one machine: only the intra link
    assert hw.min_latency_ns(5) == 1_000
    with pytest.raises(InvalidArgumentError, match=literal("-1")):
        hw.min_latency_ns(-1)
