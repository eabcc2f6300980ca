"""The training loop's outputs as a real run's RunResult, in simdist's trace schema
(DESIGN.md, Trace schema).

Every worker's training loop (``realdist.training.loop.train``) reports its steps as
wall-clock ``time.monotonic_ns()`` spans (one clock for every process of the machine); here
they become one ``simdist.trace.schema.Trace`` whose time 0 is the first step's start: per
worker (pid ``worker:i``) a "steps" lane with "step k" and an "ops" lane with that step's
input, compute and all-reduce + update spans.
"""

from __future__ import annotations

from simdist.training.exercises import RunResult
from simdist.trace.schema import Tracer, build_trace

PHASES = (("input", "input", "input"), ("compute", "compute", "compute"),
          ("update", "all-reduce + update", "allreduce"))


def result_from_workers(exercise, outs: list[dict], metadata: dict) -> RunResult:
    """One RunResult from the ``loop.train`` outputs of every worker (worker 0's losses and
    weights; all workers hold the same weights after a synchronous step)."""
    origin = min(s["start"] for out in outs for s in out["spans"])
    tracer = Tracer()
    processes = [f"worker:{i}" for i in range(len(outs))]
    for pid, out in zip(processes, outs):
        for s in out["spans"]:
            t = s["start"] - origin
            total = s["input"] + s["compute"] + s["update"]
            tracer.span(pid, pid, "steps", f"step {s['step']}", "step", t, total,
                        {"step": s["step"], "global_batch": s["batch"]})
            for key, name, cat in PHASES:
                tracer.span(pid, pid, "ops", name, cat, t, s[key], {"step": s["step"]})
                t += s[key]
    step_times = []
    for k in range(exercise.steps):
        spans = [out["spans"][k] for out in outs]
        end = max(s["start"] + s["input"] + s["compute"] + s["update"] for s in spans)
        step_times.append(end - min(s["start"] for s in spans))
    metadata = {"clock": "wall (time.monotonic_ns)",
                "note": "step 0 includes tracing the tf.functions", **metadata}
    trace = build_trace(tracer.streams, processes, processes,
                        {"source": "realdist", "exercise": exercise.to_dict()})
    return RunResult("realdist", exercise, outs[0]["losses"], outs[0]["weights"], step_times,
                     metadata, trace)
