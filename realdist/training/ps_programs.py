"""Between-graph training on parameter servers on real TensorFlow, in simdist's trace schema.

``real_train_on_ps`` runs the program of ``simdist.training.ps_training.train_on_ps`` on real
TF 2.21 in graph mode (``tf.compat.v1``), one process per task on a loopback-only localhost
cluster (``realdist.runtime.localcluster``; the worker program is
``realdist.training.ps_tasks``), with the same shards (``simdist.training.ps_spec.shard``),
model and learning rate, a ``py_func`` whose compute ends ``step_ms[k]`` after
its run began where simdist's ``timed_py_func`` takes ``step_us[k]``, and every worker
starting its first step at one agreed instant. It returns simdist's own ``PSTrainingRun``
(times in wall-clock ns from that instant), so that a simulated and a real run compare field
by field; when the same gradients are averaged at each step, the losses agree too.

Which gradients were applied and which dropped (sync). TF's ConditionalAccumulator has no
output that says so; it keeps a global step (set to the global step by the chief's init op,
moved on by one at each take of the chief's queue runner) and silently drops a gradient
whose local step is below it. So each run fetches, without changing what TF does, the
local step its gradients carried (the accumulator apply's own ``local_step`` input) and
when the applies returned; the gradients are then put in the order they reached the ps and
``replay_accumulator`` replays TF's rule on them: accepted if local step >= the
accumulator's step, and a take once ``replicas_to_aggregate`` were accepted since the last
one (never more takes than the global step shows). Each run also read the global step on
the ps right after its applies; a read outside the replay's step before and after that
gradient means the replay's order was wrong, and is counted in the trace's metadata
(``unconfirmed``). The last gradient of a worker whose token wait met the token queue closed
by the stopping chief (OutOfRangeError, as on TF) has no fetches: its local step is read
from the worker's variable and its arrival is the end of its compute.

Failures (``failures=["ps:0@1s+500ms"]``, simdist's syntax, ``simdist.distribute.failures``).
The launcher kills the task's process (SIGKILL) that long after the start line and starts the
same program on the same port the downtime later (``realdist.runtime.localcluster``, in ms:
every failure needs a downtime here); a restarted worker skips the
start line, a restarted chief restores the latest checkpoint of ``checkpoint_dir``. What
each MonitoredSession does about it is read from what TF logs, without changing it: a new
session after an ``UnavailableError``/``AbortedError`` ("session made again"), the saver's
"checkpoint restored" (with the highest global step reached before and the checkpoint's),
the ``CheckpointSaverHook``'s saves. The kill, the restart and the moment the task's server
listens again ("task serving again": a new TF process takes seconds to start) are on the
task's "faults" lane, the time between them a "task down" span. After a restore the
accumulators (new after a ps restart, reset by a restarted chief) start again at the
checkpoint's step, and the replay does too. A non-chief's ``SessionManager`` polls every
50 ms for the chief's restore instead of TF's 30 s (``recovery_wait_secs``).

Not like simdist: after its compute, each ``Session.run`` through gRPC costs real TF a few
ms (the gradients' trip to the ps, the fetches; more on a busy machine) that simdist does
not price, so real workers drift later run after run. The token queue realigns sync workers
at every step; async workers drift freely, so a fast worker may read the global step one
update later than in simdist and stop one run earlier.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import re
from typing import NamedTuple

from simdist.base.checks import check_learning_rate, check_seed
from simdist.base.errors import InvalidArgumentError
from simdist.distribute.failures import SYNTAX, Failure
from simdist.training.ps_spec import FEATURES, MODELS, MODES, shard
from simdist.training.ps_training import PSTrainingRun
from simdist.trace.schema import Tracer, build_trace
from simdist.hardware.units import check_seconds

from realdist.training import ps_tasks
from realdist.training import queue_tasks
from realdist.runtime.localcluster import Task, kill_orders, run_cluster
from realdist.training.queue_programs import _check

MAX_WORKERS, MAX_PS = 8, 4  # every task is a TensorFlow process on this machine


class Arrival(NamedTuple):
    """A worker's gradients reaching the accumulators: when (ns), from which worker and
    run, with which local step, and the global step read on the ps right after (None for
    a run that ended in OutOfRangeError)."""

    time: int
    worker: int
    run: int
    local_step: int
    read_after: int | None


class Replayed(NamedTuple):
    """What the accumulator did with an arrival: ``applied`` or dropped, its step when the
    gradient came (the instant's ``global_step``) and after it (a take may follow)."""

    arrival: Arrival
    applied: bool
    step_before: int
    step_after: int


def replay_accumulator(arrivals, replicas_to_aggregate: int, max_takes: int,
                       restores=()) -> list[Replayed]:
    """TF's ConditionalAccumulator under the chief's ``take_grad(replicas_to_aggregate)``,
    replayed over ``arrivals`` in time order (see the module docstring). ``restores``:
    [(time, global step, most takes)]: from that time on (a chief that restored a
    checkpoint, with new accumulators after a ps restart) the step is the checkpoint's, with
    no gradient gathered yet, and at most that many takes are replayed until the next one."""
    step = count = 0
    replayed = []
    marks = sorted(restores)
    for arrival in sorted(arrivals):
        while marks and marks[0][0] <= arrival.time:
            _, step, max_takes = marks.pop(0)
            count = 0
        before = step
        applied = arrival.local_step >= step
        count += applied
        if count >= replicas_to_aggregate and step < max_takes:
            step, count = step + 1, 0
        replayed.append(Replayed(arrival, applied, before, step))
    return replayed


def unconfirmed(replayed) -> int:
    """Arrivals whose global step read right after them is outside the replay's step
    before and after them."""
    return sum(1 for r in replayed if r.arrival.read_after is not None
               and not r.step_before <= r.arrival.read_after <= r.step_after)


def check_train_on_ps(workers, ps, mode, steps, step_ms, replicas_to_aggregate,
                      learning_rate, timeout, stop_grace_period_secs=1.0, seed=0,
                      failures=(), checkpoint_dir=None, save_checkpoint_steps=None,
                      model="dense") -> list:
    """``real_train_on_ps``'s options, checked before any process starts; the step times
    (default 100 ms each)."""
    _check("real_train_on_ps", workers=workers, ps=ps, steps=steps)
    check_seed(seed, "real_train_on_ps: seed (--seed)")  # simdist ps's rules
    check_learning_rate(learning_rate, "real_train_on_ps: learning_rate (--learning-rate)")
    for label, value, most in (("workers", workers, MAX_WORKERS), ("ps", ps, MAX_PS)):
        if value > most:
            raise InvalidArgumentError(f"real_train_on_ps: {label}={value}, expected at most "
                                       f"{most}: every task is a TensorFlow process here")
    if mode not in MODES:
        raise InvalidArgumentError(f"real_train_on_ps: mode={mode!r}, expected 'sync' or "
                                   "'async'")
    if model not in MODELS:
        raise InvalidArgumentError(f"real_train_on_ps: model={model!r}, expected 'dense' or "
                                   "'sparse'")
    if model == "sparse" and ps > 1:
        raise InvalidArgumentError("real_train_on_ps: the sparse model is built for one ps "
                                   f"(ps={ps}), as simdist's train_on_ps")
    step_ms = [100.0] * workers if step_ms is None else list(step_ms)
    if len(step_ms) != workers or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and 0 <= t <= 60_000
            for t in step_ms):
        raise InvalidArgumentError(f"real_train_on_ps: step_ms={step_ms!r}, expected {workers} "
                                   "step times in ms (0 to 60000), one per worker")
    if replicas_to_aggregate is not None:
        _check("real_train_on_ps", replicas_to_aggregate=replicas_to_aggregate)
        if mode == "sync" and replicas_to_aggregate > workers:
            raise InvalidArgumentError(
                f"real_train_on_ps: replicas_to_aggregate={replicas_to_aggregate} is more "
                f"than the {workers} workers (expected 1..{workers})")
    check_seconds(timeout, "timeout")
    grace = stop_grace_period_secs
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not 0 <= grace < timeout:
        raise InvalidArgumentError(f"real_train_on_ps: stop_grace_period_secs={grace!r}, "
                                   f"expected seconds >= 0 and below the timeout ({timeout:g})")
    failures = [Failure.parse(f, old_unit="ms") for f in failures]
    for f in failures:
        if f.down_ns is None:
            raise InvalidArgumentError(f"real_train_on_ps: failure '{f}': expected a downtime "
                                       f"({SYNTAX} with +DOWN): the launcher starts every "
                                       "task it kills again")
    kill_orders(_in_ms(failures), {"ps": ps, "worker": workers}, "real_train_on_ps")
    if save_checkpoint_steps is not None:
        if checkpoint_dir is None:
            raise InvalidArgumentError("real_train_on_ps: save_checkpoint_steps="
                                       f"{save_checkpoint_steps!r} needs a checkpoint_dir")
        _check("real_train_on_ps", save_checkpoint_steps=save_checkpoint_steps)
    if checkpoint_dir is not None and not isinstance(checkpoint_dir, (str, os.PathLike)):
        raise InvalidArgumentError(f"real_train_on_ps: checkpoint_dir={checkpoint_dir!r}, "
                                   "expected a folder's path")
    return step_ms


def _in_ms(failures) -> list[tuple]:
    """Failure records as the launcher's (task, at_ms, down_ms)."""
    return [(f.task, f.at_ns / 1e6, f.down_ns / 1e6) for f in failures]


def real_train_on_ps(workers: int = 3, ps: int = 1, mode: str = "sync", steps: int = 10,
                     step_ms=None, replicas_to_aggregate: int | None = None,
                     learning_rate: float = 0.05, seed: int = 0,
                     stop_grace_period_secs: float = 1.0, failures=(),
                     checkpoint_dir=None, save_checkpoint_steps: int | None = None,
                     timeout: float = 240, model: str = "dense") -> PSTrainingRun:
    """Run ``train_on_ps``'s program on real TF on a localhost cluster {ps, worker}; see the
    module docstring. ``step_ms`` (one per worker, default 100 ms each) is each worker's
    compute time per step; ``stop_grace_period_secs`` is MonitoredTrainingSession's (a sync
    chief waits that long at its close; TF's default is 120 s). ``failures``: simdist's
    syntax, e.g. "ps:0@1s+500ms": the task's process is killed that long after the start
    line and started again the downtime later (see "Failures" above);
    ``checkpoint_dir`` and ``save_checkpoint_steps`` are MonitoredTrainingSession's."""
    step_ms = check_train_on_ps(workers, ps, mode, steps, step_ms, replicas_to_aggregate,
                                learning_rate, timeout, stop_grace_period_secs, seed,
                                failures, checkpoint_dir, save_checkpoint_steps, model)
    failures = [Failure.parse(f, old_unit="ms") for f in failures]
    if checkpoint_dir is not None:
        checkpoint_dir = os.path.abspath(checkpoint_dir)
    aggregate = replicas_to_aggregate or workers
    source = inspect.getsource(queue_tasks) + "\n" + inspect.getsource(ps_tasks) + "\n"
    tasks = [Task(f"ps:{i}", source + f"serve('ps', {i})", server=True) for i in range(ps)]
    for k in range(workers):
        x, y, ids = shard(k, seed, features=FEATURES, model=model)
        options = {"mode": mode, "workers": workers, "ps": ps, "steps": steps,
                   "replicas_to_aggregate": aggregate, "learning_rate": learning_rate,
                   "step_ms": step_ms, "grace_secs": stop_grace_period_secs,
                   "checkpoint_dir": checkpoint_dir,
                   "save_checkpoint_steps": save_checkpoint_steps, "x": x.tolist(),
                   "y": y.tolist(), "model": model, "features": FEATURES,
                   "ids": None if ids is None else ids.tolist()}
        tasks.append(Task(f"worker:{k}", source + f"ps_worker({k}, json.loads("
                                                  f"{json.dumps(options)!r}))"))
    report = run_cluster({"ps": ps, "worker": workers}, tasks, timeout, _in_ms(failures))
    options = {"workers": workers, "ps": ps, "mode": mode, "steps": steps,
               "step_ms": step_ms, "replicas_to_aggregate": replicas_to_aggregate,
               "learning_rate": learning_rate, "seed": seed,
               "stop_grace_period_secs": stop_grace_period_secs,
               "failures": [str(f) for f in failures], "checkpoint_dir": checkpoint_dir,
               "save_checkpoint_steps": save_checkpoint_steps, "model": model}
    return _training_run(report["outputs"], options, aggregate, report["network"],
                         report["failures"])


def _incarnations(outputs: dict, k: int) -> list[dict]:
    """What each process of worker:k emitted, first to last (one more per restart)."""
    labels = [f"worker:{k}"] + [f"worker:{k}#{n}" for n in range(1, len(outputs))]
    return [outputs[label] for label in labels if label in outputs]


def _arrivals(k: int, out: dict) -> list[Arrival]:
    """The gradients one process of worker k brought to the accumulators (sync)."""
    runs = out.get("run", [])
    arrivals = [Arrival(run["applied_at"], k, n, run["local_step"], run["step_at_apply"])
                for n, run in enumerate(runs)]
    ended = out.get("ended_by")
    if ended is not None and "last_compute" in out and "local_step" in ended:
        arrivals.append(Arrival(out["last_compute"][1], k, len(runs), ended["local_step"],
                                None))
    return arrivals


def checkpoint_step(path: str) -> int:
    """The global step of a checkpoint prefix (".../model.ckpt-3" -> 3)."""
    return int(path.rsplit("-", 1)[1])


def _restores(outputs: dict, failures: list, runs: list) -> list[tuple]:
    """[(time ns, global step, highest step read until the next)]: where the accumulators
    start again, after a ps or the chief failed: the chief's restore (or its new
    initialization at step 0 without a checkpoint)."""
    chief = [e for out in _incarnations(outputs, 0) for e in out.get("event", [])]
    marks = []
    for failure in failures:
        if failure["restarted"] is None or not (failure["task"].startswith("ps:")
                                                or failure["task"] == "worker:0"):
            continue
        restore = next((e for e in chief if e["kind"] == "restore"
                        and e["t"] >= failure["restarted"]), None)
        marks.append((restore["t"], checkpoint_step(restore["path"])) if restore
                     else (failure["restarted"], 0))
    bounds = [t for t, _ in marks] + [math.inf]
    return [(t, step, max((s for end, s in runs if t <= end < bounds[i + 1]), default=step))
            for i, (t, step) in enumerate(marks)]


def _training_run(outputs: dict, options: dict, aggregate: int, network: dict,
                  failures=()) -> PSTrainingRun:
    """simdist's PSTrainingRun from every process's output."""
    mode, workers = options["mode"], options["workers"]
    t0 = min(out["start_line"] for out in outputs.values() if "start_line" in out)
    tracer = Tracer()
    worker_runs, staleness, recoveries, restores = {}, [], {}, []
    all_runs = []  # (end, highest global step it read)
    for k in range(workers):
        pid, processes = f"worker:{k}", _incarnations(outputs, k)
        worker_runs[k], recoveries[k] = [], len(processes) - 1
        for out in processes:
            for run in out.get("run", []):
                n = len(worker_runs[k])
                worker_runs[k].append((run["end"] - t0, run["step_after"], run["loss"]))
                all_runs.append((run["end"], max(run["step_after"],
                                                 run.get("step_at_apply", 0))))
                args = {"global_step_after": run["step_after"], "loss": run["loss"]}
                if mode == "async":
                    staleness.append(run["step_after"] - 1 - run["step_read"])
                    args["staleness"] = staleness[-1]
                else:
                    args["local_step"] = run["local_step"]
                    tracer.span(pid, pid, "CPU:0 waits", "sync_token_q_Dequeue", "wait",
                                run["applied_at"] - t0, run["end"] - run["applied_at"])
                tracer.span(pid, pid, "steps", f"run {n}", "step", run["begin"] - t0,
                            run["end"] - run["begin"], args)
            computes = [run["compute"] for run in out.get("run", [])]
            for start, end in computes + ([out["last_compute"]] if "last_compute" in out
                                          else []):
                start = max(start, t0)
                tracer.span(pid, pid, "CPU:0", "compute", "compute", start - t0, end - start)
            if out.get("ended_by") is not None:
                tracer.instant(pid, pid, "steps", out["ended_by"]["error"], "event",
                               out["left"] - t0, {"message": out["ended_by"]["message"]})
            for event in out.get("event", []):
                if event["kind"] == "recreate":
                    recoveries[k] += 1
                    tracer.instant(pid, pid, "session", "session made again", "event",
                                   event["t"] - t0, {"error": event["error"],
                                                     "message": event["message"]})
                elif event["kind"] == "restore":
                    restores.append((event["t"], pid, event["path"]))
                elif event["kind"] == "save":
                    tracer.instant(pid, pid, "session", "checkpoint saved", "event",
                                   event["t"] - t0, {"global_step": event["step"]})
    for t, pid, path in restores:
        before = max((s for end, s in all_runs if end < t), default=0)
        tracer.instant(pid, pid, "session", "checkpoint restored", "event", t - t0,
                       {"checkpoint": path, "global_step_before": before,
                        "global_step_after": checkpoint_step(path)})
    for failure in failures:
        task, killed, back = failure["task"], failure["killed"], failure["restarted"]
        tracer.instant(task, task, "faults", "task failed", "fault", killed - t0,
                       {"at_ms": failure["at_ms"]})
        if back is not None:
            tracer.instant(task, task, "faults", "task restarted", "fault", back - t0,
                           {"down_ms": failure["down_ms"]})
        up = failure["serving"] or back
        if up is not None:
            tracer.span(task, task, "faults", "task down", "fault", killed - t0, up - killed)
        if failure["serving"] is not None:  # its TF server listens again
            tracer.instant(task, task, "faults", "task serving again", "fault", up - t0)
    global_step = max((s for _, s in all_runs), default=0)
    checks = {}
    if mode == "sync":
        arrivals = [a for k in range(workers) for out in _incarnations(outputs, k)
                    for a in _arrivals(k, out)]
        marks = _restores(outputs, failures, all_runs)
        first = max((s for end, s in all_runs if end < marks[0][0]), default=0) if marks \
            else global_step
        replayed = replay_accumulator(arrivals, aggregate, first, marks)
        accumulator, device = next(iter(outputs["worker:0"]["accumulators"].items()))
        ps = "ps:" + re.search(r"task:(\d+)", device).group(1)
        for r in replayed:
            a = r.arrival
            tracer.instant(ps, ps, "accumulators",
                           "gradient applied" if r.applied else "gradient dropped", "event",
                           a.time - t0, {"accumulator": accumulator, "local_step": a.local_step,
                                         "global_step": r.step_before,
                                         "source": f"/job:worker/task:{a.worker}"})
        checks = {"arrivals": len(replayed), "unconfirmed": unconfirmed(replayed)}
    closed = [out["closed"] for out in outputs.values() if out.get("closed") is not None]
    processes = [f"worker:{k}" for k in range(workers)] + [f"ps:{i}"
                                                             for i in range(options["ps"])]
    trace = build_trace(tracer.streams, processes, processes, {
        "source": "realdist", "program": "train_on_ps", "options": options,
        "clock": "wall (time.monotonic_ns), 0 when every worker's first step starts",
        "network": network, "replay": checks,
        "accumulators": outputs["worker:0"].get("accumulators", {}),
        "session_creation_failures": {  # tries TF's MonitoredSession made while a ps was down
            k: sum(e["kind"] == "creating" for out in _incarnations(outputs, k)
                   for e in out.get("event", [])) for k in range(workers)},
        "failures": [{**f, **{key: None if f[key] is None else f[key] - t0
                              for key in ("killed", "restarted", "serving")},
                      "start_line": None} for f in failures]})
    run = PSTrainingRun(trace, mode, worker_runs, global_step, 0, 0, staleness,
                        max(closed, default=t0) - t0, clock="wall-clock")
    run.recoveries = recoveries
    run.restored_from = max(restores)[2] if restores else None
    counts = run.gradients_by_worker().values()
    run.applied, run.dropped = sum(a for a, _ in counts), sum(d for _, d in counts)
    return run
