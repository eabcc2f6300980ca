"""The rules for the options that commands and the Python API share: seeds, learning rates,
counts and sizes with their caps, times, probabilities.

One function per rule, each raising one line that names the value and what was expected
(``InvalidArgumentError``; ``ResourceExhaustedError`` for arrays or a run past their memory
cap).
``simdist run`` (the exercise spec, ``simdist.training.exercises``), ``simdist ps`` and
``train_on_ps`` (``simdist.training.ps_spec``), ``loader_trainer``, ``ClusterSpec`` and
realdist's ``real_train_on_ps`` call them, so an option is held to one rule everywhere. The
limits of a run (events, simulated time) are ``simdist.sim.limits``'s.
"""

from __future__ import annotations

import math
import numbers

from simdist.base.errors import InvalidArgumentError, ResourceExhaustedError, brief

#: the largest learning rate accepted (plain SGD diverges long before it)
MAX_LEARNING_RATE = 1e3
#: seeds are int64 in TF (``tf.random.set_seed``, an op's seed)
MAX_SEED = 2**63 - 1
#: the most tasks a cluster may have: each is a simulated process with its state and
#: queues (and above 63,000 the counted form's localhost ports run past 65535)
MAX_TASKS = 65_536
#: the most bytes of arrays a program may build from its size options (x4 or so in
#: copies while it trains): well inside a 4 GiB machine
MAX_ARRAY_BYTES = 256 << 20
#: the most memory a whole run may take by its measured estimate (``check_footprint``):
#: with Python and numpy's own (about 100 MB) still inside a 4 GiB machine
MAX_RUN_BYTES = 3 << 30


def is_int(value) -> bool:
    """An int (numpy's too), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(value, label: str, least: int = 1, most: int | None = None,
              why: str = "") -> int:
    """An int >= ``least`` and, with ``most``, <= ``most`` (``why``: the reason for the cap
    and how to go past it, if at all)."""
    if not is_int(value) or value < least:
        raise InvalidArgumentError(f"{label} must be an int >= {least}, got {brief(value)}")
    if most is not None and value > most:
        raise InvalidArgumentError(f"{label} {value:,} is more than {most:,}"
                                   + (f": {why}" if why else ""))
    return int(value)


def check_seed(value, label: str = "seed") -> int:
    """A random seed: an int >= 0 (numpy's generators refuse negative seeds) and below
    2**63 (TF's seeds are int64)."""
    if not is_int(value) or not 0 <= value <= MAX_SEED:
        raise InvalidArgumentError(f"{label} must be an int >= 0 and < 2**63, got "
                                   f"{brief(value)}")
    return int(value)


def check_number(value, label: str, least: float = 0.0, most: float | None = None,
                 what: str = "a number") -> float:
    """A finite real number >= ``least`` (and <= ``most``); ``what`` says what it counts
    (e.g. "a time in us")."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or value < least or (most is not None
                                                              and value > most):
        bound = f" and <= {most:g}" if most is not None else ""
        raise InvalidArgumentError(f"{label} must be {what}, finite, >= {least:g}{bound}, got "
                                   f"{brief(value)}")
    return float(value)


def check_learning_rate(value, label: str = "learning_rate") -> float:
    """A learning rate: a finite number > 0 and <= ``MAX_LEARNING_RATE``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or not 0 < value <= MAX_LEARNING_RATE:
        raise InvalidArgumentError(f"{label} must be a finite number > 0 and <= "
                                   f"{MAX_LEARNING_RATE:g}, got {brief(value)}")
    return float(value)


def check_probability(value, label: str) -> float:
    """A probability: a number from 0 to 1."""
    return check_number(value, label, 0.0, 1.0, "a probability")


def check_time(value, label: str, unit: str, unit_ns: int, most_ns: int | None) -> int:
    """A simulated time given in ``unit`` (``unit_ns`` ns each): finite, >= 0 and, with
    ``most_ns``, no longer than the run's limit on simulated time (a run stops there, so a
    longer step or stall could never end); returns it in whole ns."""
    check_number(value, label, 0.0, None, f"a time in {unit}")
    ns = round(value * unit_ns)
    if most_ns is not None and ns > most_ns:
        raise InvalidArgumentError(
            f"{label} {value:g} {unit} is longer than the run's limit on simulated time, "
            f"{most_ns / 1e9:g} s (--max-sim-time, max_sim_time of RunLimits), where it "
            "would stop: give a shorter time, or raise that limit")
    return ns


def check_memory(nbytes: int, what: str, fix: str, most: int = MAX_ARRAY_BYTES) -> None:
    """Arrays of ``nbytes`` that ``what`` (e.g. "workers x examples x features x 4 bytes")
    makes: refused past ``most`` with ``fix`` (what to give instead)."""
    if nbytes > most:
        raise ResourceExhaustedError(
            f"{what} = {_size(nbytes)} of arrays, more than simdist's cap of {_size(most)} "
            f"(training holds several copies; the cap keeps a run well inside a 4 GiB "
            f"machine): {fix}")


def check_footprint(nbytes: int, given: str, estimate: str, fix: str,
                    most: int = MAX_RUN_BYTES) -> None:
    """A run that the options ``given`` (e.g. "--tasks 100000") make take about ``nbytes``
    of memory (``estimate``: how, from measurements): refused past ``most`` with ``fix``."""
    if nbytes > most:
        raise ResourceExhaustedError(
            f"{given}: about {_size(nbytes)} of memory ({estimate}), more than DistLab's cap "
            f"of {_size(most)} for one run (it keeps a run inside a 4 GiB machine): {fix}")


def _size(nbytes: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f}".removesuffix(".0") + f" {unit}"
    return f"{nbytes} bytes"
