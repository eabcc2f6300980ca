"""Stragglers with and without backup workers: synchronous training on parameter servers
(SyncReplicasOptimizer) where steps sometimes take five times as long."""

from __future__ import annotations

import functools

from simdist.training.ps_training import train_on_ps

from ..figures import Panel, draw_panels
from ..study import Study

WORKERS = 8
STEP_US, STALL_US = 1000.0, 5000.0
FIELDS = ["backups", "replicas_to_aggregate", "stall_probability", "global_steps",
          "ms_per_global_step", "gradients_per_s", "slowdown", "dropped"]


def points(quick: bool) -> list[dict]:
    workers, steps = (4, 8) if quick else (WORKERS, 40)
    probabilities = (0.0, 0.2) if quick else (0.0, 0.05, 0.1, 0.2, 0.3)
    return [{"workers": workers, "steps": steps, "backups": b, "stall_probability": q,
             "weight": 200 * workers * steps}
            for b in (0, 1, 2) for q in probabilities]


@functools.lru_cache(maxsize=None)
def _run(workers: int, steps: int, backups: int, probability: float) -> tuple:
    """(ms per global step, gradients dropped) of one simulated run."""
    run = train_on_ps(workers=workers, steps=steps, replicas_to_aggregate=workers - backups,
                      stall_us=STALL_US, stall_probability=probability, seed=1)
    reached = min(t for runs in run.worker_runs.values() for t, g, _ in runs if g >= steps)
    return (reached - run.started_ns) / steps / 1e6, run.dropped


def measure(point: dict) -> dict:
    workers, steps, backups = point["workers"], point["steps"], point["backups"]
    per_step, dropped = _run(workers, steps, backups, point["stall_probability"])
    calm, _ = _run(workers, steps, backups, 0.0)
    aggregate = workers - backups
    return {"backups": backups, "replicas_to_aggregate": aggregate,
            "stall_probability": point["stall_probability"], "global_steps": steps,
            "ms_per_global_step": round(per_step, 4),
            "gradients_per_s": round(aggregate / per_step * 1e3, 1),
            "slowdown": round(per_step / calm, 4), "dropped": dropped}


def draw(rows, path) -> None:
    step, grads = {}, {}
    for r in rows:
        label = f"{r['backups']} backup worker{'s' if r['backups'] != 1 else ''}"
        step.setdefault(label, []).append((r["stall_probability"], r["ms_per_global_step"]))
        grads.setdefault(label, []).append((r["stall_probability"], r["gradients_per_s"]))
    workers = rows[0]["replicas_to_aggregate"] + rows[0]["backups"]
    draw_panels(path, f"Stragglers with and without backup workers ({workers} workers, "
                      "SyncReplicasOptimizer)", [
        Panel("time per global step", "chance that a step straggles", "ms", step,
              logx=False),
        Panel("gradients applied per second", "chance that a step straggles", "gradients/s",
              grads, logx=False)],
        f"simdist ps --mode sync --workers {workers} --replicas-to-aggregate N-b: each "
        f"worker's step takes {STEP_US / 1e3:g} ms of compute, or {STALL_US / 1e3:g} ms with "
        "the chance on the x axis (seeded per worker); 8 float32 weights on one ps, profile "
        "cpu (one core per task, 10 GbE). With b backups the chief applies the first N-b "
        "gradients of a step and drops the late ones.")


def summary(rows):
    header = ["backups", "aggregate", "straggle chance", "ms per global step", "gradients/s",
              "slowdown", "dropped"]
    return header, [[r["backups"], r["replicas_to_aggregate"], r["stall_probability"],
                     f"{r['ms_per_global_step']:.2f}", f"{r['gradients_per_s']:,.0f}",
                     f"{r['slowdown']:.2f}x", r["dropped"]]
                    for r in rows]


STUDY = Study(
    name="stragglers",
    title="Stragglers with and without backup workers",
    about=(f"Between-graph synchronous training on a parameter server (`simdist ps --mode "
           f"sync`, SyncReplicasOptimizer) with {WORKERS} workers: each step's compute takes "
           f"{STEP_US / 1e3:g} ms, or {STALL_US / 1e3:g} ms with a given chance (a straggler, "
           "seeded per worker). Without backups (`replicas_to_aggregate` = workers) every "
           "global step waits for the slowest worker, so one straggler anywhere slows the "
           "whole step; with b backups the chief aggregates the first N-b gradients and "
           "drops the late ones. Profile `cpu` (one core per task, 10 GbE); the model is "
           "train_on_ps's 8-weight linear model, so the step is compute and waiting, not "
           "bandwidth. Slowdown: time per global step over the same setup's without "
           "stragglers."),
    published=("Chen et al., \"Revisiting Distributed Synchronous SGD\" (2016) introduced "
               "backup workers for synchronous SGD to mitigate stragglers (and TF's "
               "SyncReplicasOptimizer implements them through replicas_to_aggregate); no "
               "number of theirs is compared here."),
    fields=FIELDS, points=points, measure=measure, draw=draw, summary=summary)
