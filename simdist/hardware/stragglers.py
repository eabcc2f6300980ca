"""Stragglers as distributions: how much longer than its compute a worker's step takes.

Real step times have a heavy right tail (another job on the machine, a garbage collection,
a slow disk, thermal throttling): Dean and Barroso, "The Tail at Scale", 2013; Chen et al.,
"Revisiting Distributed Synchronous SGD", 2016 (the backup workers of TF's
``SyncReplicasOptimizer``, Figure 3: a long tail of step times on 100 workers). A
``Stragglers`` record draws a factor per worker and step, seeded, that multiplies the
step's compute time:

- ``lognormal:SIGMA``: exp(SIGMA x N(0, 1)); median 1, so a typical step keeps its time and
  a few take much longer (``lognormal:0.3``: 1 step in 20 is 1.6x or more).
- ``exponential:MEAN``: 1 + Exp(MEAN), the shifted exponential of the coded-computation
  literature (Lee et al. 2018, "Speeding Up Distributed Machine Learning Using Codes"): never
  faster, on average MEAN of a step more.
- ``empirical:FILE``: a measured step time drawn at random from FILE (numbers, one or more a
  line, units allowed: ``12.5ms``; ``#`` starts a comment), divided by their median, so a
  measurement made on another machine gives its shape to the simulated step.

``parse_stragglers("lognormal:0.3")`` reads a spec; ``Stragglers.factors(seed, worker, n)``
draws a worker's n factors from a generator of its own (numpy's, seeded by (seed, worker)),
the same on every MPI rank. Pure: no simulation.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np

from simdist.base.errors import InvalidArgumentError, brief
from simdist.base.files import read_text
from simdist.hardware.units import parse_quantity

KINDS = ("none", "lognormal", "exponential", "empirical")
#: a lognormal sigma or an exponential mean beyond this is a typo (e^(10 sigma) overflows)
MAX_SPREAD = 10.0
#: the most measured step times a file may hold
MAX_SAMPLES = 1_000_000
#: a tag mixed into the seed so that the stragglers' draws are their own stream
_STREAM = 0x5742


@dataclass(frozen=True)
class Stragglers:
    """A distribution of step-time factors (see the module): ``kind`` with its ``spread``
    (lognormal sigma, exponential mean) or its measured ``samples`` (already divided by
    their median)."""

    kind: str = "none"
    spread: float = 0.0
    samples: tuple[float, ...] = ()
    source: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise InvalidArgumentError(f"stragglers {self.kind!r}: expected one of "
                                       f"{', '.join(KINDS)}")
        if self.kind in ("lognormal", "exponential") and not (
                math.isfinite(self.spread) and 0 <= self.spread <= MAX_SPREAD):
            raise InvalidArgumentError(f"stragglers {self.kind}:{self.spread!r}: expected a "
                                       f"number >= 0 and <= {MAX_SPREAD:g}")
        if self.kind == "empirical" and not self.samples:
            raise InvalidArgumentError("stragglers empirical: no measured step times")

    @property
    def active(self) -> bool:
        return self.kind != "none"

    @staticmethod
    def generator(seed: int, worker: int) -> np.random.Generator:
        """Worker ``worker``'s own generator of factors (numpy's, seeded by (seed, worker))."""
        return np.random.default_rng([_STREAM, seed, worker])

    def draw(self, rng: np.random.Generator) -> float:
        """One step's factor from ``rng`` (``generator``), for a step count not known
        ahead (a TF1 worker's runs)."""
        if not self.active:
            return 1.0
        if self.kind == "lognormal":
            return float(np.exp(self.spread * rng.standard_normal()))
        if self.kind == "exponential":
            return 1.0 + float(rng.exponential(self.spread)) if self.spread else 1.0
        return float(self.samples[int(rng.integers(0, len(self.samples)))])

    def factors(self, seed: int, worker: int, n: int) -> list[float]:
        """Worker ``worker``'s factors for ``n`` steps, from its own seeded generator."""
        if not self.active:
            return [1.0] * n
        rng = self.generator(seed, worker)
        if self.kind == "lognormal":
            drawn = np.exp(self.spread * rng.standard_normal(n))
        elif self.kind == "exponential":
            drawn = 1.0 + rng.exponential(self.spread, n) if self.spread else np.ones(n)
        else:
            drawn = np.asarray(self.samples)[rng.integers(0, len(self.samples), n)]
        return [float(x) for x in drawn]

    def describe(self) -> str:
        if self.kind == "lognormal":
            return f"lognormal stragglers (sigma {self.spread:g})"
        if self.kind == "exponential":
            return f"exponential stragglers (mean {self.spread:g} of a step)"
        if self.kind == "empirical":
            return f"stragglers from {len(self.samples)} measured step times ({self.source})"
        return "no stragglers"


NONE = Stragglers()


def parse_stragglers(text) -> Stragglers:
    """``none``, ``lognormal:SIGMA``, ``exponential:MEAN`` (or ``exp:MEAN``) or
    ``empirical:FILE``, as ``--stragglers`` takes it."""
    kind, _, value = str(text).strip().partition(":")
    kind = {"exp": "exponential", "lognorm": "lognormal"}.get(kind.lower(), kind.lower())
    if kind == "none" and not value:
        return NONE
    if kind in ("lognormal", "exponential"):
        try:
            spread = float(value)
        except ValueError:
            raise InvalidArgumentError(f"stragglers {brief(text)}: expected {kind}:NUMBER, "
                                       "e.g. lognormal:0.3 or exponential:0.1") from None
        return Stragglers(kind, spread)
    if kind == "empirical" and value:
        return Stragglers("empirical", samples=read_step_times(value), source=value)
    raise InvalidArgumentError(f"stragglers {brief(text)}: expected none, lognormal:SIGMA, "
                               "exponential:MEAN or empirical:FILE")


def stragglers_option(text) -> Stragglers:
    """argparse's ``type=`` of ``--stragglers``: its error as the option's one-line error."""
    import argparse  # the command line's error type; nothing else of it is used here

    try:
        return parse_stragglers(text)
    except InvalidArgumentError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def read_step_times(path) -> tuple[float, ...]:
    """The measured step times in ``path``, divided by their median (at least 2, all > 0)."""
    times = []
    for number, line in enumerate(read_text(path, "step times").splitlines(), 1):
        for token in line.split("#")[0].replace(",", " ").split():
            try:
                value = float(parse_quantity(token, "ns"))
            except InvalidArgumentError:
                raise InvalidArgumentError(f"step times file '{path}' line {number}: "
                                           f"{brief(token)} is not a time (e.g. 0.125, "
                                           "12.5ms)") from None
            if not value > 0:
                raise InvalidArgumentError(f"step times file '{path}' line {number}: "
                                           f"{brief(token)}: expected a time > 0")
            times.append(value)
            if len(times) > MAX_SAMPLES:
                raise InvalidArgumentError(f"step times file '{path}': more than "
                                           f"{MAX_SAMPLES:,} times")
    if len(times) < 2:
        raise InvalidArgumentError(f"step times file '{path}' holds {len(times)} time(s): "
                                   "expected at least 2")
    median = statistics.median(times)
    return tuple(t / median for t in times)
