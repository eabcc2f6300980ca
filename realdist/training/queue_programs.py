"""TF1 input pipelines on real TensorFlow, measured in simdist's trace schema.

``real_loader_trainer``: a loader client (worker:1, QueueRunner threads reading examples)
fills a ``FIFOQueue(shared_name="examples")`` on ps:0 while a trainer client (worker:0)
dequeues batches and trains; ``real_ensemble``: the between-graph ensemble (an aggregator,
predictor clients, input and prediction queues, ``operation_timeout_in_ms`` against a slow
predictor); ``real_dataset_trainer``: the same trainer fed by tf.data in one process. The
clusters run on loopback only (``realdist.runtime.localcluster``); the task programs are
``realdist.training.queue_tasks``. simdist's counterparts are ``simdist.training.input_pipeline``'s
``loader_trainer`` and ``ensemble``: the same queue names, devices and results.

Times are wall-clock ``time.monotonic_ns`` from every process, with 0 at the barrier where
the clients start together; "read", "train" and "predict" sleep in ``py_func`` ops for the
time asked, everything else (queue waits, gRPC, sessions) is what real TF took.
"""

from __future__ import annotations

import inspect
import math
import textwrap
from dataclasses import dataclass, field

from simdist.base.errors import InvalidArgumentError
from simdist.trace.schema import Trace, Tracer, build_trace

from realdist.training import queue_tasks
from realdist.runtime.localcluster import Task, run_cluster, run_local

QUEUE = queue_tasks.QUEUE


@dataclass
class PipelineRun:
    """A measured loader/trainer run, with the fields of simdist's: the trace, the trainer's
    step end times, how long its dequeues waited in all (starvation), the run's length and
    the queue's size over time [(ns, size)] (all ns from the start)."""

    trace: Trace
    step_ends: list
    starved_ns: int
    end_time: int
    occupancy: list
    examples: list = field(default_factory=list)  # the example ids the trainer got, in order
    network: dict = field(default_factory=dict)

    @property
    def starved_fraction(self) -> float:
        return self.starved_ns / self.end_time if self.end_time else 0.0

    @property
    def steps_per_second(self) -> float:
        return len(self.step_ends) / (self.end_time / 1e9) if self.end_time else 0.0


@dataclass
class EnsembleRun:
    """A measured ensemble run: for each input the predictions the aggregator received in
    time ({predictor: prediction}) and their mean, how many waits timed out, the late
    predictions it dropped [(input, predictor)], and the trace."""

    received: list
    means: list
    timeouts: int
    late: list
    trace: Trace
    ended_by: dict = field(default_factory=dict)  # predictor k: the error that stopped it
    network: dict = field(default_factory=dict)


def _check(function: str, **values) -> None:
    """Counts must be ints >= 1, times (``*_ms``) finite numbers >= 0."""
    for label, value in values.items():
        is_time = label.endswith("_ms")
        ok = (not isinstance(value, bool) and isinstance(value, (int, float) if is_time else int)
              and value >= (0 if is_time else 1) and (not is_time or math.isfinite(value)))
        if not ok:
            raise InvalidArgumentError(f"{function}: {label}={value!r}, expected "
                                       + ("a finite number of ms >= 0" if is_time
                                          else "an int >= 1"))


def check_loader_trainer(capacity, loaders, steps, batch, load_ms, train_ms, element_size=64,
                         poll_ms=5.0) -> None:
    """``real_loader_trainer``'s options, checked before any process starts."""
    _check("real_loader_trainer", capacity=capacity, loaders=loaders, steps=steps,
           batch=batch, element_size=element_size, load_ms=load_ms, train_ms=train_ms,
           poll_ms=poll_ms)


def check_ensemble(predictors, inputs, slow, predict_ms, slow_ms, timeout_ms) -> None:
    """``real_ensemble``'s options, checked before any process starts."""
    _check("real_ensemble", predictors=predictors, inputs=inputs, timeout_ms=timeout_ms,
           predict_ms=predict_ms, slow_ms=slow_ms)
    if slow is not None and (isinstance(slow, bool) or not isinstance(slow, int)
                             or not 0 <= slow < predictors):
        raise InvalidArgumentError(f"real_ensemble: slow={slow!r}, expected a predictor "
                                   f"index 0..{predictors - 1} or None")


def _task_code(call: str) -> str:
    return inspect.getsource(queue_tasks) + "\n" + call + "\n"


def real_loader_trainer(capacity: int = 8, loaders: int = 2, steps: int = 20, batch: int = 2,
                        load_ms: float = 20.0, train_ms: float = 10.0, element_size: int = 64,
                        poll_ms: float = 5.0, timeout: float = 120) -> PipelineRun:
    """Run the loader/trainer program on a localhost cluster {ps: 1, worker: 2}."""
    check_loader_trainer(capacity, loaders, steps, batch, load_ms, train_ms, element_size,
                         poll_ms)
    tasks = [Task("ps:0", _task_code("serve('ps', 0)"), server=True),
             Task("worker:0", _task_code(f"trainer({capacity}, {batch}, {element_size}, "
                                         f"{steps}, {train_ms}, {poll_ms})")),
             Task("worker:1", _task_code(f"loader({capacity}, {loaders}, {element_size}, "
                                         f"{load_ms})"))]
    report = run_cluster({"ps": 1, "worker": 2}, tasks, timeout)
    out = report["outputs"]
    trainer = out["worker:0"]["trainer"]
    tracer = Tracer()
    for thread, spans in enumerate(out["worker:1"]["loader"]["reads"]):
        lane = f"enqueue thread {thread}"
        for k, (start, end) in enumerate(spans):
            tracer.span("worker:1", "worker:1", lane, "read", "input", start - trainer["start"],
                        end - start)
            if k + 1 < len(spans):  # the rest of the run: the enqueue, waiting for room
                tracer.span("worker:1", "worker:1", lane, f"{QUEUE}_enqueue", "wait",
                            end - trainer["start"], spans[k + 1][0] - end)
    options = {"capacity": capacity, "loaders": loaders, "steps": steps, "batch": batch,
               "load_ms": load_ms, "train_ms": train_ms, "element_size": element_size}
    return _pipeline_run("loader_trainer", tracer, trainer, f"{QUEUE}_DequeueMany", options,
                         report["network"])


def real_dataset_trainer(buffer: int = 8, loaders: int = 2, steps: int = 20, batch: int = 2,
                         load_ms: float = 20.0, train_ms: float = 10.0, element_size: int = 64,
                         seed: int = 0, timeout: float = 120) -> PipelineRun:
    """The tf.data version in one process: map (``loaders`` parallel reads), shuffle
    (``buffer`` examples), batch, prefetch; no queue, so no occupancy counter."""
    _check("real_dataset_trainer", buffer=buffer, loaders=loaders, steps=steps, batch=batch,
           element_size=element_size, load_ms=load_ms, train_ms=train_ms)
    code = _task_code(f"dataset_trainer({loaders}, {buffer}, {batch}, {element_size}, "
                      f"{steps}, {load_ms}, {train_ms}, {seed})")
    trainer = run_local(code, timeout)["trainer"]
    tracer = Tracer()
    lane_ends: list[int] = []  # parallel map calls overlap: each gets a lane free at its start
    for start, end in sorted(trainer["reads"]):
        lane = next((i for i, free in enumerate(lane_ends) if free <= start), len(lane_ends))
        lane_ends[lane:lane + 1] = [end]
        tracer.span("worker:0", "worker:0", f"map call {lane}", "read", "input",
                    start - trainer["start"], end - start)
    options = {"buffer": buffer, "loaders": loaders, "steps": steps, "batch": batch,
               "load_ms": load_ms, "train_ms": train_ms, "element_size": element_size}
    return _pipeline_run("dataset_trainer", tracer, trainer, "IteratorGetNext", options, {})


def _pipeline_run(program, tracer, trainer, wait, options, network) -> PipelineRun:
    """Add the trainer's steps (its ``wait`` for data, then "train") and the queue's size
    to ``tracer``'s records; the run."""
    origin = trainer["start"]
    starved = 0
    for k, ((begin, end), (train_start, train_end)) in enumerate(
            zip(trainer["runs"], trainer["trains"])):
        tracer.span("worker:0", "worker:0", "steps", f"step {k}", "step", begin - origin,
                    end - begin, {"step": k})
        tracer.span("worker:0", "worker:0", "ops", wait, "wait", begin - origin,
                    train_start - begin)
        tracer.span("worker:0", "worker:0", "ops", "train", "compute", train_start - origin,
                    train_end - train_start)
        starved += train_start - begin
    occupancy = [(t - origin, size) for t, size in trainer.get("sizes", [])]
    for t, size in occupancy:
        tracer.counter("ps:0", "ps:0", f"queue {QUEUE}", t, {"size": size})
    processes = [pid for pid in ("ps:0", "worker:0", "worker:1") if pid in tracer.streams]
    trace = build_trace(tracer.streams, processes, processes,
                        {"source": "realdist", "program": program, "options": options,
                         "clock": "wall (time.monotonic_ns)", "network": network})
    step_ends = [end - origin for _, end in trainer["runs"]]
    return PipelineRun(trace, step_ends, starved, step_ends[-1], occupancy, trainer["ids"],
                       network)


def real_ensemble(predictors: int = 2, inputs: int = 3, slow: int | None = None,
                  predict_ms: float = 5.0, slow_ms: float = 1500.0, timeout_ms: int = 500,
                  timeout: float = 120) -> EnsembleRun:
    """Run the between-graph ensemble on a localhost cluster {ps: 1, worker: predictors + 1}:
    predictor ``slow`` takes ``slow_ms`` per prediction, the others ``predict_ms``."""
    check_ensemble(predictors, inputs, slow, predict_ms, slow_ms, timeout_ms)
    tasks = [Task("ps:0", _task_code("serve('ps', 0)"), server=True),
             Task("worker:0", _task_code(f"aggregator({predictors}, {inputs}, "
                                         f"{timeout_ms})"))]
    tasks += [Task(f"worker:{k + 1}", _task_code(
        f"predictor({k}, {predictors}, {inputs}, {slow_ms if k == slow else predict_ms})"))
        for k in range(predictors)]
    report = run_cluster({"ps": 1, "worker": predictors + 1}, tasks, timeout)
    out = report["outputs"]
    agg = out["worker:0"]["aggregator"]
    preds = {k: out[f"worker:{k + 1}"]["predictor"] for k in range(predictors)}
    received = [{int(k): v for k, v in got.items()} for got in agg["received"]]
    means = [sum(got.values()) / len(got) if got else None for got in received]
    origin = agg["start"]
    tracer = Tracer()
    for i, begin, end, k in agg["waits"]:
        name = "predictions_Dequeue" if k is not None else "predictions_Dequeue (timed out)"
        tracer.span("worker:0", "worker:0", "ops", name, "wait", begin - origin, end - begin,
                    {"input": i, "predictor": k})
        if k is None:
            tracer.instant("worker:0", "worker:0", "ops", "DeadlineExceededError", "fault",
                           end - origin, {"input": i})
    for k, pred in preds.items():
        pid = f"worker:{k + 1}"
        for i, (start, end) in enumerate(pred["predicts"]):
            tracer.span(pid, pid, "ops", "predict", "compute", start - origin, end - start,
                        {"input": i})
    processes = ["worker:0"] + [f"worker:{k + 1}" for k in range(predictors)]
    options = {"predictors": predictors, "inputs": inputs, "slow": slow,
               "predict_ms": predict_ms, "slow_ms": slow_ms, "timeout_ms": timeout_ms}
    trace = build_trace(tracer.streams, processes, processes,
                        {"source": "realdist", "program": "ensemble", "options": options,
                         "clock": "wall (time.monotonic_ns)", "network": report["network"]})
    timeouts = sum(1 for *_, k in agg["waits"] if k is None)
    return EnsembleRun(received, means, timeouts, [tuple(x) for x in agg["late"]], trace,
                       {k: pred["ended_by"] for k, pred in preds.items()}, report["network"])


def describe_pipeline(run: PipelineRun) -> list[str]:
    """A few lines for the command line."""
    sizes = [size for _, size in run.occupancy]
    lines = [f"steps: {len(run.step_ends)} in {run.end_time / 1e6:.1f} ms "
             f"({run.steps_per_second:.1f} steps/s)",
             f"trainer starved: {run.starved_ns / 1e6:.1f} ms "
             f"({100 * run.starved_fraction:.0f}% of the time)"]
    if sizes:
        lines.append(f"queue size: mean {sum(sizes) / len(sizes):.1f}, max {max(sizes)} "
                     f"({len(sizes)} samples)")
    if run.network:
        lines.append(_network_line(run.network))
    return lines


def _network_line(network: dict) -> str:
    where = ("a private network namespace (interfaces: "
             f"{', '.join(network['interfaces'])})" if network["namespace"] else
             "the host's network: TF listens on every interface")
    return textwrap.shorten(f"servers: {', '.join(network['listening'])} in {where}", 200)
