"""Tests for simdist.hardware.units: one rule for sizes, bandwidths, FLOP rates and times, read and
printed (SI prefixes are powers of 1000, IEC prefixes powers of 1024, everywhere)."""


import pytest

from simdist.base.errors import InvalidArgumentError
from simdist.hardware.units import (format_bytes, format_ns, parse_quantity, parse_size,
                                    parse_sizes, time_unit)

from tests.conftest import literal




# ---------------------------------------------------------------------------- reading


@pytest.mark.parametrize("value, unit, expected", [
    ("15.7 TFLOPS", "FLOP/s", 15_700_000_000_000),
    ("19.5TFLOP/s", "FLOP/s", 19_500_000_000_000),
    (1.5e12, "FLOP/s", 1_500_000_000_000),
    ("900 GB/s", "B/s", 900_000_000_000),
    ("100 Gbit/s", "B/s", 12_500_000_000),
    ("10 Gbps", "B/s", 1_250_000_000),
    ("1.25e9", "B/s", 1_250_000_000),
    ("16 GiB", "B", 16 * 2**30),
    ("512 MiB", "B", 512 * 2**20),
    ("40 GB", "B", 40 * 10**9),
    ("5 us", "ns", 5_000),
    ("1.5 µs", "ns", 1_500),
    ("2 ms", "ns", 2_000_000),
    ("250", "ns", 250),
    (0.5, "ns", 0.5),
])
def test_parse_quantity(value, unit, expected):
    assert parse_quantity(value, unit) == expected


@pytest.mark.parametrize("value, unit", [
    ("15.7 TB", "FLOP/s"), ("fast", "B/s"), ("5 weeks", "ns"), ([1], "B"), (True, "B"),
    ("1 XB", "B"),
])
def test_parse_quantity_errors(value, unit):
    with pytest.raises(InvalidArgumentError, match=literal(repr(value))):
        parse_quantity(value, unit)


@pytest.mark.parametrize("text, expected", [
    ("65536", 65_536), (4096, 4096), ("64K", 64_000), ("64k", 64_000), ("64 kB", 64_000),
    ("64KB", 64_000), ("64Ki", 65_536), ("64 KiB", 65_536), ("4M", 4_000_000),
    ("4MiB", 4 << 20), ("1.5 GB", 1_500_000_000), ("1 GiB", 1 << 30), ("2 bytes", 2),
])
def test_parse_size_si_is_1000_iec_is_1024(text, expected):
    assert parse_size(text) == expected


def test_a_size_in_a_profile_file_reads_the_same_as_on_the_command_line():
    for text in ("64K", "64KiB", "4 MB", "4 MiB", "16 GiB"):
        assert parse_quantity(text, "B") == parse_size(text)


@pytest.mark.parametrize("text", ["0", "1.5", "0.5 B", "-4K", "64 KiX", "4mib", "fast", ""])
def test_parse_size_errors_name_the_value_and_what_was_expected(text):
    with pytest.raises(InvalidArgumentError, match=literal(repr(text))) as info:
        parse_size(text)
    assert "expected" in str(info.value) and "\n" not in str(info.value)


def test_parse_sizes():
    assert parse_sizes("8,1KiB, 1K ,4MiB,") == [8, 1024, 1000, 4 << 20]
    with pytest.raises(InvalidArgumentError, match=literal("' , '")):
        parse_sizes(" , ")


# ---------------------------------------------------------------------------- printing


def test_time_unit_boundaries():
    assert time_unit(0) == ("ns", 1)
    assert time_unit(999) == ("ns", 1)
    assert time_unit(1_000) == ("µs", 1_000)
    assert time_unit(999_999) == ("µs", 1_000)
    assert time_unit(10**6) == ("ms", 10**6)
    assert time_unit(10**9 - 1) == ("ms", 10**6)
    assert time_unit(10**9) == ("s", 10**9)
    assert time_unit(10**13) == ("s", 10**9)


def test_format_helpers():
    assert format_ns(0) == "0 ns"
    assert format_ns(999) == "999 ns"
    assert format_ns(12_500) == "12.5 µs"
    assert format_ns(2_500_000_000) == "2.5 s"
    assert format_ns(500, ("µs", 1_000)) == "0.5 µs"
    assert format_bytes(0) == "0 B"
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(1024 * 1024) == "1.0 MiB"
    assert format_bytes(3 * 1024**3) == "3.0 GiB"


def test_compact_format_as_axis_ticks_show_it():
    assert format_bytes(8.0, compact=True) == "8 B"
    assert format_bytes(1024, compact=True) == "1 KiB"
    assert format_bytes(1536, compact=True) == "1.5 KiB"
    assert format_bytes(32 << 20, compact=True) == "32 MiB"
    assert format_ns(100.0, compact=True) == "100 ns"
    assert format_ns(10_000, compact=True) == "10 µs"
    assert format_ns(1_500_000, compact=True) == "1.5 ms"
    assert format_ns(2e9, compact=True) == "2 s"
