"""Calibration: the hardware profile whose simulated step times best match measured ones.

The step-time model is the simulator itself. A synchronous step of an exercise with R local
replicas on each of W workers costs, in the simulator (``simdist.training.sync_loop``):

    host_step    = step_overhead + R x replica_overhead + input KB x input_kb
                   (+ input_pipeline_overhead when the strategy wraps the dataset: all but
                   the default one; + distributed_step_overhead for MirroredStrategy,
                   MultiWorkerMirroredStrategy; + multi_worker_step_overhead for the latter)
    compute      = R x (num_ops x (op_overhead + (W - 1) x shared_op_overhead)
                        + FLOPs per replica x flop_time)
                   (the W worker processes of realdist's localhost cluster share this
                   machine's cores: an op waits the longer the more there are)
                   (the R replicas' passes one after another when the devices are
                   ``virtual``: logical CPUs cut from one machine's cores)
    all-reduce   = collective_overhead + tensors x packed_tensor_overhead on every replica (the
                   mirrored strategies start collective kernels even alone, and pack a
                   step's tensors into one), then the ring over the R x W
                   replicas: 2(RW - 1) messages of latency + bytes / bandwidth (between
                   devices of a worker: the intra link; between workers: the network), for
                   the gradients and for the loss
    update       = R x (variables x (op_overhead + (W - 1) x shared_op_overhead)
                        + the update's roofline time)

(a host cost's parameter is the ``HostCosts`` field of that name and ``_ns``), so it is a sum
of sixteen parameters, each times a count that the exercise fixes: ``PARAMETERS`` below, the
eleven host costs (``simdist.hardware.host_costs``: their fields and what their metadata says
of them), the time per FLOP, and the latency and time per byte of the two links. A ring's step
waits on the slowest member, so the sum is exact only up to such maxima; the fit therefore asks
the simulator rather than a formula: starting from a guess it simulates every measured
exercise, then each again with one parameter raised, which gives each parameter's weight in
each step time (its sensitivity), solves the linear problem for the parameters that make the
sum of absolute errors relative to the measured times small (``_least_absolute``: least squares
with ``scipy.optimize.nnls``, none negative, reweighted by each exercise's last error, so that
the few exercises a noisy machine measured far off pull less than squares would let them), and
repeats from there until the parameters settle.

ParameterServerStrategy's exercises are fitted after the others, for its own parameter
(``schedule_overhead_ns``: the coordinator's cost per scheduled function) and those that the
synchronous exercises did not fit (the network and the FLOP time, when there are none), the
rest held at what the synchronous exercises gave: its workers step asynchronously, so a step
time is the coordinator's step rate over a whole run (``simulated_step_ns`` simulates the run's
own steps), and it pays, per step, the compute and the messages to its ps that the other
parameters price, and per function the coordinator's cost and the "run" and "done" messages.
Measured at two numbers of steps per function
(``simdist.calibration.plan.PS_STEPS_PER_EXECUTION``), the part of the step time that shrinks
with the count is the per-function cost.

``fit(measurements)`` returns a ``Fit``: the parameters, a ``HardwareCatalog`` holding them as
the "calibrated" system (device, intra link and network), and each exercise's simulated and
measured time. ``profile_document`` turns it into the profiles file that ``simdist run
--profiles-file FILE --profile calibrated`` reads.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import NamedTuple

import numpy as np

from simdist.hardware.catalog import DEVICES
from simdist.hardware.devices import (DeviceProfile, HardwareCatalog, LinkProfile, SystemProfile,
                                      file_record)
from simdist.hardware.host_costs import HOST_COST_NAMES, HostCosts
from simdist.base.errors import InvalidArgumentError
from simdist.calibration.plan import ASYNCHRONOUS

SYSTEM = "calibrated"
#: an exercise's fields in a profile file's record of the fit: those that set its step time
RECORD_FIELDS = ("strategy", "workers", "devices_per_worker", "model", "dataset", "hidden",
                 "global_batch")
#: simulated steps per exercise: a step costs what its batch does, and a dataset that is not
#: a multiple of the batch alternates full and partial batches, so the median of 4 is the
#: middle of both, as a measured median over many steps is
SIM_STEPS = 4
ITERATIONS = 3
#: reweighted least-squares rounds per iteration (``_least_absolute``); 0: plain squares
ROBUST_ROUNDS = 10


class Parameter(NamedTuple):
    """One fitted number: its name, unit, what it charges, and a typical size (the step the
    sensitivities are taken with when the current value is smaller)."""

    name: str
    unit: str
    what: str
    typical: float
    #: which exercises can depend on it: "all", "multi_worker" (several workers),
    #: "multi_device" (several devices on a worker) or a strategy's name
    applies: str = "all"


#: the host costs (``HostCosts``'s fields, as their metadata describes them), then the device's
#: FLOP rate and the links
PARAMETERS = (
    *(Parameter(f.name, **f.metadata) for f in dataclasses.fields(HostCosts)),
    Parameter("flop_time", "ns/MFLOP", "compute time per million FLOPs", 5e3),
    Parameter("intra_latency", "ns", "latency of a message between devices of a worker", 2e4,
              "multi_device"),
    Parameter("intra_byte_time", "ns/KB", "time per KB between devices of a worker", 100.0,
              "multi_device"),
    Parameter("network_latency", "ns", "latency of a message between worker processes", 2e6,
              "multi_worker"),
    Parameter("network_byte_time", "ns/KB", "time per KB between worker processes", 1e3,
              "multi_worker"),
)
NAMES = tuple(p.name for p in PARAMETERS)

#: where the search starts: the typical sizes
START = {p.name: p.typical for p in PARAMETERS}
#: the parameters a profile has without a fit (``HostCosts``'s non-zero defaults: the
#: coordinator's cost per function), which a parameters dict may leave out
DEFAULTS = {f.name: float(f.default) for f in dataclasses.fields(HostCosts) if f.default}


class Measurement(NamedTuple):
    """An exercise and its measured median step time (ns), with its quartiles."""

    exercise: object  # simdist.training.exercises.Exercise
    median_ns: float
    p25_ns: float | None = None
    p75_ns: float | None = None


class Fit(NamedTuple):
    """A calibration: the parameters, their catalog, and each exercise's simulated time."""

    parameters: dict
    catalog: HardwareCatalog
    measurements: list
    simulated_ns: list

    @property
    def errors(self) -> list[float]:
        """Each exercise's (simulated - measured) / measured."""
        return [(s - m.median_ns) / m.median_ns
                for s, m in zip(self.simulated_ns, self.measurements)]


def catalog_for(parameters: dict) -> HardwareCatalog:
    """The built-in catalog plus the "calibrated" system holding ``parameters``: a
    ``virtual`` CPU device (its memory and memory bandwidth the cpu-core's, its efficiency 1:
    the fitted FLOP rate is what TF's kernels reach), the intra link and the network between
    processes. A parameter of ``DEFAULTS`` left out keeps its default."""
    parameters = {**DEFAULTS, **parameters}
    missing = [n for n in NAMES if n not in parameters]
    if missing:
        raise InvalidArgumentError(f"calibration parameters missing: {', '.join(missing)}")
    p = {n: float(parameters[n]) for n in NAMES}
    bad = [n for n, v in p.items() if not np.isfinite(v) or v < 0]
    if bad:
        raise InvalidArgumentError(f"calibration parameters must be finite numbers >= 0: "
                                   f"{', '.join(f'{n}={p[n]!r}' for n in bad)}")
    catalog = HardwareCatalog.default()
    cpu = next(d for d in DEVICES if d["name"] == "cpu-core")
    catalog.devices[f"{SYSTEM}-cpu"] = DeviceProfile(
        f"{SYSTEM}-cpu", "CPU", peak_flops=1e15 / max(p["flop_time"], 1e-6),
        mem_bandwidth=cpu["mem_bandwidth"], memory=cpu["memory"], launch_overhead_ns=0,
        efficiency=1.0, host_costs=HostCosts(**{n: round(p[n]) for n in HOST_COST_NAMES}),
        virtual=True)
    catalog.links[f"{SYSTEM}-intra"] = LinkProfile(
        f"{SYSTEM}-intra", "shm", latency_ns=max(1, round(p["intra_latency"])),
        bandwidth=_bandwidth(p["intra_byte_time"]))
    catalog.links[f"{SYSTEM}-network"] = LinkProfile(
        f"{SYSTEM}-network", "network", latency_ns=max(1, round(p["network_latency"])),
        bandwidth=_bandwidth(p["network_byte_time"]))
    catalog.systems[SYSTEM] = SystemProfile(
        SYSTEM, f"{SYSTEM}-cpu", f"{SYSTEM}-intra", f"{SYSTEM}-network",
        description="fitted to step times measured on real TensorFlow (simdist calibrate)")
    return catalog


def _bandwidth(ns_per_kb: float) -> int:
    """Bytes/s from ns per KB (1000 bytes); a time of 0 is as fast as an int allows."""
    return max(1, min(10**15, round(1e12 / ns_per_kb))) if ns_per_kb > 0 else 10**15


def simulated_step_ns(exercise, catalog: HardwareCatalog) -> float:
    """The simulator's median step time of ``exercise`` on the calibrated system (``SIM_STEPS``
    steps; an asynchronous exercise's own steps: its step time is the coordinator's step
    rate over the run, epochs and the functions' start and end included, as measured)."""
    from simdist.training.loop import simulate_exercise

    steps = exercise.steps if exercise.strategy in ASYNCHRONOUS else SIM_STEPS
    short = dataclasses.replace(exercise, steps=steps, hardware=SYSTEM)
    return float(statistics.median(simulate_exercise(short, trace=False,
                                                     catalog=catalog).step_times_ns))


def predict(parameters: dict, exercises) -> list[float]:
    """Simulated step times (ns) of ``exercises`` with these parameters."""
    catalog = catalog_for(parameters)
    return [simulated_step_ns(e, catalog) for e in exercises]


def _depends(parameter: Parameter, exercise) -> bool:
    if parameter.applies == "multi_worker":  # a ps cluster's tasks talk over the network
        return exercise.num_workers > 1 or exercise.strategy in ASYNCHRONOUS
    if parameter.applies == "multi_device":
        return exercise.devices_per_worker > 1
    return parameter.applies in ("all", exercise.strategy)


def free_parameters(measurements) -> list[Parameter]:
    """The parameters that some of ``measurements`` depend on: those a fit sets."""
    return [p for p in PARAMETERS if any(_depends(p, m.exercise) for m in measurements)]


def fit(measurements, start: dict | None = None, iterations: int = ITERATIONS,
        on_progress=None) -> Fit:
    """Fit the parameters to ``measurements`` (see the module's docstring): the synchronous
    exercises first, then the asynchronous ones (``ASYNCHRONOUS``) for their strategy's own
    parameters and those the first stage did not fit (``_later_free``), the others held at
    the first stage's values.

    ``on_progress(done, total)`` is called after each simulation.
    """
    measurements = list(measurements)
    if not measurements:
        raise InvalidArgumentError("calibration needs at least one measured exercise")
    for m in measurements:
        if not (np.isfinite(m.median_ns) and m.median_ns > 0):
            raise InvalidArgumentError(f"a measured step time must be a number > 0, got "
                                       f"{m.median_ns!r} for {m.exercise.strategy}")
    later = [m for m in measurements if m.exercise.strategy in ASYNCHRONOUS]
    first = [m for m in measurements if m.exercise.strategy not in ASYNCHRONOUS]
    fitted = free_parameters(first) if first else []
    stages = [(rows, free) for rows, free in ((first, fitted),
                                              (later, _later_free(later, fitted)))
              if rows and free]
    theta = {**START, **(start or {})}
    total = iterations * sum(1 + sum(_depends(p, m.exercise) for p in free)
                             for rows, free in stages for m in rows)
    done = 0

    def simulate(values, exercise):
        nonlocal done
        out = simulated_step_ns(exercise, catalog_for(values))
        done += 1
        if on_progress is not None:
            on_progress(done, total)
        return out

    for k, (rows, free) in enumerate(stages):
        theta = _fit_stage(rows, free, theta, iterations, simulate, keep_unused=k > 0)
    catalog = catalog_for(theta)
    simulated = [simulated_step_ns(m.exercise, catalog) for m in measurements]
    return Fit(theta, catalog, measurements, simulated)


def _later_free(measurements, fitted) -> list[Parameter]:
    """The parameters the asynchronous ``measurements`` set: their strategy's own, and of the
    links and the FLOP time those the synchronous stage did not fit (``fitted``); never the
    host costs of a synchronous step, which an asynchronous one does not pay."""
    return [p for p in free_parameters(measurements)
            if p.applies in ASYNCHRONOUS
            or (p not in fitted and (p.applies != "all" or p.name == "flop_time"))]


def _fit_stage(measurements, free, theta: dict, iterations: int, simulate,
               keep_unused: bool = False) -> dict:
    """The parameters ``free`` fitted to ``measurements``, the others as in ``theta``
    (``keep_unused``: so are those no simulated time moved with)."""
    measured = np.array([m.median_ns for m in measurements])
    for _ in range(iterations):
        base = [simulate(theta, m.exercise) for m in measurements]
        columns = []
        for p in free:
            delta = max(theta[p.name], p.typical)
            raised = {**theta, p.name: theta[p.name] + delta}
            columns.append([(simulate(raised, m.exercise) - b) / delta
                            if _depends(p, m.exercise) else 0.0
                            for m, b in zip(measurements, base)])
        sens = np.array(columns).T  # exercises x free parameters
        if keep_unused:
            used = np.any(sens != 0, axis=0)
            free, sens = [p for p, u in zip(free, used) if u], sens[:, used]
        current = np.array([theta[p.name] for p in free])
        offset = np.array(base) - sens @ current  # what no parameter pays for
        solution = _least_absolute(sens, measured - offset, measured, ROBUST_ROUNDS)
        theta = {**theta, **{p.name: float(v) for p, v in zip(free, solution)}}
    return theta


def _least_absolute(a, b, scale, rounds: int, floor: float = 0.01):
    """x >= 0 that makes sum |(a x - b) / scale| small: least squares reweighted by each
    row's last absolute error (``rounds`` times, errors under ``floor`` counting as
    ``floor``), so that a few exercises measured far off pull the fit less than squares
    would, as the median error the fit is judged by is pulled by them."""
    from scipy.optimize import nnls

    weights = 1.0 / scale
    for _ in range(rounds + 1):
        x, _ = nnls(a * weights[:, None], b * weights)
        error = np.abs(a @ x - b) / scale
        weights = 1.0 / (scale * np.sqrt(np.maximum(error, floor)))
    return x


def profile_document(fit_: Fit, machine: str = "") -> dict:
    """The profiles file of a fit (JSON or YAML): the calibrated device, links and system,
    with the parameters, the exercises and their errors as a record of where it came from."""
    catalog = fit_.catalog
    device = catalog.device(f"{SYSTEM}-cpu")
    intra, network = catalog.link(f"{SYSTEM}-intra"), catalog.link(f"{SYSTEM}-network")
    errors = [abs(e) for e in fit_.errors]
    system = file_record(catalog.system(SYSTEM))
    system["description"] += f" on {machine}" if machine else ""
    return {
        "devices": {device.name: file_record(device)},
        "links": {link.name: file_record(link) for link in (intra, network)},
        "systems": {SYSTEM: system},
        "calibration": {
            "parameters": {p.name: {"value": round(fit_.parameters[p.name], 3),
                                    "unit": p.unit, "what": p.what} for p in PARAMETERS},
            "median_abs_error": float(np.median(errors)), "max_abs_error": float(max(errors)),
            "exercises": [{"exercise": _short(m.exercise), "measured_ns": round(m.median_ns),
                           "simulated_ns": round(s)}
                          for m, s in zip(fit_.measurements, fit_.simulated_ns)]},
    }


def _short(exercise) -> dict:
    """The fields that set an exercise's step time (``RECORD_FIELDS``; an asynchronous
    exercise's ps, steps per function and steps too)."""
    out = {k: getattr(exercise, k) for k in RECORD_FIELDS}
    if exercise.strategy in ASYNCHRONOUS:
        out.update(ps=exercise.ps, steps_per_execution=exercise.steps_per_execution,
                   steps=exercise.steps)
    return out

