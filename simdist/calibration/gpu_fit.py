"""Calibration from a published GPU table: each hardware kind's costs that best match its rows.

A row (``gpu_table.GpuRow``) is a ``data_parallel`` run (``simdist run data_parallel --model
M --workers M x G --tasks-per-machine G --batch B``: the model's layers, its gradients
all-reduced in a ring on fused buckets as the backward pass fills them), each step after the
host's own work (a step's overhead and its input's bytes, as ``HostCosts`` prices them). Its
time is ``steps`` x that step + ``runs`` x the run's fixed cost (start-up, the first epoch's
tracing, validation), which no simulation holds, so it is fitted as a term of its own.

The costs, per hardware kind (``COSTS``): the device's time per FLOP (its effective FLOP/s),
the host's work per step and per KB of input, the time per byte between the GPUs of a
machine and between machines, and the fixed cost. As ``fit.py`` does, the fit asks the
simulator for each cost's weight in each row (the row again with that cost raised), solves
for the costs (none negative, relative errors small) and repeats. A cost the rows cannot
tell (no row depends on it, or it moves in step with another in every row) is kept at the
starting profile's value, and ``KindFit.undetermined`` says why; costs the table's rows
never show apart from these (link latencies, memory bandwidth) are not fitted
(``NOT_FITTED``). Kinds are fitted apart: no row of one depends on another's costs.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.calibration.fit import Parameter, _bandwidth, _least_absolute
from simdist.hardware.devices import Hardware, HardwareCatalog, Layout, SystemProfile

#: the costs of one hardware kind, in the order a collinear pair keeps the first fitted
COSTS = (
    Parameter("flop_time", "ns/MFLOP", "compute time per million FLOPs", 100.0),
    Parameter("network_byte_time", "ns/KB", "time per KB between machines", 300.0,
              "multi_worker"),
    Parameter("intra_byte_time", "ns/KB", "time per KB between GPUs of a machine", 10.0,
              "multi_device"),
    Parameter("run_fixed_ns", "ns", "per-run fixed cost (start-up, first-epoch tracing, "
              "validation)", 1e10),
    Parameter("step_overhead_ns", "ns", "host work per step (loop, iterator, function call)",
              1e6),
    Parameter("input_kb_ns", "ns/KB", "host time per KB of a step's input", 10.0),
)
NAMES = tuple(c.name for c in COSTS)
SIMULATED = NAMES[:3] + NAMES[4:]  # all but the fixed cost, which is added, not simulated
#: how a rule of thumb reads each cost (label, unit, value from the cost's own unit)
DISPLAY = {
    "flop_time": ("effective compute", "TFLOP/s", lambda v: 1e3 / v if v else float("inf")),
    "network_byte_time": ("network bandwidth", "GB/s", lambda v: 1e3 / v if v else float("inf")),
    "intra_byte_time": ("intra-machine bandwidth", "GB/s",
                        lambda v: 1e3 / v if v else float("inf")),
    "run_fixed_ns": ("per-run fixed cost", "s", lambda v: v / 1e9),
    "step_overhead_ns": ("per-step overhead", "ms", lambda v: v / 1e6),
    "input_kb_ns": ("input time per KB", "ns/KB", lambda v: v),
}
#: what would determine each cost, said when the rows cannot
HINTS = {
    "flop_time": "rows at two per-GPU batches would",
    "network_byte_time": "rows at two machine counts would",
    "intra_byte_time": "rows at two GPU counts on one machine would",
    "run_fixed_ns": "rows of one configuration at two epoch or example counts would",
    "step_overhead_ns": "rows at two per-GPU batches, or of two models, would",
    "input_kb_ns": "rows of two models of different FLOPs per input byte would",
}
#: where each cost is a larger share of the time, said when the rows set it only loosely
LARGER_SHARE = {
    "flop_time": "rows whose step is mostly compute (one GPU, large batches)",
    "network_byte_time": "rows on more machines, or of models with more gradient bytes per "
                         "FLOP (vgg16)",
    "intra_byte_time": "rows on more GPUs of a machine, of models with more gradient bytes "
                       "per FLOP (its transfers hide behind the backward pass)",
    "run_fixed_ns": "rows of short runs (an epoch, few examples)",
    "step_overhead_ns": "rows at small per-GPU batches",
    "input_kb_ns": "rows of light models (mobilenet_v2) at small per-GPU batches",
}
#: costs a published table's step times never show apart from the fitted ones
NOT_FITTED = (
    ("link latencies", "a step of milliseconds does not show microseconds of latency apart "
     "from the bandwidth"),
    ("memory bandwidth", "it prices the update (applying the gradients) only, which the "
     "rows do not show apart from the compute"),
    ("per-op launch overhead", "a data_parallel step is three ops: it is part of the "
     "per-step overhead"),
)
#: simulated steps of a row: the last is steady (message fidelity's first step differs)
SIM_STEPS = 2
ITERATIONS = 3
#: a singular value of the sensitivities (each cost's column of length 1) under this: the
#: costs along it move together
CONDITION = 1e-2
#: the fit stops when no cost moved by this share in an iteration
SETTLED = 1e-4
#: a cost that changes no row's time by this share at twice its value is not determined
NEGLIGIBLE = 1e-3


class KindFit(NamedTuple):
    """One hardware kind's fit: its rows, the starting and fitted costs, the costs left at
    their start with the reason why, each row's simulated time (ns), and how firmly the rows
    set each fitted cost."""

    kind: object  # gpu_table.Kind
    rows: list
    start: dict
    costs: dict
    undetermined: dict  # cost name -> why the rows cannot set it
    simulated_ns: list
    #: fitted cost -> its relative change when each row is off by 1% (``_spread``)
    spread: dict

    @property
    def system(self) -> str:
        return f"{self.kind.system}-calibrated"


def start_costs(kind) -> dict:
    """The costs of the kind's profile, where the fit starts (no profile holds a fixed cost:
    0)."""
    catalog = kind.catalog
    system = catalog.system(kind.system)
    device = catalog.device(system.device)
    return {"flop_time": 1e15 / (device.peak_flops * device.efficiency),
            "network_byte_time": 1e12 / catalog.link(system.network).bandwidth,
            "intra_byte_time": 1e12 / catalog.link(system.intra_link).bandwidth,
            "run_fixed_ns": 0.0,
            "step_overhead_ns": float(device.host_costs.step_overhead_ns),
            "input_kb_ns": float(device.host_costs.input_kb_ns)}


def fitted_catalog(kind, costs: dict, host: bool = True) -> HardwareCatalog:
    """The kind's catalog plus its system with ``costs``: ``<system>-calibrated``, a copy of
    the device (its FLOP rate, efficiency 1, its host costs: ``data_parallel`` charges them
    each step; none with ``host=False``) and of the two links (their bandwidths)."""
    base = kind.catalog
    system = base.system(kind.system)
    device = base.device(system.device)
    name = f"{kind.system}-calibrated"
    catalog = HardwareCatalog(base.devices, base.links, base.systems)
    catalog.devices[name] = dataclasses.replace(
        device, name=name, peak_flops=1e15 / max(costs["flop_time"], 1e-6), efficiency=1.0,
        host_costs=dataclasses.replace(
            device.host_costs, step_overhead_ns=round(costs["step_overhead_ns"]) if host else 0,
            input_kb_ns=round(costs["input_kb_ns"]) if host else 0))
    for role, link_name, cost in (("intra", system.intra_link, "intra_byte_time"),
                                  ("network", system.network, "network_byte_time")):
        link = base.link(link_name)
        catalog.links[f"{name}-{role}"] = dataclasses.replace(
            link, name=f"{name}-{role}", bandwidth=_bandwidth(costs[cost]))
    catalog.systems[name] = SystemProfile(
        name, name, f"{name}-intra", f"{name}-network",
        description=f"{kind.system} fitted to a table of measured times (simdist calibrate "
                    "--from-csv)")
    return catalog


def step_ns(row, costs: dict) -> float:
    """The simulated steady step (ns) of ``row``'s data_parallel run with ``costs``."""
    from simdist.collectives.flow import no_flow_plan
    from simdist.sim.scheduler import simulate
    from simdist.training.programs.data_parallel import GRADIENT_BYTES, train
    from simdist.training.programs.overlap import FUSION_BYTES, OverlapLog, backward_plan

    catalog = fitted_catalog(row.kind, costs, host=False)  # priced here, in float ns
    hardware = Hardware.from_catalog(catalog, f"{row.kind.system}-calibrated",
                                     Layout(tasks_per_machine=row.gpus))
    model = row.model
    plan = backward_plan(model, row.batch, GRADIENT_BYTES["float32"], FUSION_BYTES)
    host = round(costs["step_overhead_ns"]
                 + row.batch * row.input_bytes / 1000 * costs["input_kb_ns"])

    def main(ctx):
        log = OverlapLog(plan.buckets)
        ends = []
        for step in range(SIM_STEPS):
            if host:
                yield ctx.busy(None, "input + dispatch", host, step=step)
            yield from train(ctx, model.params, 1, row.batch, "ring",
                             flops_per_example=model.training_flops, plan=plan, log=log)
            ends.append(ctx.now)
        return ends

    fidelity = "message" if no_flow_plan("ring", row.tasks, row.gpus) else "flow"
    result = simulate({"worker": row.tasks}, main, hardware=hardware, trace=False,
                      fidelity=fidelity)
    ends = next(iter(result.returns.values()))  # every task's steps end together
    return float(ends[-1] - ends[-2])


def row_time(row, step: float, costs: dict) -> float:
    """The time of what ``row`` measured: its steps and its share of the fixed cost."""
    return row.steps * step + row.runs * costs["run_fixed_ns"]


class _Steps:
    """Simulated steps, once per configuration and costs (rows of one run at two epoch or
    example counts share it), counting the simulations for a progress bar."""

    def __init__(self, on_progress=None, total: int = 0):
        self.cache, self.done, self.total, self.on_progress = {}, 0, total, on_progress

    def __call__(self, row, costs: dict) -> float:
        key = (row.config, tuple(costs[n] for n in SIMULATED))
        if key not in self.cache:
            self.cache[key] = step_ns(row, costs)
            self.done += 1
            if self.on_progress is not None:
                self.on_progress(self.done, max(self.total, self.done))
        return self.cache[key]


def fit_kind(kind, rows, iterations: int = ITERATIONS, on_progress=None) -> KindFit:
    """Fit ``kind``'s costs to its ``rows`` (each with a measured time; see the module)."""
    rows = list(rows)
    if not rows:
        raise InvalidArgumentError(f"hardware {kind.name}: no row with a time to fit")
    configs = len({r.config for r in rows})
    steps = _Steps(on_progress, (iterations * (1 + len(SIMULATED)) + 1) * configs)
    start = start_costs(kind)
    costs = dict(start)
    measured = np.array([r.measured_ns for r in rows])
    undetermined: dict = {}
    for _ in range(iterations):
        base = np.array([row_time(r, steps(r, costs), costs) for r in rows])
        columns = []
        for cost in COSTS:
            if cost.name == "run_fixed_ns":
                columns.append([r.runs for r in rows])
                continue
            delta = 0.25 * max(costs[cost.name], cost.typical)
            raised = {**costs, cost.name: costs[cost.name] + delta}
            columns.append([(row_time(r, steps(r, raised), raised) - b) / delta
                            for r, b in zip(rows, base)])
        sens = np.array(columns, dtype=float).T  # rows x costs
        undetermined = _undetermined(sens, rows, costs, measured)
        free = [k for k, name in enumerate(NAMES) if name not in undetermined]
        current = np.array([costs[n] for n in NAMES])
        offset = base - sens[:, free] @ current[free]
        solution = _least_absolute(sens[:, free], measured - offset, measured, 10)
        moved = max(abs(v - current[k]) / max(abs(current[k]), 1e-3 * COSTS[k].typical)
                    for k, v in zip(free, solution))
        costs = {**costs, **{NAMES[k]: float(v) for k, v in zip(free, solution)}}
        if moved < SETTLED:
            break
    simulated = [row_time(r, steps(r, costs), costs) for r in rows]
    return KindFit(kind, rows, start, costs, undetermined, simulated,
                   _spread(sens[:, free], measured, [NAMES[k] for k in free], costs))


def _spread(sens, measured, names: list, costs: dict) -> dict:
    """How far each fitted cost moves, relative to its value, when each row's time is off by
    1% at random (independently): the standard deviation of least squares' solution, what
    says a cost the rows only just determine."""
    typical = {c.name: c.typical for c in COSTS}
    scale = np.array([max(abs(costs[n]), 1e-3 * typical[n]) for n in names])
    a = sens / measured[:, None] * scale[None, :]  # relative change per relative change
    covariance = np.linalg.pinv(a.T @ a) * 0.01 ** 2
    return {name: float(np.sqrt(max(covariance[j, j], 0.0))) for j, name in enumerate(names)}


def _undetermined(sens, rows, costs: dict, measured) -> dict:
    """The costs the rows cannot set, each with why: no row's time moves by ``NEGLIGIBLE``
    at twice the cost (or at its typical size), or it moves in step with others in every row
    (a near-null direction of the sensitivities, each cost's column scaled to length 1: the
    last of them in ``COSTS``'s order is left out, until none is)."""
    scale = np.array([max(costs[c.name], c.typical) for c in COSTS])
    a = sens / measured[:, None] * scale[None, :]  # each row's relative change
    out = {}
    for k, name in enumerate(NAMES):
        if not np.any(np.abs(a[:, k]) > NEGLIGIBLE):
            out[name] = _no_row(name, rows)
    while True:
        free = [k for k, name in enumerate(NAMES) if name not in out]
        if len(free) <= 1:
            break
        unit = a[:, free] / np.linalg.norm(a[:, free], axis=0)
        _, s, vt = np.linalg.svd(unit, full_matrices=True)
        s = np.concatenate([s, np.zeros(len(free) - len(s))])
        if s[-1] > CONDITION:
            break
        weights = np.abs(vt[-1])
        together = [NAMES[free[j]] for j in range(len(free)) if weights[j] > 0.2]
        dropped = together[-1]
        partners = ", ".join(DISPLAY[n][0] for n in together[:-1]) or "the other costs"
        out[dropped] = (f"moves with the {partners} in every row: the table cannot tell them "
                        f"apart ({HINTS[dropped]})")
    return out


def _no_row(name: str, rows) -> str:
    """Why no row depends on ``name``."""
    if name == "run_fixed_ns":
        return ("every row is a steady step time (step_ms, step_s or examples_per_s), none "
                "a run's or an epoch's")
    if name == "input_kb_ns":
        if not any(r.input_bytes for r in rows):
            return "every row's input_bytes is 0"
        return "its input takes under 0.1% of every row's time (few bytes an example)"
    if name in ("network_byte_time", "intra_byte_time"):
        many = [r for r in rows if (r.machines if name == "network_byte_time" else r.gpus) > 1]
        if not many:
            return ("no row spans several machines (workers > 1)" if name == "network_byte_time"
                    else "no row has several GPUs on a machine (devices > 1)")
        return ("these transfers take under 0.1% of every row's time (hidden behind the "
                "backward pass, or short)")
    return f"no row's time moves by 0.1% with it ({HINTS[name]})"


def predict_rows(fit: KindFit, rows) -> list[float]:
    """The times (ns) of ``rows`` of the fit's kind with its costs."""
    steps = _Steps()
    return [row_time(r, steps(r, fit.costs), fit.costs) for r in rows]


def profile_document(fits: list[KindFit], source: str) -> dict:
    """The profiles file of the fits (JSON or YAML): each kind's calibrated device, links and
    system, and a record of its costs (fitted or kept) and rows."""
    from simdist.hardware.devices import file_record

    document: dict = {"devices": {}, "links": {}, "systems": {}, "calibration": {}}
    for kind_fit in fits:
        catalog = fitted_catalog(kind_fit.kind, kind_fit.costs)
        system = catalog.system(kind_fit.system)
        document["devices"][system.device] = file_record(catalog.device(system.device))
        for link in (system.intra_link, system.network):
            document["links"][link] = file_record(catalog.link(link))
        record = file_record(system)
        record["description"] += f" ({source})"
        document["systems"][system.name] = record
        document["calibration"][system.name] = {
            "costs": {c.name: {"value": round(kind_fit.costs[c.name], 3), "unit": c.unit,
                               "what": c.what,
                               "fitted": c.name not in kind_fit.undetermined,
                               "spread_at_1pct": round(kind_fit.spread.get(c.name, 0), 4)}
                      for c in COSTS},
            "rows": [{"line": r.line, "measured_ns": round(r.measured_ns),
                      "simulated_ns": round(s)}
                     for r, s in zip(kind_fit.rows, kind_fit.simulated_ns)]}
    return document
