"""Lesson 03, Many machines: the checks that ``simdist check 03`` runs.

The learner's TF_CONFIGs are parsed with ``simdist.cluster.TFConfig`` (TF's rules: a
"cluster" identical on every task, a "task" with a type and an int index) and then used: three
simulated workers each create ``MultiWorkerMirroredStrategy(ctx, tf_config=...)`` from their
own string, which refuses a TF_CONFIG that does not match the cluster, and train; they must end
with one device's weights. ``is_chief`` is compared with ``TFConfig.is_chief``, and
``predict_step_ns`` with the step times the simulator measures on 1 to 4 workers over 10 GbE
and 100 GbE. ``mwms_mpi.py`` runs the TF_CONFIG check with the workers on MPI ranks.
"""

import functools
import json
import math

import numpy as np

from simdist import Hardware, HardwareCatalog, Layout, simulate
from simdist.cluster import ClusterSpec, TFConfig
from simdist.collectives import ReduceOp, formulas
from simdist.data import classification
from simdist.devices import SystemProfile
from simdist.distribute import MultiWorkerMirroredStrategy, Strategy, simulate_exercise
from simdist.errors import InvalidArgumentError
from simdist.exercises import Exercise
from simdist.lessons import Check, CheckFailed
from simdist.models import make_model
from simdist.units import format_ns

# -- exercise 1: tf_configs ---------------------------------------------------------------------

#: the 3-worker cluster of the exercise (one machine per worker), and two more shapes
CLUSTERS = (
    ["10.0.0.1:2222", "10.0.0.2:2222", "10.0.0.3:2222"],
    ["localhost:12345", "localhost:12346", "localhost:12347"],
    ["trainer-0.example.org:2222", "trainer-1.example.org:2222",
     "trainer-2.example.org:2222", "trainer-3.example.org:2222", "trainer-4.example.org:2222"],
)
ADDRESSES = CLUSTERS[0]


def _short(x, limit: int = 90) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def verify_configs(tf_configs, addresses) -> list:
    """Every TF_CONFIG parses, names the same cluster, and worker i says it is worker i."""
    configs = tf_configs(list(addresses))
    n = len(addresses)
    where = f"tf_configs({n} addresses)"
    if not isinstance(configs, (list, tuple)) or len(configs) != n:
        got = f"{len(configs)} items" if isinstance(configs, (list, tuple)) else _short(configs)
        raise CheckFailed(f"{where} returned {got}; expected a list of {n} JSON strings, one per "
                          "worker", "return [tf_config_of_worker_0, tf_config_of_worker_1, ...]")
    parsed = []
    for i, text in enumerate(configs):
        if not isinstance(text, str):
            hint = ("TF_CONFIG is an environment variable, so a string: json.dumps(your_dict)"
                    if isinstance(text, dict) else "return JSON strings (json.dumps)")
            raise CheckFailed(f"{where}: item {i} is {_short(text)}, not a JSON string", hint)
        try:
            config = TFConfig.from_json(text)
        except InvalidArgumentError as error:
            raise CheckFailed(f"{where}: worker {i}'s TF_CONFIG {_short(text)} is rejected: "
                              f"{error}", _parse_hint(text)) from None
        parsed.append(config)
    want = ClusterSpec({"worker": list(addresses)})
    for i, config in enumerate(parsed):
        if config.cluster != want:
            raise CheckFailed(
                f"{where}: worker {i}'s TF_CONFIG describes the cluster "
                f"{config.cluster.as_dict()}, expected {want.as_dict()}",
                "the \"cluster\" is the same on every task: every worker's address, worker 0 "
                "first, in the order given (do not leave out the task itself or reorder)")
        if config.task_type is None:
            raise CheckFailed(f"{where}: worker {i}'s TF_CONFIG has no \"task\"",
                              "add \"task\": {\"type\": \"worker\", \"index\": i}")
        if (config.task_type, config.task_id) != ("worker", i):
            raise CheckFailed(
                f"{where}: item {i} (the TF_CONFIG of worker {i}) says it is task "
                f"{config.task_type}:{config.task_id}",
                "only the \"task\" differs between the tasks: item i must say "
                "{\"type\": \"worker\", \"index\": i}")
    chiefs = [i for i, config in enumerate(parsed) if config.is_chief]
    if chiefs != [0]:  # cannot happen when the checks above pass; kept as the rule's statement
        raise CheckFailed(f"{where}: the chiefs are {chiefs}", "worker 0 is the chief")
    return parsed


def _parse_hint(text: str) -> str:
    try:
        raw = json.loads(text)
    except (ValueError, TypeError):
        return "build a dict and turn it into JSON with json.dumps (Python's repr is not JSON)"
    task = raw.get("task") if isinstance(raw, dict) else None
    if isinstance(task, dict) and isinstance(task.get("index"), str):
        return "the task index is an int: \"index\": 0, not \"index\": \"0\""
    return ("a TF_CONFIG looks like {\"cluster\": {\"worker\": [\"host:port\", ...]}, "
            "\"task\": {\"type\": \"worker\", \"index\": 0}}")


def check_configs(ex) -> str:
    for addresses in CLUSTERS:
        verify_configs(ex.tf_configs, addresses)
    return (f"{', '.join(str(len(c)) for c in CLUSTERS)}-worker clusters: one cluster, "
            "worker i is task worker:i, worker 0 is the chief")


# the training run: three workers, each creating the strategy from its own TF_CONFIG

SEED = 5
LEARNING_RATE = 0.5
BATCH_SIZES = (12, 10, 9, 12, 2, 12)  # 10 over 3 workers is 4, 4, 2; 2 is 1, 1, 0
TOLERANCE = 1e-5


@functools.cache
def problem():
    """(model, batches): a small MLP on Gaussian blobs; consecutive examples per step."""
    data = classification(n=128, features=8, classes=4, seed=SEED)
    ends = np.cumsum(BATCH_SIZES)
    batches = [(data.x[end - b:end], data.y[end - b:end]) for b, end in zip(BATCH_SIZES, ends)]
    return make_model("mlp", data.n_features, data.n_outputs, hidden=16), batches


def training_program(make_strategy):
    """The custom training loop of lesson 02, on any strategy (a task's program)."""
    model, batches = problem()
    lr = np.float32(LEARNING_RATE)

    def main(ctx):
        strategy = make_strategy(ctx)
        with strategy.scope():
            variables = strategy.variables(model.init(SEED))
        losses = []
        for batch in strategy.experimental_distribute_dataset(batches):
            x, y = batch
            b = batch.global_batch_size

            def step(x, y, w, b=b):
                loss = np.float32(np.sum(model.per_example_loss(w, x, y), dtype=np.float32)
                                  / np.float32(b))
                return loss, model.gradients(w, x, y, np.float32(1.0) / np.float32(b))

            loss, grads = yield from strategy.run(step, args=(x, y, variables))
            grads = yield from strategy.extended.batch_reduce_to(ReduceOp.SUM, grads)
            yield from strategy.extended.update(variables, grads, lambda v, g: v - lr * g)
            losses.append(float((yield from strategy.reduce(ReduceOp.SUM, loss))))
        return losses, {k: v.numpy() for k, v in variables.items()}
    return main


def train_workers(configs, addresses=ADDRESSES, transport=None):
    """Every worker of ``addresses`` creates MultiWorkerMirroredStrategy from its own
    TF_CONFIG (``configs[task_id]``) and trains; the SimulationResult (None on MPI ranks other
    than 0)."""
    hw = Hardware.from_catalog(HardwareCatalog.default(), "cpu", Layout(tasks_per_machine=1))
    program = training_program(
        lambda ctx: MultiWorkerMirroredStrategy(ctx, tf_config=configs[ctx.task_id]))
    return simulate(ClusterSpec({"worker": list(addresses)}), program, hardware=hw,
                    transport=transport, trace=False,
                    metadata={"program": "lesson 03 TF_CONFIG check"})


@functools.cache
def one_device():
    """(losses, weights) of the default strategy on one worker."""
    hw = Hardware.from_catalog(HardwareCatalog.default(), "cpu", Layout(tasks_per_machine=1))
    result = simulate({"worker": 1}, training_program(lambda ctx: Strategy(ctx)), hardware=hw,
                      trace=False)
    return result.returns["worker:0"]


def verify_training(result, n: int) -> str:
    """Every worker ends with one device's weights."""
    want_losses, want_weights = one_device()
    worst = 0.0
    for w in range(n):
        losses, weights = result.returns[f"worker:{w}"]
        diff = max(float(np.max(np.abs(weights[k] - want_weights[k]))) for k in want_weights)
        if not diff <= TOLERANCE or not np.allclose(losses, want_losses, rtol=1e-4):
            raise CheckFailed(f"worker {w} ends {diff:.3g} away from one device's weights "
                              f"(tolerance {TOLERANCE:g})",
                              "the strategy trains correctly with TF_CONFIGs that match the "
                              "cluster: compare yours with simdist.cluster."
                              "tf_config_for_all_tasks")
        worst = max(worst, diff)
    return f"{n} workers end within {worst:.1e} of one device's weights"


def run_training_check(tf_configs, addresses=ADDRESSES, transport=None):
    """The learner's TF_CONFIGs given to the strategy on every worker, as they are (the
    strategy's own error says what is wrong with one); the SimulationResult."""
    configs = tf_configs(list(addresses))
    if not (isinstance(configs, (list, tuple)) and len(configs) == len(addresses)):
        raise CheckFailed(f"tf_configs({len(addresses)} addresses) returned {_short(configs)}; "
                          f"expected a list of {len(addresses)} JSON strings, one per worker",
                          "return [tf_config_of_worker_0, tf_config_of_worker_1, ...]")
    try:
        return train_workers(configs, addresses, transport)
    except InvalidArgumentError as error:
        text = next((c for c in configs if isinstance(c, str)), "")
        raise CheckFailed(f"MultiWorkerMirroredStrategy refused a TF_CONFIG: {error}",
                          "each worker must get its own TF_CONFIG, with the same \"cluster\" "
                          "as every other worker and its own \"task\"; "
                          + _parse_hint(text)) from None


def check_training(ex) -> str:
    result = run_training_check(ex.tf_configs)
    return verify_training(result, len(ADDRESSES))


# -- exercise 2: is_chief -----------------------------------------------------------------------

#: (cluster, task type, task index)
CHIEF_CASES = (
    ({"worker": ADDRESSES}, "worker", 0),
    ({"worker": ADDRESSES}, "worker", 1),
    ({"worker": ADDRESSES}, "worker", 2),
    ({"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"]}, "chief", 0),
    ({"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"]}, "worker", 0),
    ({"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"]}, "worker", 1),
    ({"chief": ["c:2222"], "worker": ["w0:2222"], "ps": ["p0:2222"]}, "ps", 0),
    ({"master": ["m:2222"], "worker": ["w0:2222"]}, "master", 0),
    ({"master": ["m:2222"], "worker": ["w0:2222"]}, "worker", 0),
    ({"worker": ["w0:2222", "w1:2222"], "evaluator": ["e:2222"]}, "evaluator", 0),
    ({"worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222", "p1:2222"]}, "ps", 0),
)


def check_chief(ex) -> str:
    for cluster, task_type, index in CHIEF_CASES:
        text = json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})
        want = TFConfig.from_json(text).is_chief
        got = ex.is_chief(text)
        if not isinstance(got, (bool, np.bool_)):
            raise CheckFailed(f"is_chief returned {_short(got)}; expected True or False",
                              "return a bool")
        if bool(got) != want:
            jobs = ", ".join(f"{job} x{len(tasks)}" for job, tasks in cluster.items())
            raise CheckFailed(f"task {task_type}:{index} of a cluster with {jobs}: you said "
                              f"{bool(got)}, but it is {'' if want else 'not '}the chief",
                              _chief_hint(cluster, task_type, index, want))
    return f"{len(CHIEF_CASES)} tasks of 6 clusters, with and without a chief job"


def _chief_hint(cluster, task_type, index, want) -> str:
    if task_type == "evaluator":
        return ("an evaluator trains nothing and is a chief of its own (TensorFlow's "
                "multi_worker_util.is_chief)")
    boss = next((job for job in ("chief", "master") if job in cluster), None)
    if boss and task_type == "worker" and index == 0:
        return (f"this cluster has a {boss!r} job: then its task is the chief, and worker 0 is "
                "an ordinary worker")
    if boss and task_type == boss:
        return f"the task of the {boss!r} job is always the chief"
    if not boss and task_type == "worker" and index == 0:
        return "without a chief (or master) job, worker 0 is the chief"
    return ("only one training task is the chief: the chief (or master) job's task, else "
            "worker 0; ps tasks never are")


# -- exercise 3: predict_step_ns -------------------------------------------------------------

MODEL = {"model": "mlp", "hidden": 256, "dataset": "digits"}  # 19,210 parameters, 75 KiB
GLOBAL_BATCH = 256
WORKERS = (1, 2, 3, 4)
NETWORKS = {"cpu": "10 GbE", "cpu-100gbe": "100 GbE"}
TIE = 0.02


def catalog() -> HardwareCatalog:
    """The built-in profiles plus "cpu-100gbe": the "cpu" machines on 100 GbE."""
    cat = HardwareCatalog.default()
    cat.systems["cpu-100gbe"] = SystemProfile(
        "cpu-100gbe", "cpu-core", "shm", "100gbe",
        "one CPU core per task; shared memory in a machine, 100 GbE between machines")
    return cat


def hardware(system: str) -> Hardware:
    return Hardware.from_catalog(catalog(), system, Layout(tasks_per_machine=1))


def the_model():
    data = Exercise(**MODEL).build()[0]
    return data


@functools.cache
def simulated_step_ns(workers: int, system: str) -> int:
    """The median simulated step time of the exercise on ``workers`` workers."""
    exercise = Exercise(strategy="multi_worker_mirrored", workers=workers, devices_per_worker=1,
                        global_batch=GLOBAL_BATCH, steps=3, hardware=system, **MODEL)
    times = simulate_exercise(exercise, trace=False, catalog=catalog()).step_times_ns
    return int(np.median(times))


def _parts(workers, hw, model, per_replica=None):
    """The parts of a step, as the simulator charges them (ns)."""
    a, bandwidth = hw.network.latency_ns, hw.network.bandwidth
    per_replica = per_replica or math.ceil(GLOBAL_BATCH / workers)
    many = workers > 1
    return {"compute": hw.device.compute_time_ns(model.flops(per_replica)),
            "gradients": formulas.ring(workers, model.nbytes, a, bandwidth) if many else 0,
            "update": hw.device.compute_time_ns(2 * model.num_params, 3 * model.nbytes),
            "loss": formulas.ring(workers, 4, a, bandwidth) if many else 0}


def _predict_hint(guess, workers, hw, model) -> str:
    parts = _parts(workers, hw, model)
    total = sum(parts.values())
    a, bandwidth = hw.network.latency_ns, hw.network.bandwidth
    ring_time = 0
    if workers > 1:
        ring_time = (formulas.reduce_to_one(workers, model.nbytes, a, bandwidth)
                     + formulas.reduce_to_one(workers, 4, a, bandwidth))
    no_loss = ("you left out the loss: strategy.reduce(SUM, loss) is one more ring all-reduce, "
               "of 4 bytes, so almost only its 2(p-1) latencies")
    whole_batch = ("each worker computes its slice of the global batch only, ceil(B / workers) "
                   "examples, not all B")
    not_a_ring = ("MultiWorkerMirroredStrategy's all-reduce is a ring (CommunicationImplementation"
                  ".RING), not a reduction to one worker: formulas.ring(p, n, a, B)")
    mistakes = [
        (total - parts["loss"], no_loss),
        (total - parts["update"], "you left out the SGD update (part 3)"),
        (total - parts["compute"] + hw.device.compute_time_ns(model.flops(GLOBAL_BATCH)),
         whole_batch),
        (total - parts["gradients"] - parts["loss"] + ring_time, not_a_ring),
        (total - parts["gradients"] - parts["loss"],
         "the all-reduces take time too: formulas.ring(p, n, a, B) for each"),
    ]
    for value, hint in mistakes:
        if value and abs(guess - value) <= 0.005 * value:
            return hint
    return ("add the four parts: compute on ceil(B / workers) examples "
            "(hw.device.compute_time_ns(model.flops(b))), the ring all-reduce of model.nbytes, "
            "the update, and the ring all-reduce of the 4-byte loss")


def check_prediction(system, ex) -> str:
    hw, model = hardware(system), the_model()
    rows = []
    for workers in WORKERS:
        guess = ex.predict_step_ns(workers, hw, model, GLOBAL_BATCH)
        if isinstance(guess, bool) or not isinstance(guess, (int, float, np.number)):
            raise CheckFailed(f"predict_step_ns returned {_short(guess)}; expected a number of "
                              "ns", "return the step time in ns (an int or a float)")
        want = simulated_step_ns(workers, system)
        if not abs(guess - want) <= TIE * want:
            raise CheckFailed(
                f"{workers} worker(s) on {NETWORKS[system]} ({hw.network.name}: a = "
                f"{format_ns(hw.network.latency_ns)}, B = {hw.network.bandwidth / 1e9:g} GB/s):"
                f" you predicted {format_ns(round(guess))}, the simulator measures "
                f"{format_ns(want)} per step", _predict_hint(guess, workers, hw, model))
        rows.append(want)
    speedups = ", ".join(f"{w}: {rows[0] / t:.2f}x" for w, t in zip(WORKERS, rows))
    return f"within {TIE:.0%} for 1-4 workers; speed-up {speedups}"


# -- the list that simdist check runs -----------------------------------------------------------

CHECKS = [
    Check("tf_config_parse", "tf_configs",
          "tf_configs: one cluster on every task, worker i is worker:i (3- and 5-worker "
          "clusters)", check_configs),
    Check("tf_config_train", "tf_configs",
          "tf_configs: 3 simulated workers create MultiWorkerMirroredStrategy from them and "
          "train like one device", check_training),
    Check("is_chief", "is_chief", "is_chief: TensorFlow's chief rule", check_chief),
    Check("predict_10gbe", "predict_step_ns",
          "predict_step_ns: step time on 1-4 workers over 10 GbE",
          functools.partial(check_prediction, "cpu")),
    Check("predict_100gbe", "predict_step_ns",
          "predict_step_ns: step time on 1-4 workers over 100 GbE",
          functools.partial(check_prediction, "cpu-100gbe")),
]
