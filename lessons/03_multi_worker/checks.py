# long file: three exercises' checks, each message and hint in English and Chinese
"""Lesson 03, Many machines: the checks that ``simdist check 03`` runs.

The learner's TF_CONFIGs are parsed with ``simdist.hardware.tf_config.TFConfig`` (TF's rules: a
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
from simdist.hardware.cluster import ClusterSpec
from simdist.hardware.tf_config import TFConfig
from simdist.collectives import ReduceOp, formulas
from simdist.training.data import classification
from simdist.hardware.devices import SystemProfile
from simdist.distribute import MultiWorkerMirroredStrategy, Strategy
from simdist.training import simulate_exercise
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise
from course.lessons import Check, CheckFailed, tr
from simdist.training.models import make_model
from simdist.hardware.units import format_ns

DIFFICULTY = {"tf_configs": 1, "is_chief": 2, "predict_step_ns": 3}

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


def as_tf_reads_it(text):
    """A TF_CONFIG as TensorFlow reads it: ``TFConfigClusterResolver`` calls ``int()`` on the
    task index, so ``"index": "1"`` means task 1. Other text is returned as it is."""
    try:
        raw = json.loads(text)
        index = raw["task"]["index"]
    except (ValueError, TypeError, KeyError):
        return text
    if isinstance(index, str) and index.strip().isdigit():
        raw["task"]["index"] = int(index)
        return json.dumps(raw)
    return text


def verify_configs(tf_configs, addresses) -> list:
    """Every TF_CONFIG parses, names the same cluster, and worker i says it is worker i."""
    configs = tf_configs(list(addresses))
    n = len(addresses)
    where = tr(f"tf_configs({n} addresses)", f"tf_configs（{n} 个地址）")
    if not isinstance(configs, (list, tuple)) or len(configs) != n:
        got = f"{len(configs)} items" if isinstance(configs, (list, tuple)) else _short(configs)
        raise CheckFailed(tr(f"{where} returned {got}; expected a list of {n} JSON strings, one "
                             "per worker", f"{where.zh} 返回了 {got}；应为 {n} 个 JSON 字符串组成"
                             "的列表，每个工作器一个"),
                          tr("return [tf_config_of_worker_0, tf_config_of_worker_1, "
                             "...]", "返回 [工作器 0 的 TF_CONFIG, 工作器 1 的 "
                             "TF_CONFIG, ...]"))
    parsed = []
    for i, text in enumerate(configs):
        if not isinstance(text, str):
            hint = (tr("TF_CONFIG is an environment variable, so a string",
                       "TF_CONFIG 是环境变量，所以是字符串")
                    if isinstance(text, dict) else tr("return JSON strings", "返回 JSON 字符串"))
            raise CheckFailed(tr(f"{where}: item {i} is {_short(text)}, not a JSON string",
                                 f"{where.zh}：第 {i} 项是 {_short(text)}，不是 JSON 字符串"), hint,
                              tr("json.dumps(your_dict)", "json.dumps(你的字典)"))
        try:
            config = TFConfig.from_json(as_tf_reads_it(text))
        except InvalidArgumentError as error:
            raise CheckFailed(tr(f"{where}: worker {i}'s TF_CONFIG {_short(text)} is rejected: "
                                 f"{error}", f"{where.zh}：工作器 {i} 的 TF_CONFIG {_short(text)} "
                                 f"被拒绝：{error}"), *_parse_hint(text)) from None
        parsed.append(config)
    want = ClusterSpec({"worker": list(addresses)})
    for i, config in enumerate(parsed):
        if config.cluster != want:
            raise CheckFailed(
                tr(f"{where}: worker {i}'s TF_CONFIG describes the cluster "
                   f"{config.cluster.as_dict()}, expected {want.as_dict()}",
                   f"{where.zh}：工作器 {i} 的 TF_CONFIG 描述的集群是 {config.cluster.as_dict()}，"
                   f"应为 {want.as_dict()}"),
                tr("the \"cluster\" is the same on every task", "每个任务的 \"cluster\" 都相同"),
                tr("every worker's address, worker 0 first, in the order given (do not leave out "
                   "the task itself or reorder)",
                   "列出每个工作器的地址，工作器 0 在前，按给定顺序（不要漏掉任务自己，也不要重排）"))
        if config.task_type is None:
            raise CheckFailed(tr(f"{where}: worker {i}'s TF_CONFIG has no \"task\"",
                                 f"{where.zh}：工作器 {i} 的 TF_CONFIG 没有 \"task\""),
                              tr("each TF_CONFIG also says which task this process is",
                                 "每个 TF_CONFIG 还要说明本进程是哪个任务"),
                              tr("add \"task\": {\"type\": \"worker\", \"index\": i}",
                                 "加上 \"task\": {\"type\": \"worker\", \"index\": i}"))
        if (config.task_type, config.task_id) != ("worker", i):
            raise CheckFailed(
                tr(f"{where}: item {i} (the TF_CONFIG of worker {i}) says it is task "
                   f"{config.task_type}:{config.task_id}",
                   f"{where.zh}：第 {i} 项（工作器 {i} 的 TF_CONFIG）说它是任务 "
                   f"{config.task_type}:{config.task_id}"),
                tr("only the \"task\" differs between the tasks", "各任务之间只有 \"task\" 不同"),
                tr("item i must say {\"type\": \"worker\", \"index\": i}",
                   "第 i 项必须是 {\"type\": \"worker\", \"index\": i}"))
    chiefs = [i for i, config in enumerate(parsed) if config.is_chief]
    if chiefs != [0]:  # cannot happen when the checks above pass; kept as the rule's statement
        raise CheckFailed(tr(f"{where}: the chiefs are {chiefs}",
                             f"{where.zh}：主工作器是 {chiefs}"),
                          tr("worker 0 is the chief", "工作器 0 是主工作器（chief）"))
    return parsed


def _parse_hint(text: str) -> tuple:
    try:
        json.loads(text)
    except (ValueError, TypeError):
        return (tr("TF_CONFIG is JSON", "TF_CONFIG 是 JSON"),
                tr("build a dict and turn it into JSON with json.dumps (Python's repr is not "
                   "JSON)", "先构造字典，再用 json.dumps 转成 JSON（Python 的 repr 不是 JSON）"))
    return (tr("a TF_CONFIG has a \"cluster\" and a \"task\"",
               "TF_CONFIG 包含 \"cluster\" 和 \"task\""),
            tr("{\"cluster\": {\"worker\": [\"host:port\", ...]}, \"task\": {\"type\": "
               "\"worker\", \"index\": 0}}",
               "{\"cluster\": {\"worker\": [\"host:port\", ...]}, \"task\": {\"type\": "
               "\"worker\", \"index\": 0}}"))


def check_configs(ex) -> str:
    for addresses in CLUSTERS:
        verify_configs(ex.tf_configs, addresses)
    sizes = ", ".join(str(len(c)) for c in CLUSTERS)
    return tr(f"{sizes}-worker clusters: one cluster, worker i is task worker:i, worker 0 is "
              "the chief",
              f"{sizes} 个工作器的集群：集群相同，第 i 个工作器是任务 worker:i，工作器 0 是主工作器")


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
            raise CheckFailed(tr(f"worker {w} ends {diff:.3g} away from one device's weights "
                                 f"(tolerance {TOLERANCE:g})",
                                 f"工作器 {w} 最终的权重与单设备的相差 {diff:.3g}（容差 "
                                 f"{TOLERANCE:g}）"),
                              tr("the strategy trains correctly with TF_CONFIGs that match the cluster",
                                 "只要 TF_CONFIG 与集群一致，策略就能正确训练"),
                              tr("compare yours with simdist.hardware.cluster.tf_config_for_all_tasks",
                                 "把你的结果与 simdist.hardware.cluster.tf_config_for_all_tasks 比较"))
        worst = max(worst, diff)
    return tr(f"{n} workers end within {worst:.1e} of one device's weights",
              f"{n} 个工作器最终的权重与单设备的相差不超过 {worst:.1e}")


def run_training_check(tf_configs, addresses=ADDRESSES, transport=None):
    """The learner's TF_CONFIGs given to the strategy on every worker, as they are (the
    strategy's own error says what is wrong with one); the SimulationResult."""
    configs = tf_configs(list(addresses))
    if isinstance(configs, (list, tuple)):  # as TF reads them: "index": "1" is task 1
        configs = [as_tf_reads_it(c) if isinstance(c, str) else c for c in configs]
    if not (isinstance(configs, (list, tuple)) and len(configs) == len(addresses)):
        raise CheckFailed(tr(f"tf_configs({len(addresses)} addresses) returned "
                             f"{_short(configs)}; expected a list of {len(addresses)} JSON "
                             "strings, one per worker",
                             f"tf_configs（{len(addresses)} 个地址）返回了 {_short(configs)}；"
                             f"应为 {len(addresses)} 个 JSON 字符串组成的列表，每个工作器一个"),
                          tr("return [tf_config_of_worker_0, tf_config_of_worker_1, ...]",
                             "返回 [工作器 0 的 TF_CONFIG, 工作器 1 的 TF_CONFIG, ...]"))
    try:
        return train_workers(configs, addresses, transport)
    except InvalidArgumentError as error:
        text = next((c for c in configs if isinstance(c, str)), "")
        raise CheckFailed(tr(f"MultiWorkerMirroredStrategy refused a TF_CONFIG: {error}",
                             f"MultiWorkerMirroredStrategy 拒绝了一个 TF_CONFIG：{error}"),
                          tr("each worker must get its own TF_CONFIG, with the same "
                             "\"cluster\" as every other worker and its own \"task\"",
                             "每个工作器都要有自己的 TF_CONFIG：\"cluster\" 与其他工作器相同，"
                             "\"task\" 是它自己的"), _parse_hint(text)[1]) from None


def check_training(ex) -> str:
    result = run_training_check(ex.tf_configs)
    return verify_training(result, len(ADDRESSES))


# -- exercise 2: is_chief -----------------------------------------------------------------------

#: (cluster, task type, task index): string indices as TF accepts them, the evaluator, and
#: TFJob's "master" job, which tf.distribute refuses
CHIEF_CASES = (
    ({"worker": ADDRESSES}, "worker", 0),
    ({"worker": ADDRESSES}, "worker", 1),
    ({"worker": ADDRESSES}, "worker", "2"),
    ({"worker": ADDRESSES}, "worker", "0"),
    ({"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"]}, "chief", 0),
    ({"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"]}, "worker", 0),
    ({"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"]}, "worker", 1),
    ({"chief": ["c:2222"], "worker": ["w0:2222"], "ps": ["p0:2222"]}, "ps", 0),
    ({"worker": ["w0:2222", "w1:2222"], "evaluator": ["e:2222"]}, "evaluator", 0),
    ({"chief": ["c:2222"], "worker": ["w0:2222"], "evaluator": ["e:2222"]}, "evaluator", 0),
    ({"worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222", "p1:2222"]}, "ps", 0),
    ({"master": ["m:2222"], "worker": ["w0:2222"]}, "master", 0),
    ({"master": ["m:2222"], "worker": ["w0:2222"]}, "worker", 0),
)

#: the jobs tf.distribute knows (multi_worker_util._validate_cluster_spec)
KNOWN_JOBS = ("chief", "worker", "evaluator", "ps")


def tf_is_chief(cluster: dict, task_type: str, index) -> bool:
    """TF 2.21's rule (``multi_worker_util.is_chief`` on what ``TFConfigClusterResolver``
    read): a ValueError for a job tf.distribute does not know (TFJob's "master"); the chief
    job's task, and the evaluator (a chief of its own: it writes its own summaries); else
    worker 0 when there is no chief job. The index is read with ``int()``.
    tests/course/test_lessons_02_03_mirrored_multi_worker.py checks this against real TF."""
    unknown = sorted(set(cluster) - set(KNOWN_JOBS))
    if unknown:
        raise ValueError(f"Disallowed task type found in cluster spec: {unknown}")
    if task_type in ("chief", "evaluator"):
        return True
    return "chief" not in cluster and task_type == "worker" and int(index) == 0


def check_chief(ex) -> str:
    for cluster, task_type, index in CHIEF_CASES:
        text = json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})
        jobs = ", ".join(f"{job} x{len(tasks)}" for job, tasks in cluster.items())
        where = tr(f"task {task_type}:{index!r} of a cluster with {jobs}",
                   f"集群 {jobs} 中的任务 {task_type}:{index!r}")
        try:
            want = tf_is_chief(cluster, task_type, index)
        except ValueError:
            want = ValueError
        try:
            got = ex.is_chief(text)
        except ValueError:
            got = ValueError
        if want is ValueError or got is ValueError:
            if got is not want:
                said = "raised ValueError" if got is ValueError else f"said {got!r}"
                said_zh = "抛出了 ValueError" if got is ValueError else f"回答 {got!r}"
                raise CheckFailed(
                    tr(f"{where}: you {said}, but tf.distribute "
                       + ("refuses this cluster (ValueError)" if want is ValueError else
                          f"says {want}"),
                       f"{where.zh}：你{said_zh}，但 tf.distribute "
                       + ("拒绝这个集群（ValueError）" if want is ValueError else
                          f"回答 {want}")),
                    *_chief_hint(cluster, task_type, index, want))
            continue
        if not isinstance(got, (bool, np.bool_)):
            raise CheckFailed(tr(f"is_chief returned {_short(got)}; expected True or False",
                                 f"is_chief 返回了 {_short(got)}；应为 True 或 False"),
                              tr("return a bool", "返回布尔值"))
        if bool(got) != want:
            raise CheckFailed(tr(f"{where}: you said {bool(got)}, but it is "
                                 f"{'' if want else 'not '}the chief",
                                 f"{where.zh}：你回答 {bool(got)}，但它"
                                 f"{'是' if want else '不是'}主工作器"),
                              *_chief_hint(cluster, task_type, index, want))
    return tr(f"{len(CHIEF_CASES)} tasks of 8 clusters: chief job, worker 0, evaluator, string "
              "indices, and a refused \"master\"",
              f"8 个集群中的 {len(CHIEF_CASES)} 个任务：chief 作业、工作器 0、evaluator、字符串下标，"
              "以及被拒绝的 \"master\"")


def _chief_hint(cluster, task_type, index, want) -> tuple:
    if want is ValueError:
        return (tr("tf.distribute knows the jobs chief, worker, evaluator and ps only",
                   "tf.distribute 只认识 chief、worker、evaluator 和 ps 这几种作业"),
                tr("\"master\" is the name Estimator and Kubeflow's TFJob used for the chief; "
                   "TF 2.21's multi_worker_util refuses a cluster that has one: raise "
                   "ValueError",
                   "\"master\" 是 Estimator 和 Kubeflow TFJob 对主工作器的叫法；TF 2.21 的 "
                   "multi_worker_util 拒绝含有它的集群：请抛出 ValueError"))
    if task_type == "evaluator":
        return (tr("the evaluator is a chief of its own", "评估器（evaluator）自己就是一个主工作器"),
                tr("it is outside the training cluster and writes its own summaries: TF's rule "
                   "returns True for it, with or without a chief job",
                   "它不在训练集群之内，自己写摘要：无论有没有 chief 作业，TF 的规则都对它返回 True"))
    if isinstance(index, str):
        return (tr("the index may be a string: TF reads it with int()",
                   "索引可以是字符串：TF 用 int() 读取它"),
                tr("\"index\": \"0\" is worker 0: compare int(task[\"index\"]) with 0",
                   "\"index\": \"0\" 就是工作器 0：用 int(task[\"index\"]) 与 0 比较"))
    if "chief" in cluster and task_type == "worker" and int(index) == 0:
        return (tr("this cluster has a chief job: then worker 0 is an ordinary worker",
                   "这个集群有 chief 作业：此时工作器 0 只是普通工作器"), "")
    if task_type == "chief":
        return (tr("the task of the chief job is always the chief",
                   "chief 作业的任务永远是主工作器"), "")
    if "chief" not in cluster and task_type == "worker" and int(index) == 0:
        return (tr("without a chief job, worker 0 is the chief",
                   "没有 chief 作业时，工作器 0 是主工作器"), "")
    return (tr("the chief job's task, else worker 0, is the chief; the evaluator is its own "
               "chief; ps tasks never are",
               "chief 作业的任务是主工作器，否则是工作器 0；评估器自成主工作器；ps 任务从来不是"), "")


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


@functools.cache
def simulated_step_ns(workers: int, system: str, global_batch: int = GLOBAL_BATCH,
                      model: tuple = tuple(sorted(MODEL.items()))) -> int:
    """The median simulated step time of the exercise on ``workers`` workers."""
    exercise = Exercise(strategy="multi_worker_mirrored", workers=workers, devices_per_worker=1,
                        global_batch=global_batch, steps=3, hardware=system, **dict(model))
    times = simulate_exercise(exercise, trace=False, catalog=catalog()).step_times_ns
    return int(np.median(times))


def _parts(workers, hw, model, global_batch=GLOBAL_BATCH):
    """The parts of a step, as the simulator charges them (ns)."""
    a, bandwidth = hw.network.latency_ns, hw.network.bandwidth
    many = workers > 1
    return {"compute": hw.device.compute_time_ns(model.flops(math.ceil(global_batch / workers))),
            "gradients": formulas.ring(workers, model.nbytes, a, bandwidth) if many else 0,
            "update": hw.device.compute_time_ns(2 * model.num_params, 3 * model.nbytes),
            "loss": formulas.ring(workers, 4, a, bandwidth) if many else 0}


def _predict_hint(guess, workers, hw, model, global_batch=GLOBAL_BATCH) -> tuple:
    parts = _parts(workers, hw, model, global_batch)
    total = sum(parts.values())
    a, bandwidth = hw.network.latency_ns, hw.network.bandwidth
    ring_time = 0
    if workers > 1:
        ring_time = (formulas.reduce_to_one(workers, model.nbytes, a, bandwidth)
                     + formulas.reduce_to_one(workers, 4, a, bandwidth))
    floor = global_batch // workers
    mistakes = [
        (total - parts["loss"],
         tr("you left out the loss", "你漏掉了损失"),
         tr("strategy.reduce(SUM, loss) is one more ring all-reduce, of 4 bytes, so almost "
            "only its 2(p-1) latencies",
            "strategy.reduce(SUM, loss) 又是一次环形 all-reduce，只有 4 字节，所以几乎只有它的 "
            "2(p-1) 次延迟")),
        (total - parts["update"], tr("you left out the SGD update (part 3)",
                                     "你漏掉了 SGD 更新（第 3 部分）"), ""),
        (total - parts["compute"] + hw.device.compute_time_ns(model.flops(global_batch)),
         tr("each worker computes its slice of the global batch only",
            "每个工作器只计算全局批次中属于自己的那一片"),
         tr("ceil(B / workers) examples, not all B", "是 ceil(B / workers) 个样本，而不是全部 B 个")),
        (total - parts["compute"] + hw.device.compute_time_ns(model.flops(floor)),
         tr("the step waits for the worker with the most examples",
            "一步要等样本最多的那个工作器"),
         tr(f"{global_batch} over {workers} workers is cut as in lesson 02: the first ones get "
            f"ceil(B / W) = {math.ceil(global_batch / workers)}, not floor(B / W) = {floor}",
            f"{global_batch} 个样本分给 {workers} 个工作器，按第 02 课的方式切分：前面的工作器拿到 "
            f"ceil(B / W) = {math.ceil(global_batch / workers)}，而不是 floor(B / W) = {floor}")),
        (total - parts["gradients"] - parts["loss"] + ring_time,
         tr("MultiWorkerMirroredStrategy's all-reduce is a ring, not a reduction to one worker",
            "MultiWorkerMirroredStrategy 的 all-reduce 是环，而不是归约到一个工作器"),
         tr("CommunicationImplementation.RING: formulas.ring(p, n, a, B)",
            "CommunicationImplementation.RING：formulas.ring(p, n, a, B)")),
        (total - parts["gradients"] - parts["loss"],
         tr("the all-reduces take time too", "all-reduce 也要花时间"),
         tr("formulas.ring(p, n, a, B) for each", "每一次都是 formulas.ring(p, n, a, B)")),
    ]
    for value, hint, detail in mistakes:
        if value and abs(guess - value) <= 0.005 * value:
            return hint, detail
    return (tr("add the four parts of a step", "把一步的四个部分加起来"),
            tr("compute on ceil(B / workers) examples (hw.device.compute_time_ns(model.flops(b)))"
               ", the ring all-reduce of model.nbytes, the update, and the ring all-reduce of "
               "the 4-byte loss",
               "在 ceil(B / workers) 个样本上的计算（hw.device.compute_time_ns(model.flops(b))）、"
               "model.nbytes 的环形 all-reduce、更新、以及 4 字节损失的环形 all-reduce"))


def _verify_prediction(ex, workers, system, model_options, global_batch) -> int:
    hw = hardware(system)
    model = Exercise(**model_options).build()[0]
    guess = ex.predict_step_ns(workers, hw, model, global_batch)
    if isinstance(guess, bool) or not isinstance(guess, (int, float, np.number)):
        raise CheckFailed(tr(f"predict_step_ns returned {_short(guess)}; expected a number of "
                             "ns", f"predict_step_ns 返回了 {_short(guess)}；应为以 ns 为单位的数"),
                          tr("return the step time in ns (an int or a float)",
                                   "返回以 ns 为单位的步时间（int 或 float）"))
    want = simulated_step_ns(workers, system, global_batch, tuple(sorted(model_options.items())))
    if not abs(guess - want) <= TIE * want:
        raise CheckFailed(
            tr(f"{workers} worker(s) on {NETWORKS[system]} ({hw.network.name}: a = "
               f"{format_ns(hw.network.latency_ns)}, B = {hw.network.bandwidth / 1e9:g} GB/s), "
               f"global batch {global_batch}, {model.num_params:,} parameters: you predicted "
               f"{format_ns(round(guess))}, the simulator measures {format_ns(want)} per step",
               f"{NETWORKS[system]} 上的 {workers} 个工作器（{hw.network.name}：a = "
               f"{format_ns(hw.network.latency_ns)}，B = {hw.network.bandwidth / 1e9:g} GB/s），"
               f"全局批次 {global_batch}，{model.num_params:,} 个参数：你预测 "
               f"{format_ns(round(guess))}，模拟器测得每步 {format_ns(want)}"),
            *_predict_hint(guess, workers, hw, model, global_batch))
    return want


def check_prediction(system, ex) -> str:
    rows = [_verify_prediction(ex, w, system, MODEL, GLOBAL_BATCH) for w in WORKERS]
    speedups = ", ".join(f"{w}: {rows[0] / t:.2f}x" for w, t in zip(WORKERS, rows))
    return tr(f"within {TIE:.0%} for 1-4 workers; speed-up {speedups}",
              f"1-4 个工作器都在 {TIE:.0%} 以内；加速比 {speedups}")


#: a batch that does not split evenly and a model whose compute shows it: 6 examples over 4
#: workers are 2, 2, 2, 0
UNEVEN = {"workers": 4, "system": "cpu-100gbe", "global_batch": 6,
          "model": {"model": "mlp", "hidden": 4096, "dataset": "digits"}}


def check_uneven(ex) -> str:
    want = _verify_prediction(ex, UNEVEN["workers"], UNEVEN["system"], UNEVEN["model"],
                              UNEVEN["global_batch"])
    return tr(f"global batch 6 over 4 workers: {format_ns(want)}, within {TIE:.0%}",
              f"全局批次 6 分给 4 个工作器：{format_ns(want)}，在 {TIE:.0%} 以内")



# -- the list that simdist check runs -----------------------------------------------------------

CHECKS = [
    Check("tf_config_parse", "tf_configs",
          tr("tf_configs: one cluster on every task, worker i is worker:i (3- and 5-worker "
             "clusters)", "tf_configs：每个任务的集群相同，第 i 项是 worker:i（3 和 5 个工作器）"),
          check_configs),
    Check("tf_config_train", "tf_configs",
          tr("tf_configs: 3 simulated workers create MultiWorkerMirroredStrategy from them and "
             "train like one device",
             "tf_configs：3 个模拟工作器用它们创建 MultiWorkerMirroredStrategy，训练结果与单设备相同"),
          check_training),
    Check("is_chief", "is_chief", tr("is_chief: TensorFlow's chief rule",
                                     "is_chief：TensorFlow 的主工作器规则"), check_chief),
    Check("predict_10gbe", "predict_step_ns",
          tr("predict_step_ns: step time on 1-4 workers over 10 GbE",
             "predict_step_ns：10 GbE 上 1-4 个工作器的步时间"),
          functools.partial(check_prediction, "cpu")),
    Check("predict_100gbe", "predict_step_ns",
          tr("predict_step_ns: step time on 1-4 workers over 100 GbE",
             "predict_step_ns：100 GbE 上 1-4 个工作器的步时间"),
          functools.partial(check_prediction, "cpu-100gbe")),
    Check("predict_uneven", "predict_step_ns",
          tr("predict_step_ns: a global batch of 6 over 4 workers",
             "predict_step_ns：全局批次 6 分给 4 个工作器"), check_uneven),
]
