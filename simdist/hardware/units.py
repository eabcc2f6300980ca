"""Units: reading and printing byte sizes, bandwidths, FLOP rates and times.

One rule everywhere, on the command line (``--sizes``) and in hardware-profile files alike:

- SI prefixes are powers of 1000: k or K, M, G, T, P. ``64K`` = ``64 kB`` = 64,000 bytes.
- IEC prefixes are powers of 1024: Ki, Mi, Gi, Ti. ``64Ki`` = ``64 KiB`` = 65,536 bytes.

A size is bytes (``B``, ``bytes``, or a prefix alone: ``4M``); a bandwidth is bytes per second
(``B/s``, ``Bps``) or bits (``bit/s``, ``b/s``, ``bps``; 8 bits a byte); a FLOP rate is
``FLOPS`` or ``FLOP/s``; a time is ``ns``, ``us`` (or ``µs``), ``ms`` or ``s``. Printing goes
the other way: byte counts in IEC units (``format_bytes``: "1.5 KiB"), times in the largest
unit they fill (``format_ns``: "12.5 µs"). Pure functions: no files, no clock.
"""

from __future__ import annotations

import math
import numbers
import re
from fractions import Fraction

from simdist.base.errors import InvalidArgumentError, brief

KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40

_PREFIXES = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
             "Ki": KiB, "Mi": MiB, "Gi": GiB, "Ti": TiB}
_BASE_UNITS = {  # unit of the result -> {suffix: factor}; a prefix may precede the suffix
    "FLOP/s": {"FLOPS": 1, "FLOP/s": 1, "flops": 1, "flop/s": 1},
    "B/s": {"B/s": 1, "Bps": 1, "bit/s": Fraction(1, 8), "b/s": Fraction(1, 8),
            "bps": Fraction(1, 8)},
    "B": {"B": 1, "bytes": 1, "": 1},
    "ns": {},
}
_TIME_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9}
_WHAT = {"FLOP/s": "a FLOP rate", "B/s": "a bandwidth", "B": "a size in bytes",
         "ns": "a time"}
_EXAMPLES = {"FLOP/s": "'15.7 TFLOPS'", "B/s": "'900 GB/s' or '100 Gbit/s'",
             "B": "'64 KiB' (65,536 bytes) or '64K' (64,000 bytes)", "ns": "'5 us'"}
_LARGEST = 1e300  # a quantity beyond this is a typo, and a float cannot hold much more
_MAX_EXPONENT = 400
_QUANTITY = re.compile(r"\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(\S*)\s*")


# -- reading ----------------------------------------------------------------------------------

def _unit_factor(suffix: str, unit: str):
    if not suffix:
        return 1
    if unit == "ns":
        return _TIME_UNITS.get(suffix)
    for base, factor in _BASE_UNITS[unit].items():
        prefix = suffix[:len(suffix) - len(base)]
        if suffix.endswith(base) and prefix in _PREFIXES:
            return _PREFIXES[prefix] * factor
    return None


def exact_quantity(value, unit: str) -> Fraction:
    """A number, or a string with a unit, as an exact number of base units (see the module)."""
    if unit not in _BASE_UNITS:
        raise InvalidArgumentError(
            f"unit {unit!r} is not known: expected one of {', '.join(_BASE_UNITS)}")
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not isinstance(value, numbers.Integral) and not math.isfinite(value):
            raise InvalidArgumentError(f"{value!r} is not a finite number")
        return _finite(Fraction(value), value)
    match = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    factor = _unit_factor(match.group(2), unit) if match else None
    if factor is None:
        raise InvalidArgumentError(
            f"cannot read {brief(value)} as {_WHAT[unit]} ({unit}): expected a number or a "
            f"string such as {_EXAMPLES[unit]}")
    exponent = match.group(1).lower().partition("e")[2]
    if exponent and abs(int(exponent)) > _MAX_EXPONENT:  # Fraction would take forever
        raise InvalidArgumentError(f"{brief(value)} is out of range: expected at most "
                                   f"{_LARGEST:g}")
    return _finite(Fraction(match.group(1)) * factor, value)


def _finite(exact: Fraction, value) -> Fraction:
    if abs(exact) > _LARGEST:
        raise InvalidArgumentError(f"{brief(value)} is out of range: expected at most "
                                   f"{_LARGEST:g}")
    return exact


def parse_quantity(value, unit: str) -> int | float:
    """A number, or a string with a unit, in base units: parse_quantity("5 us", "ns") == 5000.

    ``unit`` is "FLOP/s", "B/s", "B" or "ns". SI prefixes (k, M, G, T, P) are powers of 10,
    binary ones (Ki, Mi, Gi, Ti) powers of 2; "Gbit/s" and "Gbps" are bits. Returns an int
    when the value is whole, else a float.
    """
    exact = exact_quantity(value, unit)
    return int(exact) if exact.denominator == 1 else float(exact)


def check_seconds(value, what: str = "timeout") -> float:
    """A timeout in seconds, checked: a finite number > 0 (NaN or inf would switch a hang
    protection off, 0 or less would fire before anything ran)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(f"{what} {brief(value)}: expected a finite number of "
                                   "seconds > 0")
    return float(value)


def parse_size(value) -> int:
    """Bytes, a whole number >= 1: 65536, "64K" (64,000), "64 KiB" (65,536), "4MiB", "1.5 GB"."""
    exact = exact_quantity(value, "B")
    if exact.denominator != 1 or exact < 1:
        raise InvalidArgumentError(
            f"size {value!r} is {float(exact):g} bytes: expected a whole number of bytes >= 1")
    return int(exact)


def parse_sizes(text: str) -> list[int]:
    """Comma-separated sizes, as ``parse_size`` reads each: "1KiB,64K,4MiB"."""
    sizes = [parse_size(part) for part in str(text).split(",") if part.strip()]
    if not sizes:
        raise InvalidArgumentError(f"no size in {text!r}: expected comma-separated sizes such "
                                   "as '1KiB,64KiB,4MiB'")
    return sizes


def parse_count(value, what: str = "count") -> int | float:
    """A count >= 0 with an optional SI prefix (powers of 1000): 25e6, "25M", "1.5G", "340k".
    Returns an int when the count is whole, else a float."""
    match = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        exact = exact_quantity(value, "B")
    elif match and match.group(2) in _PREFIXES and match.group(2) not in ("Ki", "Mi", "Gi", "Ti"):
        exact = exact_quantity(match.group(1) + match.group(2), "B")
    else:
        raise InvalidArgumentError(f"cannot read {brief(value)} as a {what}: expected a number "
                                   "such as 25000000, 25e6 or 25M (k, M, G, T: powers of 1000)")
    if exact < 0:
        raise InvalidArgumentError(f"{what} {brief(value)}: expected a number >= 0")
    return int(exact) if exact.denominator == 1 else float(exact)


def size_option(text) -> int:
    """argparse's ``type=`` of a size option: ``parse_size`` ("4MiB", "64K", 65536), its error
    shown as the option's one-line error."""
    return _option(parse_size, text)


def count_option(text) -> int | float:
    """argparse's ``type=`` of a count option (parameters, FLOPs): ``parse_count`` ("25M")."""
    return _option(parse_count, text)


def _option(parse, text):
    import argparse  # the command line's error type; nothing else of it is used here

    try:
        return parse(text)
    except InvalidArgumentError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# -- printing ---------------------------------------------------------------------------------

_TIME_SCALES = (("ns", 1), ("µs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000))


def time_unit(ns_span: int) -> tuple[str, int]:
    """The unit to show ``ns_span`` nanoseconds in: the largest one it holds at least once."""
    for name, scale in reversed(_TIME_SCALES):
        if abs(ns_span) >= scale:
            return name, scale
    return _TIME_SCALES[0]


def format_ns(ns, unit: tuple[str, int] | None = None, compact: bool = False) -> str:
    """A duration such as ``"12.5 µs"``; ``unit`` (from ``time_unit``) fixes the unit;
    ``compact`` drops digits that are not needed, as an axis tick shows it (``"10 µs"``)."""
    name, scale = unit or time_unit(ns)
    if compact:
        return f"{ns / scale:g} {name}"
    if scale == 1:
        return f"{ns} ns"
    return f"{ns / scale:.1f} {name}"


def format_bytes(n, compact: bool = False) -> str:
    """A byte count such as ``"512 B"`` or ``"1.0 MiB"`` (IEC: powers of 1024); ``compact``
    drops a ".0", as an axis tick shows it (``"1 MiB"``, ``"1.5 MiB"``)."""
    if abs(n) < 1024:
        return f"{n:g} B" if compact else f"{n} B"
    value = float(n)
    for name in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024 or name == "TiB":
            if compact and value == int(value):
                return f"{value:g} {name}"
            return f"{value:.1f} {name}"
    raise AssertionError("unreachable")
