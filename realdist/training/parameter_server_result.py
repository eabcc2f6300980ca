"""A real parameter-server run in simdist's RunResult and trace schema.

The coordinator's report (``realdist.training.parameter_server_loop.train``) becomes, with
time 0 at the start of the training (the coordinator's clock): on ``chief:0`` one "epoch N"
span per epoch (lane "train", as simdist's ``ps_exercise``); on each ``worker:i`` one
"step_fn#N" span (category "function", lane "functions") per function it ran to the end,
and "fault" instants where the launcher killed it, restarted it and saw it serve again.
``function_runs`` counts the starts of every function (recorded on ps:0 by the function
itself): 2 for a function re-run after its worker died. An evaluation's report
(``realdist.training.parameter_server_eval``) becomes simdist's ``metadata["evaluation"]``
and its spans (``evaluation_metadata``).
"""

from __future__ import annotations

import numpy as np

from simdist.training.exercises import RunResult
from simdist.trace.schema import Tracer, build_trace

LANE = "functions"
EVALUATION_LANE = "evaluation"  # as simdist's
TIMES = ("killed", "restarted", "serving")  # a failure record's times (time.monotonic_ns)


def run_result(exercise, report: dict, processes: bool) -> RunResult:
    out = report["outputs"]["chief"]["out"]
    origin = out["began"]
    tracer = Tracer()
    workers = [f"worker:{i}" for i in range(exercise.workers)]
    for e in out["epochs"]:
        tracer.span("chief:0", "chief:0", "train", f"epoch {e['epoch']}", "step",
                    e["start"] - origin, e["end"] - e["start"],
                    {"epoch": e["epoch"], "iterations": e["iterations"]})
    function_ns = []
    for run in out["runs"]:
        name, pid = f"step_fn#{run['function'] + 1}", f"worker:{run['worker']}"
        tracer.span(pid, pid, LANE, name, "function", run["start"] - origin,
                    run["end"] - run["start"],
                    {"function": name, "run": out["function_starts"][run["function"]],
                     "steps": run["steps"]})
        function_ns += [(run["end"] - run["start"]) // run["steps"]] * run["steps"]
    evaluation, eval_runs = {}, {}
    if "evaluation" in out:  # realdist.training.parameter_server_eval
        evaluation["evaluation"], eval_runs = evaluation_metadata(report, tracer, origin)
    kills = [{k: v - origin if k in TIMES and v is not None else v for k, v in f.items()
              if k != "start_line"} for f in report["failures"]]
    for kill in kills:
        for key, what in (("killed", "killed (SIGKILL)"), ("restarted", "restarted"),
                          ("serving", "serving again")):
            if kill[key] is not None:
                tracer.instant(kill["task"], kill["task"], LANE, f"{kill['task']} {what}",
                               "fault", kill[key])
    processes_ = ["chief:0", *workers]
    trace = build_trace(tracer.streams, processes_, processes_,
                        {"source": "realdist", "exercise": exercise.to_dict()})
    runs = {f"step_fn#{f + 1}": n for f, n in enumerate(out["function_starts"])}
    runs.update(eval_runs)
    metadata = {
        "tensorflow": out["tensorflow"], "strategy_class": out["strategy_class"],
        "devices": [f"/job:{w.replace(':', '/replica:0/task:')}/device:CPU:0"
                    for w in workers],
        "cross_device_ops": "none (gradients applied on the ps, asynchronously)",
        "workers": exercise.workers, "ps": exercise.ps,
        "cluster": "one process per task" if processes else "in process (the coordinator's)",
        "clock": "wall (tf.timestamp on the workers, time.monotonic_ns on the coordinator)",
        "note": "step time: the training's wall time over its steps (asynchronous workers "
                "overlap, as simdist counts them); function_ns_per_step: inside the functions",
        "function_ns_per_step": int(np.median(function_ns)),
        "functions": len(runs), "function_runs": runs,
        "iterations": out["iterations"], "shards": out["shards"],
        "shard_shapes": out["shard_shapes"],
        "failures": list(exercise.failures),
        "kills": kills,
        "network": report["network"], **evaluation}
    steps = len(out["losses"])
    step_times = [(out["epochs"][-1]["end"] - origin) // steps] * steps
    weights = {k: np.asarray(v, np.float32) for k, v in out["weights"].items()}
    return RunResult("realdist", exercise, out["losses"], weights, step_times, metadata, trace)


def evaluation_metadata(report: dict, tracer, origin: int) -> dict:
    """The coordinator's (and the evaluator's) evaluation report as simdist's
    ``metadata["evaluation"]``, its spans and instants added to ``tracer`` (time 0 at
    ``origin``): "evaluate" on the chief's "evaluation" lane, each evaluation function on
    its worker's "functions" lane, "wrote ckpt-N" where the coordinator wrote a
    checkpoint. Returns (the evaluation, its functions' runs)."""
    out = report["outputs"]["chief"]["out"]
    evaluation = dict(out["evaluation"])
    span = evaluation.pop("span", None)
    if span is not None:
        tracer.span("chief:0", "chief:0", EVALUATION_LANE, "evaluate", "evaluation",
                    span[0] - origin, span[1] - span[0], {"style": evaluation["style"]})
    for run in evaluation.pop("functions", []):
        pid = f"worker:{run['worker']}"
        tracer.span(pid, pid, LANE, run["function"], "function",
                    run["start"] - origin, run["end"] - run["start"],
                    {"function": run["function"],
                     "run": evaluation["function_runs"][run["function"]]})
    runs = evaluation.pop("function_runs", {})
    if "visits" in evaluation:
        evaluation["visits"] = np.asarray(evaluation["visits"], np.int64)
    if evaluation["style"] == "sidecar":
        evaluation.update(report["outputs"]["evaluator"]["sidecar"])
        for c in evaluation["checkpoints"]:
            c["weights"] = {k: np.asarray(v, np.float32) for k, v in c["weights"].items()}
            c["at"] -= origin
            tracer.instant("chief:0", "chief:0", EVALUATION_LANE, f"wrote {c['name']}",
                           "checkpoint", c["at"], {"step": c["step"]})
    return evaluation, runs

