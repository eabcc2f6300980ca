"""Lesson 11, TPUs and TPUStrategy: the checks of ``simdist check 11``.

Each runs TPUStrategy on a simulated TPU slice (``simdist.training.simulate_exercise``) and
measures what the learner predicted or decided: the bytes a chip sends over ICI in one
all-reduce (from the all-reduce spans of the trace), the cores' utilization with the
learner's ``steps_per_execution``, and which global batch sizes pass the static-shape rule. A
measurement is the same every time (the simulator is deterministic), so each is made once
per process.
"""

import math
from functools import lru_cache

from simdist.training import simulate_exercise
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise
from course.answers import as_set, is_int
from course.choices import check_choice
from course.lessons import Check, CheckFailed, tr

DIFFICULTY = {"ici_bytes_per_chip": 1, "how_ici_bytes_grow": 1,
              "steps_per_execution_for_90_percent": 2, "batches_that_compile": 2}


def _tpu(**given) -> Exercise:
    return Exercise(**{"strategy": "tpu", "hardware": "tpu-v3", "devices_per_worker": 8,
                       **given})


# -- exercise 1 ------------------------------------------------------------------------------

#: the torus shapes of 16, 8, 32 and 24 cores (a non-square one first: it tells X from Y;
#: on 4 x 3 no piece of the gradients divides by 3, so rounding tells)
TORI = ((4, 2), (2, 2), (4, 4), (4, 3))


def tpu_mlp(x, y) -> Exercise:
    """One step of the MLP on a slice whose chips are an ``x`` by ``y`` torus."""
    cores = 2 * x * y
    return _tpu(devices_per_worker=cores, model="mlp", dataset="digits", hidden=256, steps=1,
                global_batch=64 if 64 % cores == 0 else 4 * cores)


def ici_of(run, host: str = "worker:0") -> tuple[tuple[int, int], ...]:
    """(bytes all-reduced, ICI bytes sent per chip) of every distinct all-reduce in a run's
    trace, on core 0 of ``host``."""
    return tuple(sorted({(s.args["bytes"], s.args["ici_bytes_per_chip"]) for s in
                         run.trace.spans if s.pid == host and s.lane == "TPU:0"
                         and s.cat == "collective"}, reverse=True))


@lru_cache(maxsize=None)
def measured_ici(x, y) -> tuple[tuple[int, int], ...]:
    """``ici_of`` one step of the MLP on an ``x`` by ``y`` torus (``tpu_mlp``)."""
    return ici_of(simulate_exercise(tpu_mlp(x, y)))


def _ring(p, nbytes, sends=2):
    return sends * (p - 1) * math.ceil(nbytes / p)


#: what the sweep after exercise 1b prints for the MLP on the 2x2, 4x2 and 4x4 tori (issue
#: 28: it runs only after the checks; a figure copied from it is one slice's count)
SWEEP_FIGURES = (153_680, 192_100, 230_520)


def _ici_hint(mine, x, y, nbytes) -> str:
    if mine in SWEEP_FIGURES and mine != _ring(x, nbytes) + _ring(y, nbytes):
        return tr(f"{mine:,} is one slice's count for one all-reduce: the bytes depend on x, y "
                  "and nbytes, and the check asks about tori and sizes no figure shows",
                  f"{mine:,} 是某一个切片上某一次 all-reduce 的计数：字节数取决于 x、y 和 nbytes，"
                  "而检查问的环面和大小没有哪张图给出过")
    if mine == _ring(x * y, nbytes):
        return tr("the torus does not run one ring through every chip: a ring along each X "
                  "row (all at once), then a ring along each Y column",
                  "环面并不是让一个环穿过所有芯片：先沿每一行（X 方向）各跑一个环（同时进行），"
                  "再沿每一列（Y 方向）")
    if mine == _ring(x, nbytes, 1) + _ring(y, nbytes, 1):
        return tr("a ring all-reduce is a reduce-scatter and then an all-gather: each half "
                  "sends p - 1 pieces", "环形 all-reduce 是先 reduce-scatter 再 all-gather："
                  "每一半都发送 p - 1 块")
    if mine == _ring(x, nbytes):
        return tr("after the X rings come the Y rings: count both dimensions",
                  "X 方向的环之后还有 Y 方向的环：两个维度都要算")
    if mine == 8 * (_ring(x, nbytes) + _ring(y, nbytes)):
        return tr("bytes, not bits", "是字节，不是比特")
    if mine in (sum(2 * (p - 1) * (nbytes // p) for p in (x, y)),
                round(sum(2 * (p - 1) * nbytes / p for p in (x, y)))):
        return tr("a piece of nbytes / p that does not divide evenly is rounded UP to a whole "
                  "byte (math.ceil), before it is counted 2(p - 1) times",
                  "nbytes / p 除不尽时，每一块都要向上取整到整字节（math.ceil），再乘以 2(p - 1)")
    return tr("a ring of p chips sends 2(p - 1) pieces of nbytes / p from each chip; the "
              "torus runs one such ring per dimension",
              "p 个芯片的环里每个芯片发送 2(p - 1) 块，每块 nbytes / p；环面在每个维度上各跑一个这样的环")


def verify_ici(module, x, y, measured) -> None:
    """The learner's ``ici_bytes_per_chip`` against every (bytes, ICI bytes per chip) of
    ``measured`` on an ``x`` by ``y`` torus; a CheckFailed at the first that differs."""
    for nbytes, real in measured:
        mine = module.ici_bytes_per_chip(x, y, nbytes)
        if not is_int(mine):
            raise CheckFailed(tr(f"ici_bytes_per_chip({x}, {y}, {nbytes}) returned {mine!r}, "
                                 "expected an int",
                                 f"ici_bytes_per_chip({x}, {y}, {nbytes}) 返回了 {mine!r}，应为"
                                 "整数"), tr("return a number of bytes",
                                                     "返回字节数（整数）"))
        if mine != real:
            raise CheckFailed(
                tr(f"ici_bytes_per_chip({x}, {y}, {nbytes}) returned {mine:,}; each chip of "
                   f"the simulated {x}x{y} slice sent {real:,} bytes over ICI",
                   f"ici_bytes_per_chip({x}, {y}, {nbytes}) 返回了 {mine:,}；模拟的 {x}x{y} "
                   f"切片中每个芯片经 ICI 发送了 {real:,} 字节"),
                _ici_hint(mine, x, y, nbytes),
                tr("2(x - 1) ceil(nbytes / x) + 2(y - 1) ceil(nbytes / y)",
                   "2(x - 1) ceil(nbytes / x) + 2(y - 1) ceil(nbytes / y)"))


def check_ici(module):
    for x, y in TORI:
        verify_ici(module, x, y, measured_ici(x, y))
    tori = ", ".join(f"{x}x{y}" for x, y in TORI)
    return tr(f"right for the {tori} tori, to the byte", f"{tori} 环面都正确，精确到字节")


GROWTH = {
    "a": tr("in proportion to the chips", "与芯片数成正比"),
    "b": tr("they grow, but level off below 4 n", "会增长，但在 4 n 以下趋于平稳"),
    "c": tr("they shrink with the piece n / p", "随每块 n / p 变小而减少"),
    "d": tr("exactly 2 n whatever the size", "无论多大都恰好是 2 n")}
GROWTH_HINTS = {
    "a": tr("each chip sends pieces of n / p: more chips, more rounds, but smaller pieces",
            "每块芯片发送的是 n / p 大小的块：芯片越多，轮数越多，但每块越小"),
    "c": tr("the pieces get smaller, but a ring of p chips takes 2(p - 1) rounds of them",
            "块是变小了，但 p 块芯片的环要发送 2(p - 1) 轮"),
    "d": tr("a torus runs a ring along each dimension, one after the other: add both, and "
            "2(p - 1) / p is 1 only for p = 2", "环面在每个维度上依次各跑一个环：两个都要加上，"
            "而且 2(p - 1) / p 只有在 p = 2 时才等于 1")}


def check_growth(module):
    """The pass message shows the simulator's count: each chip's ICI bytes of the largest
    all-reduce on the 2 x 2 and the 4 x 4 slice (tests/course/test_lesson_11_tpu.py holds
    that they grow and stay below 4 n)."""
    (n, small), (_, large) = measured_ici(2, 2)[0], measured_ici(4, 4)[0]
    return check_choice("how_ici_bytes_grow", module.how_ici_bytes_grow(), GROWTH, "b",
                        GROWTH_HINTS, tr(f"each ring sends 2(p - 1) / p of n, which tends to 2: "
                                         f"on 2x2 a chip sends {small:,} of {n:,} bytes, on 4x4 "
                                         f"{large:,}, never 4 n", f"每个环发送 n 的 2(p - 1) / p，"
                                         f"它趋近 2：2x2 上一块芯片发送 {small:,} 字节（n = "
                                         f"{n:,}），4x4 上 {large:,}，永远不到 4 n"))


# -- exercise 2 ------------------------------------------------------------------------------

TARGET = 0.9
MOST_STEPS = 1000


@lru_cache(maxsize=None)
def utilization(k) -> float:
    """Core 0's busy share over two executions of ``k`` steps of the linear model."""
    return simulate_exercise(_tpu(global_batch=256, steps=2 * k,
                                  steps_per_execution=k)).metadata["utilization"]


def check_steps_per_execution(module):
    mine = module.steps_per_execution_for_90_percent()
    if not is_int(mine) or not 1 <= mine <= MOST_STEPS:
        raise CheckFailed(tr(f"steps_per_execution_for_90_percent returned {mine!r}, expected "
                             f"an int 1..{MOST_STEPS}",
                             f"steps_per_execution_for_90_percent 返回了 {mine!r}，应为 "
                             f"1..{MOST_STEPS} 的整数"), tr("return steps_per_execution, an int",
                                                     "返回 steps_per_execution（整数）"))
    used = utilization(mine)
    if used < TARGET:
        raise CheckFailed(
            tr(f"with steps_per_execution={mine} the cores are busy {used:.1%} of the time "
               f"(at least {TARGET:.0%} wanted)",
               f"steps_per_execution={mine} 时核心有 {used:.1%} 的时间在忙（要求至少 "
               f"{TARGET:.0%}）"),
            tr("90% busy means the 100 us dispatch is a ninth of the K steps' busy time: "
               "get a step's busy time b from the utilization at K = 1 (9.1%), then solve "
               "K b / (K b + 100 us) >= 0.9", "忙碌 90% 意味着 100 微秒的分派只占 K 步忙碌时间的"
               "九分之一：先由 K = 1 时的利用率（9.1%）求出一步的忙碌时间 b，再解 "
               "K b / (K b + 100 微秒) >= 0.9"),
            tr("b = 100 x 0.0909 / 0.9091 = 10 us, so K >= 9 x 100 / 10",
               "b = 100 x 0.0909 / 0.9091 = 10 微秒，所以 K >= 9 x 100 / 10"))
    if mine > 1 and utilization(mine - 1) >= TARGET:
        raise CheckFailed(
            tr(f"steps_per_execution={mine - 1} also keeps the cores {TARGET:.0%} busy "
               f"({utilization(mine - 1):.2%})",
               f"steps_per_execution={mine - 1} 也能让核心 {TARGET:.0%} 的时间在忙"
               f"（{utilization(mine - 1):.2%}）"),
            tr("the smallest that does: the host only sees the model (callbacks, logs, "
               "checkpoints) between executions", "够用的最小值即可：主机只能在两次执行之间"
               "看到模型（回调、日志、检查点）"))
    return tr(f"steps_per_execution={mine}: the cores are busy {used:.2%} of the time",
              f"steps_per_execution={mine}：核心有 {used:.2%} 的时间在忙")


# -- exercise 3 ------------------------------------------------------------------------------

#: 4 divides 1,024 and is a multiple of 4 but not of 8: it tells the rule from "1024 % b == 0"
#: alone and from "b % 4 == 0"
CANDIDATES = (4, 48, 60, 64, 96, 100, 128, 256)
DATASET = 1024


@lru_cache(maxsize=None)
def compiles(batch) -> bool:
    """Whether a whole epoch of the regression dataset in batches of ``batch`` trains with
    static shapes only (the simulator's TPUStrategy: RunOptions(
    experimental_enable_dynamic_batch_size=False); TF 2.21's default pads a partial batch)."""
    try:
        simulate_exercise(_tpu(global_batch=batch, steps=math.ceil(DATASET / batch)),
                          trace=False)
    except InvalidArgumentError:
        return False
    return True


def check_batches(module):
    answer = module.batches_that_compile(CANDIDATES)
    mine = as_set(answer, is_int)
    if mine is None:
        raise CheckFailed(tr(f"batches_that_compile{CANDIDATES} returned {answer!r}, expected "
                             "a set of ints",
                             f"batches_that_compile{CANDIDATES} 返回了 {answer!r}，应为整数的"
                             "集合"), tr("return a set of batch sizes",
                                             "返回批次大小的集合（set）"))
    real = {b for b in CANDIDATES if compiles(b)}
    if mine != real:
        extra, missing = sorted(mine - real), sorted(real - mine)
        wrong = (f"includes {extra}, which fail" if extra else "") + \
            ("; " if extra and missing else "") + \
            (f"leaves out {missing}, which train" if missing else "")
        wrong_zh = (f"包含了会失败的 {extra}" if extra else "") + \
            ("；" if extra and missing else "") + \
            (f"漏掉了能训练的 {missing}" if missing else "")
        if any(b % 8 for b in extra):
            hint = tr("each of the 8 cores gets the same static shape: the global batch must "
                      "be a multiple of 8", "8 个核心拿到的形状必须相同且固定：全局批次大小"
                      "必须是 8 的倍数")
        elif extra:
            hint = tr("without drop_remainder the epoch ends with a partial batch unless the "
                      "batch divides 1,024, and a partial batch is a new (dynamic) shape, an "
                      "error with static shapes only",
                      "不设 drop_remainder 时，除非批次大小整除 1,024，一个周期最后会剩下一个"
                      "不完整的批次，它是一个新的（动态的）形状，只允许静态形状时就会出错")
        else:
            hint = tr("a multiple of 8 that divides 1,024 gives full batches all epoch long",
                      "既是 8 的倍数又整除 1,024 的批次大小，整个周期里都是完整的批次")
        raise CheckFailed(tr(f"batches_that_compile{CANDIDATES} returned {sorted(mine)}: it "
                             f"{wrong}",
                             f"batches_that_compile{CANDIDATES} 返回了 {sorted(mine)}：它"
                             f"{wrong_zh}"), hint,
                          tr("keep b with b % 8 == 0 and 1024 % b == 0",
                             "保留满足 b % 8 == 0 且 1024 % b == 0 的 b"))
    return tr(f"{sorted(real)} train a whole epoch with static shapes only; the others stop "
              "with a shape error",
              f"只有 {sorted(real)} 能以静态形状训练完整个周期；其他的会因形状错误而停止")



CHECKS = [
    Check("ici", "ici_bytes_per_chip",
          tr("bytes each chip sends over ICI per all-reduce", "每次 all-reduce 中每个芯片经 ICI 发送的字节数"),
          check_ici),
    Check("growth", "how_ici_bytes_grow",
          tr("how_ici_bytes_grow: more chips, more rounds of smaller pieces",
             "how_ici_bytes_grow：芯片更多，轮数更多，每块更小"), check_growth),
    Check("steps", "steps_per_execution_for_90_percent",
          tr("steps_per_execution for 90% utilization", "利用率达到 90% 的 steps_per_execution"),
          check_steps_per_execution),
    Check("shapes", "batches_that_compile",
          tr("global batch sizes with static shapes on 8 cores", "在 8 个核心上形状固定的全局批次大小"),
          check_batches),
]
