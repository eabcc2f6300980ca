"""Lesson 10, ParameterServerStrategy and the ClusterCoordinator: the checks of
``simdist check 10``.

Each runs TF2's parameter-server training on the simulated cluster and measures what the
learner decided or predicted: the bytes each ps stores under the learner's partitioner, the
functions a worker failure makes run, and the steps_per_execution that trains fastest. The
simulator is deterministic, so each measurement is made once per process. Exercise 4's job
(the learner's registered function, scheduled by name) runs in one process here and over
MPI ranks in ``coordinator_mpi.py``.
"""

from functools import lru_cache
from pathlib import Path

import numpy as np

from simdist import simulate
from simdist.distribute.cluster_coordinator import ClusterCoordinator
from simdist.training.data import classification, global_batches
from simdist.training import simulate_exercise
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
from simdist.distribute.server import InProcessCluster
from simdist.distribute.strategy import InputContext
from simdist.distribute.sharded_variable import (FixedShardsPartitioner, MinSizePartitioner,
                                                 Partitioner)
from simdist.training.exercises import Exercise
from course.answers import is_int
from course.choices import check_choice
from course.lessons import Check, CheckFailed, load_module, tr

#: section 8's jobs and exercises 6 and 7 (a module of their own: this one is long)
HOT = load_module(Path(__file__).with_name("hotspots.py"), "_lesson10_hotspots")

DIFFICULTY = {"choose_partitioner": 2, "predict_function_runs": 1,
              "choose_steps_per_execution": 2, "why_longer_is_slower": 1,
              "register_functions": 2, **HOT.DIFFICULTY}


# -- exercise 1 ------------------------------------------------------------------------------

#: the model's variables (float32) and the cluster's ps tasks
VARIABLES = {"embedding": (1000, 16), "kernel": (16, 10), "bias": (10,)}
PS = 3
AT_MOST = 1.2


def ps_bytes(partitioner) -> dict[str, int]:
    """The bytes each ps task stores once ``VARIABLES`` are created in the scope of a
    ParameterServerStrategy with ``partitioner`` (round-robin over the ps, as TF)."""
    cluster = InProcessCluster()

    def main(ctx):
        if ctx.task_type != "chief":
            return cluster.server(ctx).join()
        strategy = ParameterServerStrategy(ctx, cluster.resolver(ctx), partitioner)
        with strategy.scope():
            made = [strategy.variable(name, np.zeros(shape, np.float32))
                    for name, shape in VARIABLES.items()]
        stored = {f"ps:{i}": 0 for i in range(PS)}
        for v in made:
            for part in getattr(v, "variables", [v]):
                stored["ps:" + part.device.split("/task:")[1].split("/")[0]] += part.nbytes
        return stored
        yield

    return simulate({"chief": 1, "worker": 1, "ps": PS}, main).returns["chief:0"]


def describe(partitioner) -> str:
    """``FixedShardsPartitioner(num_shards=3)``: the class and its arguments."""
    if partitioner is None:
        return "no partitioner"
    arguments = ", ".join(f"{k[1:]}={v!r}" for k, v in vars(partitioner).items())
    return f"{type(partitioner).__name__}({arguments})"


def _partitioner_hint(mine) -> str:
    if mine is None:
        return tr("without a partitioner each variable goes whole to one ps: the 64 KB "
                  "embedding table lands on ps:0", "没有分区器时每个变量整个放在一个参数服务器上："
                  "64 KB 的嵌入表全落在 ps:0")
    if isinstance(mine, MinSizePartitioner) and mine._max_shards == 1:
        return tr("MinSizePartitioner makes at most max_shards shards, 1 by default",
                  "MinSizePartitioner 最多切 max_shards 个分片，默认是 1")
    if isinstance(mine, MinSizePartitioner) and mine._min_shard_bytes >= 64_000:
        return tr("MinSizePartitioner's shards are at least min_shard_bytes (256 KiB by "
                  "default): the 64 KB table stays one shard",
                  "MinSizePartitioner 的每个分片至少 min_shard_bytes（默认 256 KiB）："
                  "64 KB 的表仍是一个分片")
    if isinstance(mine, FixedShardsPartitioner) and mine._num_shards % PS:
        return tr("shards go to the ps in turn: with a number of shards that is not a "
                  "multiple of 3, one ps gets more shards of the big table",
                  "分片轮流放到各个参数服务器上：分片数不是 3 的倍数时，总有一个参数服务器多拿大表的分片")
    return tr("the big table decides: cut it so that each ps gets about a third of it",
              "关键是那张大表：把它切开，让每个参数服务器大约分到三分之一")


def check_partitioner(module):
    mine = module.choose_partitioner()
    if mine is not None and not isinstance(mine, Partitioner):
        raise CheckFailed(tr(f"choose_partitioner returned {mine!r}, expected a partitioner "
                             "(FixedShardsPartitioner, MinSizePartitioner or MaxSizePartitioner)",
                             f"choose_partitioner 返回了 {mine!r}，应为一个分区器"
                             "（FixedShardsPartitioner、MinSizePartitioner 或 MaxSizePartitioner）"),
                          tr("return a partitioner object, e.g. FixedShardsPartitioner(2)",
                             "返回一个分区器对象，例如 FixedShardsPartitioner(2)"))
    stored = ps_bytes(mine)
    average = sum(stored.values()) / PS
    worst = max(stored, key=stored.get)
    named = "不用分区器" if mine is None else describe(mine)
    if stored[worst] > AT_MOST * average:
        raise CheckFailed(
            tr(f"with {describe(mine)} {worst} stores {stored[worst]:,} bytes, "
               f"{stored[worst] / average:.2f}x the average {average:,.0f} (at most {AT_MOST}x "
               f"wanted); per ps: {stored}",
               f"{named}时，{worst} 存放 {stored[worst]:,} 字节，是平均值 {average:,.0f} 的 "
               f"{stored[worst] / average:.2f} 倍（要求至多 {AT_MOST} 倍）；各参数服务器："
               f"{stored}"),
            _partitioner_hint(mine),
            tr("FixedShardsPartitioner(3) cuts every variable into 3 shards (fewer for a "
               "variable with fewer rows), one per ps",
               "FixedShardsPartitioner(3) 把每个变量切成 3 个分片（行数更少的变量切得更少），"
               "每个参数服务器一个"))
    return tr(f"{describe(mine)}: the busiest ps stores {stored[worst] / average:.2f}x the "
              f"average ({stored})",
              f"{named}：最忙的参数服务器存放的是平均值的 {stored[worst] / average:.2f} 倍"
              f"（{stored}）")


# -- exercise 2 ------------------------------------------------------------------------------

FAILURE = {"strategy": "parameter_server", "workers": 2, "ps": 2, "steps": 20,
           "steps_per_execution": 4, "failures": ("worker:1@250us+200us",)}


@lru_cache(maxsize=None)
def function_runs() -> tuple[int, int]:
    """(functions scheduled, function runs started) of the ``FAILURE`` run."""
    run = simulate_exercise(Exercise(**FAILURE))
    return run.metadata["functions"], sum(run.metadata["function_runs"].values())


def check_runs(module):
    mine = module.predict_function_runs()
    functions, runs = function_runs()
    if not is_int(mine):
        raise CheckFailed(tr(f"predict_function_runs returned {mine!r}, expected an int",
                             f"predict_function_runs 返回了 {mine!r}，应为整数"),
                          tr("return the number of function runs", "返回函数运行的次数"))
    if mine != runs:
        if mine == functions:
            hint = tr("the function worker:1 was running when it failed is put back in the "
                      "queue and runs again on another worker",
                      "worker:1 出故障时正在运行的函数会被放回队列，在另一个工作器上再运行一次")
        elif mine in (FAILURE["steps"], FAILURE["steps"] + 1,
                      FAILURE["steps"] + FAILURE["steps_per_execution"]):
            hint = tr("count functions, not steps: each function runs steps_per_execution "
                      "steps", "数的是函数，不是步：每个函数运行 steps_per_execution 步")
        elif mine > runs:
            hint = tr("only the function in flight on the failed worker runs again; the "
                      "others are not touched", "只有出故障的工作器上正在运行的那个函数会重新运行，"
                      "其他函数不受影响")
        else:
            hint = tr("every scheduled function runs at least once", "每个被调度的函数至少运行一次")
        raise CheckFailed(tr(f"you predicted {mine} function runs; the simulation started "
                             f"{runs}", f"你预测函数运行 {mine} 次；模拟中启动了 {runs} 次"),
                          hint, tr(f"{FAILURE['steps']} steps / {FAILURE['steps_per_execution']} "
                                   "per function = 5 functions, and the one on worker:1 at "
                                   "250 us runs twice",
                                   f"{FAILURE['steps']} 步 / 每个函数 "
                                   f"{FAILURE['steps_per_execution']} 步 = 5 个函数，"
                                   "250 微秒时在 worker:1 上的那个运行两次"))
    return tr(f"{runs} runs of {functions} functions: one ran twice",
              f"{functions} 个函数运行了 {runs} 次：其中一个运行了两次")


# -- exercise 3 ------------------------------------------------------------------------------

#: 4 workers and global batches of 32, where section 4 draws 2 workers and batches of 64
#: (issue 28: a configuration the lesson has not drawn, predicted before it is run)
PACKING = {"strategy": "parameter_server", "workers": 4, "ps": 2, "steps": 64,
           "global_batch": 32}
#: the steps of one epoch: a pass over the 1,024 examples (Exercise's default) in global
#: batches of 32, cut down to a multiple of steps_per_execution (``steps_per_epoch_of``)
EPOCH_STEPS = 1024 // PACKING["global_batch"]
CHOICES = (1, 2, 4, 8, 16, 32, 64)
#: section 4's k for 2 workers and epochs of 16 steps (four functions an epoch)
DRAWN = 4


@lru_cache(maxsize=None)
def training_ns(steps_per_execution) -> int:
    """The simulated time of ``PACKING`` with ``steps_per_execution``."""
    run = simulate_exercise(Exercise(steps_per_execution=steps_per_execution, **PACKING))
    return run.metadata["simulated_time_ns"]


def _packing_hint(mine, best):
    workers, steps = PACKING["workers"], PACKING["steps"]
    per_epoch = max(1, EPOCH_STEPS // mine)
    if mine == DRAWN:
        return tr(f"k = {DRAWN} fits section 4's 2 workers and epochs of 16 steps; here an epoch "
                  f"is {EPOCH_STEPS} steps for {workers} workers",
                  f"k = {DRAWN} 适合第 4 节的 2 个工作器和 16 步的周期；这里一个周期是 "
                  f"{EPOCH_STEPS} 步，有 {workers} 个工作器")
    if mine < best:
        return tr(f"each function costs the coordinator 100 us of its own: k = {mine} makes "
                  f"{steps // mine} functions, {per_epoch} an epoch for {workers} workers; "
                  "fewer, longer ones pay it less often",
                  f"每个函数要花协调器自己 100 微秒：k = {mine} 产生 {steps // mine} 个函数，"
                  f"每个周期 {per_epoch} 个，分给 {workers} 个工作器；更少、更长的函数付得更少")
    return tr(f"an epoch is {EPOCH_STEPS} steps (1,024 examples in batches of "
              f"{PACKING['global_batch']}): with k = {mine} it holds {per_epoch} function(s) "
              f"for {workers} workers, and the coordinator joins at the end of every epoch: the "
              "other workers idle", f"一个周期是 {EPOCH_STEPS} 步（1,024 个样本，批次大小 "
              f"{PACKING['global_batch']}）：k = {mine} 时一个周期只有 {per_epoch} 个函数，却有 "
              f"{workers} 个工作器，而协调器在每个周期结束时都要 join：其余工作器闲着")


def check_packing(module):
    mine = module.choose_steps_per_execution()
    if mine not in CHOICES or not is_int(mine):
        raise CheckFailed(tr(f"choose_steps_per_execution returned {mine!r}, expected one of "
                             f"{CHOICES}",
                             f"choose_steps_per_execution 返回了 {mine!r}，应为 {CHOICES} 之一"),
                          tr(f"return a divisor of the {PACKING['steps']} steps",
                             f"返回 {PACKING['steps']} 步的一个约数"))
    took, best = training_ns(mine), min(CHOICES, key=training_ns)
    if mine != best:
        measured = tr("measured: " + ", ".join(f"{k}: {training_ns(k) / 1e6:.2f} ms"
                                              for k in CHOICES),
                      "测得：" + "，".join(f"{k}：{training_ns(k) / 1e6:.2f} 毫秒" for k in CHOICES))
        raise CheckFailed(tr(f"steps_per_execution={mine} trains the {PACKING['steps']} steps "
                             f"in {took / 1e6:.2f} ms: another k ends sooner",
                             f"steps_per_execution={mine} 训练 {PACKING['steps']} 步用了 "
                             f"{took / 1e6:.2f} ms：另一个 k 结束得更早"),
                          _packing_hint(mine, best), measured)
    return tr(f"steps_per_execution={mine}: {PACKING['steps']} steps in {took / 1e6:.2f} ms, "
              "the soonest", f"steps_per_execution={mine}：{PACKING['steps']} 步用了 "
              f"{took / 1e6:.2f} ms，最快")


WHY_OPTIONS = {
    "a": tr("the coordinator's cost grows with a function's steps",
            "协调器的开销随函数的步数增长"),
    "b": tr("two functions an epoch: two of four workers idle until the join",
            "每个周期两个函数：四个工作器中有两个闲到 join"),
    "c": tr("steps inside a function skip the ps", "函数里的步跳过了 ps"),
    "d": tr("longer functions send more bytes a step", "更长的函数每步发送更多字节")}
WHY_HINTS = {
    "a": tr("the coordinator pays its 100 us per function, whatever the function's length",
            "协调器每个函数付 100 微秒，与函数长短无关"),
    "c": tr("every step of a function reads its variables from the ps and sends its updates "
            "there, as a step of its own would", "函数里的每一步都和单独的一步一样，从 ps 读变量、"
            "把更新发回 ps"),
    "d": tr("a step moves the same bytes to and from the ps whatever k is: count the workers "
            "busy in an epoch", "无论 k 是多少，一步与 ps 之间传的字节都一样：数一数一个周期里有几个"
            "工作器在忙")}


def check_why(module):
    return check_choice("why_longer_is_slower", module.why_longer_is_slower(), WHY_OPTIONS,
                        "b", WHY_HINTS,
                        tr("the coordinator joins at every epoch's end: an epoch needs at least "
                           "one function per worker", "协调器在每个周期结束时 join：一个周期至少"
                           "要有每个工作器一个函数"))


# -- exercise 4 ------------------------------------------------------------------------------

#: the job of exercise 4 (4 tasks: mpiexec -n 1 to 4), the functions its coordinator
#: schedules, and the batches of its per-worker dataset
LABELS_JOB = {"chief": 1, "worker": 2, "ps": 1}
SCHEDULED = 12
CLASSES, BATCH = 4, 8


def dataset_fn(input_context):
    """Exercise 4's per-worker dataset: batches of 8 (x, y), labels 0 to 3, shuffled with the
    worker's own seed; 12 batches, enough for a worker that runs every function."""
    data = classification(n=64, features=4, classes=CLASSES, seed=7)
    return global_batches(data, BATCH, SCHEDULED, seed=input_context.input_pipeline_id)


def _registered(cluster, fn) -> bool:
    return any(f is fn for f in cluster.functions.values())


def prepare_labels_job(module):
    """The learner's ``register_functions`` on a fresh ``InProcessCluster`` (on every rank,
    before the job): (cluster, the function to schedule). What must travel by name must be
    registered, on any number of ranks (in one process simdist would register it for you)."""
    cluster = InProcessCluster()
    fn = module.register_functions(cluster, dataset_fn)
    if not callable(fn):
        raise CheckFailed(tr(f"register_functions returned {fn!r}, expected the function the "
                             "coordinator schedules",
                             f"register_functions 返回了 {fn!r}，应为协调器调度的那个函数"),
                          tr("return the function itself (not its "
                             "name, not its result)",
                             "返回函数本身（不是它的名字，也不是它的结果）"))
    name = getattr(fn, "__name__", repr(fn))
    if not _registered(cluster, fn):
        raise CheckFailed(
            tr(f"the function to schedule, {name}, is not registered (registered: "
               f"{sorted(cluster.functions) or 'nothing'})",
               f"要调度的函数 {name} 没有注册（已注册：{sorted(cluster.functions) or '无'}）"),
            tr("across MPI ranks a scheduled function travels by its registered name only: "
               "call cluster.register(fn) in register_functions, which every rank runs",
               "跨 MPI 进程时，被调度的函数只以注册名传过去：在每个进程都会运行的 "
               "register_functions 里调用 cluster.register(fn)"))
    if not _registered(cluster, dataset_fn):
        raise CheckFailed(
            tr(f"dataset_fn is not registered (registered: {sorted(cluster.functions)}): a "
               "worker on another rank could not build its per-worker dataset",
               f"dataset_fn 没有注册（已注册：{sorted(cluster.functions)}）：其他进程上的工作器"
               "无法构建它的每工作器数据集"),
            tr("the dataset function travels too: each worker builds its per-worker dataset "
               "itself, on its own rank, from the dataset function's registered name; "
               "register dataset_fn as well",
               "数据集函数也要传过去：每个工作器在自己的进程里，按数据集函数的注册名自己构建"
               "每工作器数据集；把 dataset_fn 也注册上"),
            tr("with one rank simdist registers a missing function for you, which hides the "
               "mistake; the check asks for it on any number of ranks",
               "只有一个进程时 simdist 会替你注册缺的函数，错误就被掩盖了；所以无论几个进程，"
               "检查都要求注册"))
    return cluster, fn


def run_labels_job(cluster, fn, transport=None):
    """Exercise 4's job: the coordinator makes a per-worker dataset of ``dataset_fn`` and
    schedules ``fn(iterator)`` ``SCHEDULED`` times. The chief returns {"values": [...]}
    or {"error": "..."}: an error of the learner's function ends no rank early."""

    def main(ctx):
        if ctx.task_type != "chief":
            return (yield from cluster.server(ctx).join())
        coordinator = ClusterCoordinator(ParameterServerStrategy(ctx, cluster.resolver(ctx)))
        iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
        values = [coordinator.schedule(fn, args=(iterator,)) for _ in range(SCHEDULED)]
        fetched = []
        try:
            yield from coordinator.join()
            for value in values:
                fetched.append((yield from value.fetch()))
        except Exception as error:  # noqa: BLE001 -- the learner's function failed: report it
            return {"error": f"{type(error).__name__}: {error}"}
        return {"values": fetched}

    return simulate(LABELS_JOB, main, transport=transport)


def _expected_counts(result) -> dict:
    """{function number: (worker, batch index, label counts of that batch)}: each worker's
    functions, in the order they ran there, took its dataset's batches in turn."""
    runs: dict = {}
    for span in sorted(result.trace.spans, key=lambda s: s.start):
        if span.cat == "function":
            runs.setdefault(span.pid, []).append(int(span.args["function"].rsplit("#", 1)[1]))
    want = {}
    for worker, numbers in runs.items():
        w = int(worker.split(":")[1])
        batches = list(dataset_fn(InputContext(LABELS_JOB["worker"], w, 1)))
        for j, number in enumerate(numbers):
            want[number] = (worker, j, np.bincount(batches[j][1], minlength=CLASSES))
    return want


def verify_labels(result, name: str) -> str:
    """What rank 0 sees of the job: every function's label counts right, else CheckFailed."""
    got = result.returns["chief:0"]
    if "error" in got:
        raise CheckFailed(tr(f"{name} failed on a worker: {got['error']}",
                             f"{name} 在一个工作器上失败了：{got['error']}"),
                          tr("the function runs on the worker: next(iterator) gives its next "
                             "(x, y) batch; return the counts as numbers or a numpy array",
                             "这个函数在工作器上运行：next(iterator) 给出它的下一个 (x, y) "
                             "批次；以数字或 numpy 数组返回计数"))
    want = _expected_counts(result)
    for number, value in enumerate(got["values"], start=1):
        worker, j, counts = want[number]
        mine = np.asarray(value)
        if mine.shape == counts.shape and np.array_equal(mine, counts):
            continue
        if mine.ndim == 0:
            hint = tr("one number per class, not one for the batch",
                      "每个类别一个数，而不是整个批次一个数")
        elif mine.ndim == 1 and mine.sum() == BATCH and len(mine) < CLASSES:
            hint = tr("a batch may hold no example of the last classes: still return 4 "
                      "counts (np.bincount(y, minlength=4))",
                      "一个批次里可能没有最后几个类别的样本：仍要返回 4 个计数"
                      "（np.bincount(y, minlength=4)）")
        else:
            hint = tr("take one batch with x, y = next(iterator) and count each label in y, "
                      "class 0 first", "用 x, y = next(iterator) 取一个批次，数出 y 中每个"
                      "标签出现的次数，类别 0 在前")
        raise CheckFailed(tr(f"{name}#{number} ran on {worker} and returned {mine.tolist()}; "
                             f"its batch ({worker}'s batch {j}) holds {counts.tolist()} "
                             "examples of classes 0-3",
                             f"{name}#{number} 在 {worker} 上运行，返回了 {mine.tolist()}；它的"
                             f"批次（{worker} 的第 {j} 个批次）中类别 0-3 的样本数是 "
                             f"{counts.tolist()}"), hint)
    per_worker = {}
    for worker, _, _ in want.values():
        per_worker[worker] = per_worker.get(worker, 0) + 1
    total = sum(np.asarray(v) for v in got["values"])
    spread = ", ".join(f"{w}: {n}" for w, n in sorted(per_worker.items()))
    return tr(f"{SCHEDULED} runs of {name} by name ({spread}); label counts of the "
              f"{int(total.sum())} examples: {total.tolist()}",
              f"按名字运行 {name} {SCHEDULED} 次（{spread}）；{int(total.sum())} 个样本的标签"
              f"计数：{total.tolist()}")



def check_labels(module):
    cluster, fn = prepare_labels_job(module)
    return verify_labels(run_labels_job(cluster, fn), fn.__name__)


CHECKS = [
    Check("partitioner", "choose_partitioner",
          tr("a partitioner that balances the ps", "让各参数服务器均衡的分区器"),
          check_partitioner),
    Check("runs", "predict_function_runs",
          tr("function runs after a worker failure", "工作器故障后函数的运行次数"), check_runs),
    Check("packing", "choose_steps_per_execution",
          tr("the steps_per_execution that trains soonest on 4 workers",
             "在 4 个工作器上训练最快的 steps_per_execution"), check_packing),
    Check("packing_why", "why_longer_is_slower",
          tr("why_longer_is_slower: fewer functions than workers in an epoch",
             "why_longer_is_slower：一个周期里函数比工作器少"), check_why),
    Check("registered", "register_functions",
          tr("a scheduled function and its dataset, registered to travel by name",
             "被调度的函数及其数据集，注册后按名字传到工作器"), check_labels),
    Check("lookup", "lookup_ps_tasks",
          tr("the ps tasks an embedding lookup on shards asks", "分片上的嵌入查找问到的参数服务器"),
          HOT.check_lookup),
    Check("fetch", "fetch_time_saved",
          tr("the time functions without return values save", "不返回值的函数省下的时间"),
          HOT.check_saved),
]
