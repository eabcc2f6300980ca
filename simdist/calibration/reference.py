"""The reference profile: a calibration shipped with DistLab, scaled to a new machine by a few
anchor exercises measured there (``simdist calibrate --anchor``, which ``make demo`` runs).

A full calibration measures 48 exercises (about 12 minutes); a newcomer's first prediction
should not wait for it. So the profile that ``simdist calibrate`` fitted on the development
machine (``REFERENCE``: a 2-core x86 CPU machine with TensorFlow 2.21) ships here, and on
another machine three short in-process exercises (``ANCHORS``, none of them the demo's) are
measured, each compared with what the reference profile predicts for it; the median of
those ratios (``Anchoring.scale``) multiplies every fitted time (the host costs, the time
per FLOP, the links' latencies and times per byte), as a machine that is uniformly faster or
slower would. What a single factor cannot say (a machine whose cores are faster but whose
Python is not) is what a full ``simdist calibrate`` is for.
"""

from __future__ import annotations

import statistics
from typing import NamedTuple

from simdist.calibration.fit import Fit, catalog_for, predict
from simdist.calibration.plan import sized_exercise


class ReferenceProfile(NamedTuple):
    """A shipped calibration: where and how it was fitted, and its parameters
    (``simdist.calibration.fit.PARAMETERS``'s names, their units')."""

    machine: str
    tensorflow: str
    date: str
    command: str
    exercises: int
    median_abs_error: float
    parameters: dict


#: ``simdist calibrate -o out/reference.json`` on the idle development machine; the record
#: of its run: docs/results/calibration.md
REFERENCE = ReferenceProfile(
    machine="the development machine: 2 cores (x86_64), 24 GiB, Python 3.11",
    tensorflow="2.21.0",
    date="2026-11-27",
    command="simdist calibrate -o out/reference.json",
    exercises=48,
    median_abs_error=0.0368,
    parameters={
        "step_overhead_ns": 1670040.549,
        "replica_overhead_ns": 784762.279,
        "input_pipeline_overhead_ns": 637860.406,
        "distributed_step_overhead_ns": 3831974.961,
        "multi_worker_step_overhead_ns": 701347.056,
        "input_kb_ns": 4183.892,
        "op_overhead_ns": 24994.683,
        "shared_op_overhead_ns": 433885.529,
        "collective_overhead_ns": 0.0,
        "packed_tensor_overhead_ns": 322133.602,
        "schedule_overhead_ns": 4762703.259,
        "flop_time": 52420.939,
        "intra_latency": 193997.444,
        "intra_byte_time": 0.0,
        "network_latency": 2299887.082,
        "network_byte_time": 12930.81,
    },
)

#: (strategy, replicas, model, hidden, global batch): in-process exercises of the calibration
#: plan, a second or so each, spanning host costs (softmax at 64), FLOPs (the 256-unit MLP)
#: and several replicas (central_storage x2); the demo's exercise (MirroredStrategy x4, a
#: 32-unit MLP at 64) is none of them
ANCHORS = (("default", 1, "softmax", 32, 64), ("one_device", 1, "mlp", 256, 128),
           ("central_storage", 2, "softmax", 32, 1024))


def anchor_exercises(steps: int) -> list:
    """The anchors as exercises of ``steps`` steps."""
    return [sized_exercise(*row, steps) for row in ANCHORS]


class Anchoring(NamedTuple):
    """The reference scaled to this machine: the factor, and per anchor its measurement and
    the reference's prediction (``fit``'s measurements and simulated times are the scaled
    profile's)."""

    scale: float
    measured_ns: list
    reference_ns: list
    fit: Fit


def anchored(measurements, reference: ReferenceProfile = REFERENCE) -> Anchoring:
    """Scale ``reference`` to the machine that measured ``measurements`` (``Measurement``s of
    the anchors): every fitted time times the median of measured / predicted."""
    exercises = [m.exercise for m in measurements]
    predicted = predict(reference.parameters, exercises)
    scale = statistics.median(m.median_ns / p for m, p in zip(measurements, predicted))
    parameters = {name: value * scale for name, value in reference.parameters.items()}
    scaled = predict(parameters, exercises)
    return Anchoring(scale, [m.median_ns for m in measurements], predicted,
                     Fit(parameters, catalog_for(parameters), list(measurements), scaled))


def short_description(reference: ReferenceProfile = REFERENCE) -> str:
    """One line saying where the reference came from."""
    return (f"fitted by '{reference.command}' on {reference.date} on {reference.machine}, "
            f"TensorFlow {reference.tensorflow}: {reference.exercises} exercises, median "
            f"error {reference.median_abs_error:.1%}")
