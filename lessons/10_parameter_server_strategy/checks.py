"""Lesson 10, ParameterServerStrategy and the ClusterCoordinator: the checks of
``simdist check 10``.

Each runs TF2's parameter-server training on the simulated cluster and measures what the
learner decided or predicted: the bytes each ps stores under the learner's partitioner, the
functions a worker failure makes run, and the steps_per_execution that trains fastest. The
simulator is deterministic, so each measurement is made once per process.
"""

from functools import lru_cache

import numpy as np

from simdist import simulate
from simdist.training import simulate_exercise
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
from simdist.distribute.server import InProcessCluster
from simdist.distribute.sharded_variable import (FixedShardsPartitioner, MinSizePartitioner,
                                                 Partitioner)
from simdist.training.exercises import Exercise
from course.lessons import Check, CheckFailed, tr

DIFFICULTY = {"choose_partitioner": 2, "predict_function_runs": 1,
              "choose_steps_per_execution": 2}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
        raise CheckFailed(f"choose_partitioner returned {mine!r}, expected a partitioner "
                          "(FixedShardsPartitioner, MinSizePartitioner or MaxSizePartitioner)",
                          tr("return a partitioner object, e.g. FixedShardsPartitioner(2)",
                             "返回一个分区器对象，例如 FixedShardsPartitioner(2)"))
    stored = ps_bytes(mine)
    average = sum(stored.values()) / PS
    worst = max(stored, key=stored.get)
    if stored[worst] > AT_MOST * average:
        raise CheckFailed(
            f"with {describe(mine)} {worst} stores {stored[worst]:,} bytes, "
            f"{stored[worst] / average:.2f}x the average {average:,.0f} (at most {AT_MOST}x "
            f"wanted); per ps: {stored}",
            _partitioner_hint(mine),
            tr("FixedShardsPartitioner(3) cuts every variable into 3 shards (fewer for a "
               "variable with fewer rows), one per ps",
               "FixedShardsPartitioner(3) 把每个变量切成 3 个分片（行数更少的变量切得更少），"
               "每个参数服务器一个"))
    return (f"{describe(mine)}: the busiest ps stores {stored[worst] / average:.2f}x the average "
            f"({stored})")


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
    if not _is_int(mine):
        raise CheckFailed(f"predict_function_runs returned {mine!r}, expected an int",
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
        raise CheckFailed(f"you predicted {mine} function runs; the simulation started {runs}",
                          hint, tr(f"{FAILURE['steps']} steps / {FAILURE['steps_per_execution']} "
                                   "per function = 5 functions, and the one on worker:1 at "
                                   "250 us runs twice",
                                   f"{FAILURE['steps']} 步 / 每个函数 "
                                   f"{FAILURE['steps_per_execution']} 步 = 5 个函数，"
                                   "250 微秒时在 worker:1 上的那个运行两次"))
    return f"{runs} runs of {functions} functions: one ran twice"


# -- exercise 3 ------------------------------------------------------------------------------

PACKING = {"strategy": "parameter_server", "workers": 2, "ps": 2, "steps": 40}
CHOICES = (1, 2, 4, 5, 8, 10, 20, 40)
WITHIN_NS = 2_500_000


@lru_cache(maxsize=None)
def training_ns(steps_per_execution) -> int:
    """The simulated time of ``PACKING`` with ``steps_per_execution``."""
    run = simulate_exercise(Exercise(steps_per_execution=steps_per_execution, **PACKING))
    return run.metadata["simulated_time_ns"]


def check_packing(module):
    mine = module.choose_steps_per_execution()
    if mine not in CHOICES or not _is_int(mine):
        raise CheckFailed(f"choose_steps_per_execution returned {mine!r}, expected one of "
                          f"{CHOICES}", tr("return a divisor of the 40 steps",
                                           "返回 40 步的一个约数"))
    took = training_ns(mine)
    measured = tr("measured: " + ", ".join(f"{k}: {training_ns(k) / 1e6:.2f} ms"
                                          for k in CHOICES),
                  "测得：" + "，".join(f"{k}：{training_ns(k) / 1e6:.2f} 毫秒" for k in CHOICES))
    if took > WITHIN_NS:
        functions = PACKING["steps"] // mine
        if functions > 10:
            hint = tr("each function costs the coordinator 100 us of its own: with many "
                      "small functions that overhead dominates",
                      "每个函数要花协调器自己 100 微秒：函数多而小时，这部分开销占主导")
        else:
            hint = tr(f"{functions} long function{'s' if functions > 1 else ''} on 2 "
                      "workers: all of a function's steps run on one worker, and a worker "
                      "idles while the other runs the last one",
                      f"{functions} 个长函数分给 2 个工作器：一个函数的所有步都在同一个工作器上，"
                      "最后一个函数运行时另一个工作器闲着")
        raise CheckFailed(f"steps_per_execution={mine} trains the 40 steps in "
                          f"{took / 1e6:.2f} ms (at most {WITHIN_NS / 1e6:.1f} ms wanted)",
                          hint, measured)
    smaller = [k for k in CHOICES if k < mine and training_ns(k) <= WITHIN_NS]
    if smaller:
        raise CheckFailed(f"steps_per_execution={smaller[0]} also trains within "
                          f"{WITHIN_NS / 1e6:.1f} ms ({training_ns(smaller[0]) / 1e6:.2f} ms)",
                          tr("the smallest that does: the coordinator hears from the workers "
                             "more often, and a failed worker's re-run repeats fewer steps",
                             "够用即可，越小越好：协调器更常得到工作器的消息，"
                             "工作器故障时重新运行的步也更少"), measured)
    return f"steps_per_execution={mine}: 40 steps in {training_ns(mine) / 1e6:.2f} ms"


CHECKS = [
    Check("partitioner", "choose_partitioner",
          tr("a partitioner that balances the ps", "让各参数服务器均衡的分区器"),
          check_partitioner),
    Check("runs", "predict_function_runs",
          tr("function runs after a worker failure", "工作器故障后函数的运行次数"), check_runs),
    Check("packing", "choose_steps_per_execution",
          tr("the smallest steps_per_execution that trains fast enough",
             "训练够快的最小 steps_per_execution"), check_packing),
]
