"""The exercise spec and the run result that simdist and realdist share.

An ``Exercise`` says what to train and how to distribute it (model, dataset, global batch,
steps, learning rate, seed, strategy, cluster shape, devices per worker, hardware profile).
``simdist`` simulates it, ``realdist`` runs it on real TensorFlow; both return a ``RunResult``
(per-step losses, final weights, per-step times, metadata, trace) that ``simdist compare``
sets side by side. Both halves train with plain SGD on the mean loss over the global batch::

    w <- w - learning_rate * (1 / global_batch) * sum over the batch of d(loss_i)/dw
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simdist.training.data import DATASETS, load_dataset
from simdist.distribute import cross_device_ops
from simdist.distribute.failures import check_failures
from simdist.distribute.registry import STRATEGIES, strategy_named
from simdist.base.checks import check_int, check_learning_rate, check_seed
from simdist.base.errors import InvalidArgumentError, brief
from simdist.hardware.stragglers import Stragglers, parse_stragglers
from simdist.training.models import MODELS, make_model

RESULT_SCHEMA = 1

#: MirroredStrategy's cross_device_ops, by the name of TF's class ("auto": TF's choice)
CROSS_DEVICE_OPS = ("auto", *cross_device_ops.CROSS_DEVICE_OPS)
#: MultiWorkerMirroredStrategy's CommunicationImplementation
COMMUNICATIONS = tuple(c.value for c in cross_device_ops.CommunicationImplementation)


#: the largest sizes an exercise accepts: beyond them the arrays alone outgrow a machine's
#: memory (the number of steps, replicas and workers is bounded by the run's cost instead)
MAX_SIZE = {"global_batch": 1 << 20, "hidden": 1 << 16, "workers": 4096,
            "devices_per_worker": 4096, "ps": 4096}

#: the command-line option of each exercise field whose name differs from it
OPTION = {"devices_per_worker": "--replicas", "global_batch": "--global-batch",
          "steps_per_execution": "--steps-per-execution"}


@dataclass
class Exercise:
    """One synchronous data-parallel training exercise (the same in both halves)."""

    strategy: str = "mirrored"
    model: str = "linear"
    dataset: str = "regression"
    global_batch: int = 64
    steps: int = 20
    learning_rate: float = 0.1
    seed: int = 0
    workers: int = 1  # tasks of the "worker" job (MultiWorkerMirroredStrategy)
    devices_per_worker: int = 4  # replicas on each worker (Mirrored, CentralStorage, MWMS)
    cross_device_ops: str = "auto"  # MirroredStrategy
    communication: str = "auto"  # MultiWorkerMirroredStrategy
    hardware: str = "cpu"  # simdist hardware system profile
    hidden: int = 32  # the MLP's hidden units
    ps: int = 1  # parameter server tasks (parameter_server)
    steps_per_execution: int = 1  # steps per scheduled function or TPU dispatch (ps, tpu)
    failures: tuple = ()  # injected failures, "worker:1@2ms+1ms" (parameter_server)
    #: each worker's step compute times a seeded draw (``simdist.hardware.stragglers``):
    #: none, lognormal:SIGMA, exponential:MEAN or empirical:FILE (synchronous strategies)
    stragglers: str = "none"

    def __post_init__(self):
        self.validate()

    @property
    def num_replicas(self) -> int:
        """``strategy.num_replicas_in_sync``."""
        record = strategy_named(self.strategy)
        if record.asynchronous:
            return 1  # ParameterServerStrategy: each worker steps on its own
        per_worker = 1 if record.single_replica else self.devices_per_worker
        return per_worker * self.num_workers

    @property
    def num_workers(self) -> int:
        return self.workers if strategy_named(self.strategy).multi_worker else 1

    def validate(self) -> None:
        """A clear error for every bad value, before any training starts."""
        for name in ("strategy", "model", "dataset", "cross_device_ops", "communication",
                     "hardware", "stragglers"):
            if not isinstance(getattr(self, name), str):
                raise InvalidArgumentError(f"{name} must be a string, got "
                                           f"{brief(getattr(self, name))}")
        record = strategy_named(self.strategy)
        _choice("model", self.model, tuple(MODELS))
        _choice("dataset", self.dataset, tuple(DATASETS))
        _choice("cross_device_ops", self.cross_device_ops, CROSS_DEVICE_OPS)
        _choice("communication", self.communication, COMMUNICATIONS)
        for name in ("global_batch", "steps", "workers", "devices_per_worker", "hidden", "ps",
                     "steps_per_execution"):
            label = f"{name} ({OPTION[name]})" if name in OPTION else name
            check_int(getattr(self, name), label, 1, MAX_SIZE.get(name),
                      "the most this exercise can hold in memory")
        check_seed(self.seed, "seed (--seed)")
        check_learning_rate(self.learning_rate, "learning_rate (--learning-rate)")
        if self.cross_device_ops != "auto" and self.strategy != "mirrored":
            raise InvalidArgumentError(f"cross_device_ops (--cross-device-ops) is "
                                       f"MirroredStrategy's option, not {self.strategy}'s")
        if self.communication != "auto" and self.strategy != "multi_worker_mirrored":
            raise InvalidArgumentError(f"communication (--communication) is "
                                       f"MultiWorkerMirroredStrategy's option, not "
                                       f"{self.strategy}'s")
        if not isinstance(self.failures, (list, tuple)) or not all(
                isinstance(f, str) for f in self.failures):
            raise InvalidArgumentError(f"failures must be a list of strings like "
                                       f"'worker:1@2ms+1ms', got {brief(self.failures)}")
        self.failures = tuple(self.failures)
        if (self.ps != 1 or self.failures) and self.strategy != "parameter_server":
            raise InvalidArgumentError(f"ps and failures are parameter_server's options, not "
                                       f"{self.strategy}'s")
        if self.steps_per_execution != 1 and self.strategy not in ("parameter_server", "tpu"):
            raise InvalidArgumentError(f"steps_per_execution is an option of parameter_server "
                                       f"and tpu, not of {self.strategy}")
        if self.strategy == "parameter_server":
            check_failures(self)
        if self.straggler_draws().active and record.asynchronous:
            raise InvalidArgumentError(
                f"stragglers (--stragglers) {brief(self.stragglers)} is an option of the "
                f"synchronous strategies, not of {self.strategy} ('simdist ps --stragglers' draws "
                "them for TF1's parameter-server training)")
        if not record.multi_worker and self.workers != 1:
            several = [name for name, r in STRATEGIES.items() if r.multi_worker]
            raise InvalidArgumentError(
                f"workers={self.workers} with strategy {self.strategy!r}: only "
                f"{' or '.join(several)} uses several workers")
        if self.global_batch < self.num_replicas:
            raise InvalidArgumentError(
                f"global batch {self.global_batch} is smaller than the {self.num_replicas} "
                f"replicas of {self.strategy}: every replica needs at least one example "
                f"(give a global batch >= {self.num_replicas})")

    def straggler_draws(self) -> Stragglers:
        """The ``Stragglers`` record of ``stragglers``; a one-line error for a bad spec."""
        try:
            return _parse_stragglers(self.stragglers)
        except InvalidArgumentError as error:
            text = str(error)
            text = text[len("stragglers"):] if text.startswith("stragglers ") else f": {text}"
            raise InvalidArgumentError(f"stragglers (--stragglers){text}") from None

    def build(self):
        """(model, dataset), checked against each other."""
        data = load_dataset(self.dataset, seed=self.seed)
        options = {"hidden": self.hidden} if self.model == "mlp" else {}
        model = make_model(self.model, data.n_features, data.n_outputs, **options)
        if model.task != data.task:
            raise InvalidArgumentError(
                f"model {self.model!r} is a {model.task} model but dataset {self.dataset!r} "
                f"is a {data.task} dataset: pick matching ones (regression: linear; "
                "classification, digits: softmax, mlp; vocab: embedding)")
        model.check_batch(data.x[:1], data.y[:1])
        return model, data

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Exercise:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InvalidArgumentError(f"unknown exercise field(s) {unknown}: expected "
                                       f"{sorted(known)}")
        return cls(**d)

    # -- command line (simdist run and realdist run take the same options) ------------------

    @staticmethod
    def add_arguments(parser, default_strategy: str = "mirrored") -> None:
        d = Exercise()
        records = [r for r in STRATEGIES.values() if not r.single_replica]
        parser.add_argument("--replicas", type=int, default=None,
                            help="replicas (devices) per worker (default: " + ", ".join(
                                f"{r.default_replicas} for {r.name}" for r in records) + ")")
        parser.add_argument("--workers", type=int, default=None,
                            help="worker tasks (" + ", ".join(
                                f"{r.name}: default {r.default_workers}"
                                for r in STRATEGIES.values() if r.multi_worker) + ")")
        parser.add_argument("--model", default=d.model, choices=list(MODELS))
        parser.add_argument("--dataset", default=d.dataset,
                            choices=["regression", "classification", "digits", "vocab"])
        parser.add_argument("--global-batch", type=int, default=d.global_batch)
        parser.add_argument("--steps", type=int, default=d.steps)
        parser.add_argument("--learning-rate", type=float, default=d.learning_rate)
        parser.add_argument("--hidden", type=int, default=d.hidden,
                            help="hidden units of the mlp model (default 32)")
        parser.add_argument("--cross-device-ops", choices=list(CROSS_DEVICE_OPS),
                            help=f"MirroredStrategy's (default {d.cross_device_ops})")
        parser.add_argument("--communication", choices=list(COMMUNICATIONS),
                            help="MultiWorkerMirroredStrategy's CommunicationImplementation "
                                 f"(default {d.communication})")
        parser.add_argument("--ps", type=int, default=d.ps,
                            help="parameter server tasks (parameter_server)")
        parser.add_argument("--steps-per-execution", type=int, default=d.steps_per_execution,
                            help="steps per scheduled function (parameter_server) or per "
                                 "host dispatch (tpu)")
        parser.add_argument("--fail", action="append", default=[], metavar="TASK@TIME[+DOWN]",
                            help="inject a failure, e.g. worker:1@2ms+1ms (parameter_server; "
                                 "repeatable)")
        parser.add_argument("--stragglers", default=d.stragglers, metavar="SPEC",
                            help="each worker's forward+backward time times a seeded draw per "
                                 "step, shared by its replicas (synchronous strategies; "
                                 "simdist only): lognormal:SIGMA, exponential:MEAN or "
                                 "empirical:FILE of measured step times; default none")
        parser.add_argument("--result", metavar="FILE",
                            help="write the RunResult JSON here (for 'simdist compare')")
        parser.add_argument("--result-no-trace", action="store_true",
                            help="leave the trace out of the --result file (a smaller file; "
                                 "--trace writes it apart)")

    @classmethod
    def from_args(cls, strategy: str, args, seed: int = 0, hardware: str = "cpu") -> Exercise:
        record = strategy_named(strategy)
        workers = record.default_workers if args.workers is None else args.workers
        for option, value, ignored in (
                ("--replicas", args.replicas, record.single_replica),
                ("--cross-device-ops", args.cross_device_ops, strategy != "mirrored"),
                ("--communication", args.communication, strategy != "multi_worker_mirrored")):
            if value is not None and ignored:  # given, and the strategy would not read it
                raise InvalidArgumentError(f"{option} {value}: {strategy} has no such option "
                                           f"({option} {_IGNORED_BY[option]}): leave it out")
        replicas = record.default_replicas if args.replicas is None else args.replicas
        return cls(strategy=strategy, model=args.model, dataset=args.dataset,
                   global_batch=args.global_batch, steps=args.steps,
                   learning_rate=args.learning_rate, seed=seed, workers=workers,
                   devices_per_worker=replicas, cross_device_ops=args.cross_device_ops or "auto",
                   communication=args.communication or "auto", hardware=hardware,
                   hidden=args.hidden,
                   ps=getattr(args, "ps", 1),
                   steps_per_execution=getattr(args, "steps_per_execution", 1),
                   failures=tuple(getattr(args, "fail", ())),
                   stragglers=getattr(args, "stragglers", "none"))


#: what an option of ``Exercise.add_arguments`` is for, said when a strategy that ignores it
#: is given it
_IGNORED_BY = {"--replicas": "is the devices of a worker for the strategies that run a "
                             "replica on each",
               "--cross-device-ops": "is MirroredStrategy's",
               "--communication": "is MultiWorkerMirroredStrategy's"}


@functools.lru_cache(maxsize=8)
def _parse_stragglers(spec: str) -> Stragglers:
    """``parse_stragglers``, once per spec (an empirical file is read once, not per task)."""
    return parse_stragglers(spec)


def _choice(what, value, choices):
    if value not in choices:
        raise InvalidArgumentError(f"unknown {what} {brief(value)}: expected one of "
                                   f"{', '.join(choices)}")


@dataclass
class RunResult:
    """What one run of an exercise produced, in simdist or in realdist."""

    source: str  # "simdist" or "realdist"
    exercise: Exercise
    losses: list[float]  # the global-batch mean loss of every step, before its update
    weights: dict[str, np.ndarray]  # final weights
    step_times_ns: list[int]  # simulated (simdist) or measured wall-clock (realdist) ns
    metadata: dict = field(default_factory=dict)
    trace: object = None  # a simdist.trace.schema.Trace, or None

    def to_json(self, with_trace: bool = True) -> dict:
        return {"schema": RESULT_SCHEMA, "source": self.source,
                "exercise": self.exercise.to_dict(),
                "losses": [float(x) for x in self.losses],
                "step_times_ns": [int(t) for t in self.step_times_ns],
                "weights": {k: {"dtype": v.dtype.str, "shape": list(v.shape),
                                "data": v.reshape(-1).tolist()} for k, v in self.weights.items()},
                "metadata": self.metadata,
                "trace": None if self.trace is None or not with_trace
                else self.trace.to_chrome()}

    def save(self, path, with_trace: bool = True) -> Path:
        """Write the result's JSON (``with_trace=False``: without its trace)."""
        from simdist.base.files import write_atomic

        return write_atomic(path, json.dumps(self.to_json(with_trace), default=_numpy_to_json))

    @classmethod
    def from_json(cls, d: dict, source: str = "run result") -> RunResult:
        """A run result from its JSON, checked: a hand-edited one is an InvalidArgumentError
        naming ``source``, the field and what is wrong."""
        from simdist.trace.schema import Trace

        if not isinstance(d, dict) or d.get("schema") != RESULT_SCHEMA:
            schema = d.get("schema") if isinstance(d, dict) else d
            raise InvalidArgumentError(f"{source}: run result schema {brief(schema)}: expected "
                                       f"{RESULT_SCHEMA}")
        _check_fields(d, source, {"source": str, "exercise": dict, "losses": list,
                                  "step_times_ns": list, "weights": dict, "metadata": dict})
        if d["source"] not in ("simdist", "realdist"):
            raise InvalidArgumentError(f"{source}: source {brief(d['source'])}: expected "
                                       "'simdist' or 'realdist'")
        losses = d["losses"]
        if not all(_is_number(x) for x in losses):
            raise InvalidArgumentError(f"{source}: losses {brief(losses)}: expected numbers")
        times = d["step_times_ns"]
        if not all(_is_int(t) and t >= 0 for t in times):
            raise InvalidArgumentError(f"{source}: step_times_ns {brief(times)}: expected "
                                       "ints >= 0 (nanoseconds)")
        weights = {k: _weight_from_json(v, f"{source}: weight {brief(k)}")
                   for k, v in d["weights"].items()}
        try:
            exercise = Exercise.from_dict(d["exercise"])
        except InvalidArgumentError as error:
            raise InvalidArgumentError(f"{source}: its exercise: {error}") from None
        trace = None if d.get("trace") is None else Trace.from_chrome(
            d["trace"], source=f"{source}: its trace")
        return cls(d["source"], exercise, list(losses), weights, list(times),
                   dict(d["metadata"]), trace)

    @classmethod
    def load(cls, path) -> RunResult:
        from simdist.base.files import read_json

        data = read_json(path, "run result")
        if isinstance(data, dict) and "traceEvents" in data:
            raise InvalidArgumentError(f"'{path}' is a trace (--trace), not a run result: "
                                       "give the file of --result")
        if not isinstance(data, dict) or "losses" not in data:
            raise InvalidArgumentError(f"'{path}' is not a run result (written by "
                                       "'simdist run ... --result' or 'realdist run')")
        return cls.from_json(data, source=f"run result file '{path}'")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_KIND_WORD = {str: "a string", dict: "a JSON object", list: "a JSON list"}


def _check_fields(d: dict, source: str, types: dict) -> None:
    for key, kind in types.items():
        if key not in d:
            raise InvalidArgumentError(f"{source} has no {key!r}")
        if not isinstance(d[key], kind):
            raise InvalidArgumentError(f"{source}: {key!r} is {brief(d[key])}: expected "
                                       f"{_KIND_WORD[kind]}")


def _weight_from_json(v, where: str) -> np.ndarray:
    """One weight of a run result's JSON: {"dtype": "<f4", "shape": [...], "data": [...]}."""
    if not isinstance(v, dict):
        raise InvalidArgumentError(f"{where} is {brief(v)}: expected an object with dtype, "
                                   "shape and data")
    _check_fields(v, where, {"dtype": str, "shape": list, "data": list})
    try:
        dtype = np.dtype(v["dtype"])
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in "fiu":
        raise InvalidArgumentError(f"{where}: dtype {brief(v['dtype'])}: expected a numeric "
                                   "dtype such as '<f4'")
    shape, data = v["shape"], v["data"]
    if not all(_is_int(n) and n >= 0 for n in shape) \
            or len(data) != int(np.prod(shape, dtype=np.float64)):
        raise InvalidArgumentError(f"{where}: shape {brief(shape)} does not hold the "
                                   f"{len(data)} numbers of its data")
    if not all(_is_number(x) for x in data):
        raise InvalidArgumentError(f"{where}: data {brief(data)}: expected numbers")
    try:
        return np.array(data, dtype=dtype).reshape(shape)
    except OverflowError:
        raise InvalidArgumentError(f"{where}: a number of its data does not fit "
                                   f"{dtype}") from None


def result_problems(run: RunResult) -> list[str]:
    """Why ``run`` cannot stand in a weight-parity check (empty when it can): fewer (or more)
    steps than its exercise says, or a loss or weight that is NaN or infinite."""
    steps = run.exercise.steps
    problems = [f"it holds {len(values)} {what} for the {steps} steps of its exercise"
                for what, values in (("losses", run.losses), ("step times", run.step_times_ns))
                if len(values) != steps]
    bad = [k for k, loss in enumerate(run.losses) if not math.isfinite(loss)]
    if bad:
        problems.append(f"its loss is {run.losses[bad[0]]} at step {bad[0]}"
                        + (f" (and {len(bad) - 1} more steps)" if len(bad) > 1 else ""))
    problems += [f"its weight {name!r} holds NaN or inf" for name, w in run.weights.items()
                 if not np.all(np.isfinite(w))]
    return problems


def comparison_problems(a: RunResult, b: RunResult) -> list[str]:
    """``result_problems`` of both runs, each naming its run."""
    return [f"the {run.source} run ({which}): {p}" for which, run in (("first", a), ("second", b))
            for p in result_problems(run)]


def max_weight_difference(a: RunResult, b: RunResult) -> float:
    """The largest absolute difference between the final weights of two runs, both complete
    and finite (``result_problems``): else an InvalidArgumentError saying what is wrong, never
    a difference that a NaN made look small."""
    problems = comparison_problems(a, b)
    if problems:
        raise InvalidArgumentError("the weights cannot be compared: " + "; ".join(problems))
    if set(a.weights) != set(b.weights):
        raise InvalidArgumentError(f"the runs have different weights: {sorted(a.weights)} vs "
                                   f"{sorted(b.weights)}")
    diff = 0.0
    for k in a.weights:
        if a.weights[k].shape != b.weights[k].shape:
            raise InvalidArgumentError(f"weight {k!r} has shape {a.weights[k].shape} in one "
                                       f"run and {b.weights[k].shape} in the other")
        diff = max(diff, float(np.max(np.abs(a.weights[k].astype(np.float64)
                                             - b.weights[k].astype(np.float64)), initial=0)))
    return diff


def _numpy_to_json(value):
    """numpy arrays and scalars in a result's metadata (an evaluation's visits, a
    checkpoint's weights) as JSON lists and numbers."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} in a run result is not JSON serializable")
