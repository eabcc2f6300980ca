"""Lesson 12, Evaluation while training: the checks of ``simdist check 12``.

Each trains TF2's parameter-server exercise on the simulated cluster and evaluates it in one
of the four styles of ``simdist.training.evaluation`` (inline, distributed, exactly_once,
sidecar), then measures what the learner predicted or decided: how often each evaluation
example was counted after a worker failure, the style and shards that count each example
once (and the function runs the trace shows), and which checkpoints a side-car evaluator
evaluates. The simulator is deterministic, so each run is made once per process.
"""

from functools import lru_cache

import numpy as np

from simdist.training.evaluation import STYLES, simulate_evaluation
from simdist.training.exercises import Exercise
from course.answers import as_set, as_tuple, is_int
from course.lessons import Check, CheckFailed, tr

DIFFICULTY = {"predict_eval_visits": 3, "choose_exactly_once": 2, "predict_sidecar": 2}

#: the training run every check evaluates, and its evaluation set: 8 batches of 32
TRAINING = {"strategy": "parameter_server", "workers": 2, "steps": 20}
EXAMPLES, BATCH = 256, 32
#: worker:1 fails 44 us into eval_step#22, after its metric update reached the ps
FAILURE = "worker:1@2430us+100us"


@lru_cache(maxsize=None)
def evaluation(style: str, shards: int = 4, failure: str = FAILURE) -> dict:
    """The evaluation of ``TRAINING`` (failing as ``failure``) in ``style``: its outcome
    (``metadata["evaluation"]``), the runs of each evaluation function and which worker
    ran them, in order."""
    run = simulate_evaluation(Exercise(**TRAINING, failures=(failure,)), style,
                              eval_examples=EXAMPLES, eval_batch=BATCH, shards=shards)
    runs = {name: n for name, n in run.metadata["function_runs"].items()
            if name.startswith("eval")}
    order = [(s.pid, s.name) for s in run.trace.spans
             if s.cat == "function" and s.name.startswith("eval")]
    return {**run.metadata["evaluation"], "runs": runs, "order": order}


def counted(visits) -> tuple[int, int]:
    """(examples counted twice or more, examples never counted)."""
    visits = np.asarray(visits)
    return int((visits > 1).sum()), int((visits == 0).sum())


def _per_batch(visits) -> list[int]:
    return [int(v) for v in np.asarray(visits)[::BATCH]]


# -- exercise 1 ------------------------------------------------------------------------------

def _who_ran_what(order, lang: str = "en") -> str:
    workers = {}
    for pid, name in order:
        workers.setdefault(pid, []).append(name.replace("eval_step", ""))
    ran = " ran " if lang == "en" else " 运行了 "
    return ("; " if lang == "en" else "；").join(
        f"{pid}{ran}{', '.join(names)}" for pid, names in sorted(workers.items()))


def check_visits(module):
    answer = module.predict_eval_visits()
    mine = as_tuple(answer, 2, is_int)
    if mine is None:
        raise CheckFailed(tr(f"predict_eval_visits returned {answer!r}, expected a pair of "
                             "ints (counted_twice, never_counted)",
                             f"predict_eval_visits 返回了 {answer!r}，应为一对整数 "
                             "(counted_twice, never_counted)"),
                          tr("return two numbers of examples, e.g. (0, 0)",
                             "返回两个样本数，例如 (0, 0)"))
    ev = evaluation("distributed")
    real = counted(ev["visits"])
    if tuple(mine) == real:
        return tr(f"{real[0]} examples counted twice, {real[1]} never: visits per batch "
                  f"{_per_batch(ev['visits'])}, {ev['counted']} visits in the metric",
                  f"{real[0]} 个样本被算了两次，{real[1]} 个从未被算：每个批次的访问次数 "
                  f"{_per_batch(ev['visits'])}，指标中共 {ev['counted']} 次访问")
    twice, never = mine
    if (twice, never) == (real[0] // BATCH, real[1] // BATCH):
        hint = tr("count examples, not batches: a batch holds 32 examples",
                  "数的是样本，不是批次：一个批次有 32 个样本")
    elif (twice, never) == (0, 0):
        hint = tr("distributed evaluation is at-least-once: a failure makes a function run "
                  "again and moves the batches the workers' iterators hand out",
                  "分布式评估是至少一次的：故障会让函数重新运行，也会打乱各工作器的迭代器"
                  "交出的批次")
    elif twice == BATCH and never == BATCH:
        hint = tr("that is the failure at 2400 us of section 3; at 2430 us worker:1's metric "
                  "update had already reached the ps, and the re-run adds its batch again",
                  "那是第 3 节里 2400 微秒的故障；2430 微秒时 worker:1 的指标更新已经到了"
                  "参数服务器上，重新运行又把它的批次加了一遍")
    elif twice == real[0] and never != real[1]:
        hint = tr("when worker:1 comes back its per-worker dataset is rebuilt and starts again "
                  "at its first batch: its last batch is never reached",
                  "worker:1 恢复后，它的每工作器数据集被重建，从它的第一个批次重新开始："
                  "它的最后一个批次永远轮不到")
    elif never == real[1] and twice < real[0]:
        hint = tr("two batches count twice: the one whose update reached the ps before the "
                  "failure (its re-run adds it again), and the first batch of worker:0, "
                  "whose iterator wraps round in the one function more it runs",
                  "有两个批次被算了两次：一个是故障前更新已到达参数服务器的批次（重新运行时"
                  "又加了一遍），另一个是 worker:0 的第一个批次，它多运行一个函数时迭代器"
                  "绕回了开头")
    else:
        hint = tr("list the batches each worker's iterator hands out: worker:0 has 0, 2, 4, "
                  "6 (then 0 again), worker:1 has 1, 3, 5, 7, started over after the restart",
                  "列出每个工作器的迭代器交出的批次：worker:0 是 0、2、4、6（然后又是 0），"
                  "worker:1 是 1、3、5、7，重启后从头开始")
    raise CheckFailed(
        tr(f"you predicted {twice} examples counted twice and {never} never; the simulated "
           f"evaluation counted {real[0]} twice and {real[1]} never",
           f"你预测 {twice} 个样本被算两次、{never} 个从未被算；模拟的评估中 {real[0]} 个被算两次、"
           f"{real[1]} 个从未被算"),
        hint, tr(f"{_who_ran_what(ev['order'])}; visits per batch {_per_batch(ev['visits'])}",
                 f"{_who_ran_what(ev['order'], 'zh')}；每个批次的访问次数 "
                 f"{_per_batch(ev['visits'])}"))


# -- exercise 2 ------------------------------------------------------------------------------

BATCHES = EXAMPLES // BATCH
WORKERS = TRAINING["workers"]

_STYLE_HINTS = {
    "inline": tr("inline evaluation counts once, but on the coordinator: the workers idle "
                 "and the coordinator alone reads the whole evaluation set",
                 "内联评估只算一次，但是在协调器上做：工作器闲着，整个评估集都由协调器"
                 "一个人读"),
    "distributed": tr("distributed evaluation is at-least-once: with this failure it "
                      "counts 64 examples twice and 32 never (exercise 1)",
                      "分布式评估是至少一次的：这次故障让 64 个样本被算了两次，32 个一次也"
                      "没算（练习 1）"),
    "sidecar": tr("a side-car evaluator is a task of its own beside the cluster, evaluating "
                  "checkpoints; the workers do none of it",
                  "边车评估器是集群旁边一个单独的任务，评估的是检查点；工作器一点也不参与"),
}


def check_exactly_once(module):
    answer = module.choose_exactly_once()
    mine = as_tuple(answer, 3)
    if mine is None or mine[0] not in STYLES or not (is_int(mine[1]) and is_int(mine[2])):
        raise CheckFailed(tr(f"choose_exactly_once returned {answer!r}, expected (style, "
                             f"shards, runs) with a style among {', '.join(STYLES)}",
                             f"choose_exactly_once 返回了 {answer!r}，应为 (style, shards, runs)，"
                             f"style 取 {', '.join(STYLES)} 之一"),
                          tr('return a tuple such as ("inline", 2, 3)',
                             '返回一个元组，例如 ("inline", 2, 3)'))
    style, shards, runs = mine
    if style != "exactly_once":
        raise CheckFailed(tr(f"style {style!r} does not count every example once on the "
                             "workers", f"style {style!r} 不能在工作器上把每个样本恰好算一次"),
                          _STYLE_HINTS[style],
                          tr("tf_keras's Model.compile(pss_evaluation_shards=N): each shard "
                             "adds to accumulators of its own, returned; only a run that ends "
                             "counts", "tf_keras 的 Model.compile(pss_evaluation_shards=N)："
                             "每个分片累加到自己的累加器里并作为结果返回；只有运行完的那次才算数"))
    if not WORKERS <= shards <= BATCHES:
        raise CheckFailed(
            tr(f"{shards} shards: expected {WORKERS} to {BATCHES} (at least one per worker, at "
               "most one per batch)",
               f"{shards} 个分片：应为 {WORKERS} 到 {BATCHES} 个（每个工作器至少一个，每个批次"
               "至多一个）"),
            tr("fewer shards than workers leaves a worker idle; more shards than the 8 "
               "batches gives functions that evaluate nothing",
               "分片比工作器少，就有工作器闲着；分片比 8 个批次还多，就会有什么也不评估的函数"))
    ev = evaluation(style, shards)
    real = sum(ev["runs"].values())
    again = sorted(name for name, n in ev["runs"].items() if n > 1)
    if counted(ev["visits"]) != (0, 0):  # the style's promise, measured
        raise CheckFailed(tr(f"exactly_once with {shards} shards counted visits per batch "
                             f"{_per_batch(ev['visits'])}",
                             f"{shards} 个分片的 exactly_once 统计的每批次访问次数是 "
                             f"{_per_batch(ev['visits'])}"), tr("report this: exactly-once "
                                                            "evaluation broke its promise",
                                                            "请报告：恰好一次评估没有兑现承诺"))
    if runs != real:
        if runs == shards and again:
            hint = tr("the shard worker:1 was running when it failed runs again: the metric "
                      "counts it once, but the trace shows it twice",
                      "worker:1 出故障时正在运行的分片会重新运行：指标只算它一次，但轨迹里"
                      "它出现两次")
        elif runs == shards + 1 and not again:
            hint = tr(f"with {shards} shards the shard on worker:1 has ended before 2430 us: "
                      "nothing runs again", f"分成 {shards} 片时，worker:1 上的分片在 2430 "
                      "微秒之前已经结束：没有分片需要重新运行")
        elif runs in (BATCHES, BATCHES + 1):
            hint = tr("count shard functions, not batches: a shard runs its batches in one "
                      "function", "数的是分片函数，不是批次：一个分片在一个函数里跑完它的所有批次")
        else:
            hint = tr("one function per shard, plus one more run for a shard cut short by "
                      "the failure", "每个分片一个函数，再加上被故障打断的分片多运行的一次")
        raise CheckFailed(
            tr(f"you predicted {runs} evaluation function runs with {shards} shards; the trace "
               f"shows {real}",
               f"你预测 {shards} 个分片时评估函数运行 {runs} 次；轨迹显示 {real} 次"), hint,
            tr(f"runs per function: {ev['runs']}", f"每个函数的运行次数：{ev['runs']}"))
    twice = f", {again[0]} twice" if again else ", none twice"
    twice_zh = f"，{again[0]} 运行了两次" if again else "，没有运行两次的"
    return tr(f"exactly_once with {shards} shards: each of the {EXAMPLES} examples counted "
              f"once; {real} runs{twice}",
              f"{shards} 个分片的 exactly_once：{EXAMPLES} 个样本每个恰好算一次；运行 {real} 次"
              f"{twice_zh}")


# -- exercise 3 ------------------------------------------------------------------------------

SIDECAR = {"strategy": "parameter_server", "workers": 2, "steps": 40, "global_batch": 256}
POLL_NS = 700_000


def sidecar_of(run) -> dict:
    """What a side-car evaluation's run shows: the outcome, when each checkpoint's save
    began and when the evaluator could see it (once complete), and when each evaluation
    started."""
    ev = run.metadata["evaluation"]
    starts = {s.name.removeprefix("evaluate "): s.start for s in run.trace.spans
              if s.cat == "evaluation"}
    return {"evaluated": list(ev["evaluated"]), "skipped": list(ev["skipped"]),
            "begins": {c["name"]: c["at"] for c in ev["checkpoints"]},
            "visible": dict(ev["visible_at"]), "starts": starts}


@lru_cache(maxsize=None)
def sidecar(poll_ns: int = POLL_NS) -> dict:
    """``sidecar_of`` the side-car evaluation of ``SIDECAR`` looking every ``poll_ns``."""
    return sidecar_of(simulate_evaluation(Exercise(**SIDECAR), "sidecar", poll_ns=poll_ns))


def _rule(written: dict, poll_ns: int, take) -> list[str]:
    """The checkpoints evaluated by looks every ``poll_ns`` that ``take`` one of the new
    checkpoints (a list, oldest first) and treat the rest as seen."""
    names, done, chosen, t = list(written), 0, [], 0
    while done < len(names):
        new = [n for n in names[done:] if written[n] <= t]
        if new:
            chosen.append(take(new))
            done += len(new)
        t += poll_ns
    return chosen


def _looks(side) -> str:
    seen, parts = set(), []
    for name in side["evaluated"]:
        at = side["starts"][name]
        new = [n for n, t in side["visible"].items() if t <= at and n not in seen]
        seen.update(new)
        parts.append(f"{at / 1e6:.1f} ms: {', '.join(new)}")
    return "; ".join(parts)


def _complete_after_a_look(side) -> str:
    """The first checkpoint whose save begins before a look and is visible only after it."""
    for name, begins in side["begins"].items():
        look = -(-begins // POLL_NS) * POLL_NS  # the first look at or after it begins
        if side["visible"][name] > look:
            return (f"{name}'s save begins at {begins / 1e6:.3f} ms, before the "
                    f"{look / 1e6:.1f} ms look, and is complete at "
                    f"{side['visible'][name] / 1e6:.3f} ms")
    return ""


def check_sidecar(module):
    return verify_sidecar(module.predict_sidecar(), sidecar())


def verify_sidecar(mine, side: dict) -> str:
    """The learner's ``predict_sidecar()`` answer against a side-car run (``sidecar_of``):
    what it evaluates and skips, or a CheckFailed with a hint."""
    names = list(side["begins"])
    if as_set(mine) is None or not all(n in names for n in mine):
        raise CheckFailed(tr(f"predict_sidecar returned {mine!r}, expected a list of "
                             f"checkpoint names among {names[0]} .. {names[-1]}",
                             f"predict_sidecar 返回了 {mine!r}，应为 {names[0]} .. {names[-1]} "
                             "中检查点名称的列表"),
                          tr('return a list of names such as ["ckpt-0", "ckpt-2"]',
                             '返回名称列表，例如 ["ckpt-0", "ckpt-2"]'))
    real = side["evaluated"]
    chosen = sorted(set(mine), key=names.index)
    if chosen == real:
        return tr(f"it evaluates {', '.join(real)} and skips {', '.join(side['skipped'])}",
                  f"它评估 {', '.join(real)}，跳过 {', '.join(side['skipped'])}")
    extra = [n for n in chosen if n not in real]
    missing = [n for n in real if n not in chosen]
    if chosen == names:
        hint = tr("checkpoints are not queued: at each look the evaluator takes the latest "
                  "and skips the older ones written since its last look",
                  "检查点不会排队：每次查看时评估器只取最新的一个，上次查看以来写下的较旧的都"
                  "跳过")
    elif chosen == [n for n in real if n != names[-1]]:
        hint = tr("the evaluator keeps looking after training ends, until timeout_ns passes "
                  "without a new checkpoint: it evaluates the final one",
                  "训练结束后评估器还会继续查看，直到 timeout_ns 内没有新检查点为止：它会评估"
                  "最后一个检查点")
    elif chosen == _rule(side["visible"], POLL_NS, lambda new: new[0]):
        hint = tr("it evaluates the latest checkpoint, not the oldest new one "
                  "(checkpoints_iterator yields the newest)",
                  "它评估的是最新的检查点，而不是新检查点里最旧的那个（checkpoints_iterator "
                  "给出的是最新的）")
    elif chosen == _rule(side["begins"], POLL_NS, lambda new: new[-1]):
        late = _complete_after_a_look(side)
        hint = tr(f"a checkpoint counts once its save is complete (the checkpoint file is "
                  f"written last), 32 us after it begins: {late}",
                  f"检查点要在保存完成后才算数（checkpoint 文件最后写），即保存开始 32 微秒之后："
                  f"{late}")
    elif chosen == names[1::2]:
        hint = tr("0.7 ms is not two checkpoint intervals: look at 0, 0.7, 1.4 ms... and ask "
                  "which checkpoints are new at each", "0.7 毫秒不是两个检查点间隔：在 0、0.7、"
                  "1.4 毫秒……各查看一次，问每次有哪些新检查点")
    else:
        hint = tr("list the looks (every 0.7 ms from 0) and the checkpoints visible before "
                  "each (every 0.4885 ms from 0.5207 ms): the latest new one is evaluated",
                  "列出各次查看（从 0 起每 0.7 毫秒一次）以及每次之前已经可见的检查点（从 "
                  "0.5207 毫秒起每 0.4885 毫秒一个）：新检查点中最新的那个被评估")
    wrong = (f"includes {extra}, which it skips" if extra else "") + \
        ("; " if extra and missing else "") + \
        (f"leaves out {missing}, which it evaluates" if missing else "")
    wrong_zh = (f"包含了它跳过的 {extra}" if extra else "") + \
        ("；" if extra and missing else "") + \
        (f"漏掉了它评估的 {missing}" if missing else "")
    raise CheckFailed(tr(f"predict_sidecar returned {chosen}: it {wrong}",
                         f"predict_sidecar 返回了 {chosen}：它{wrong_zh}"), hint,

                      tr(f"new checkpoints at each look that found one: {_looks(side)}",
                         f"每次发现新检查点的查看：{_looks(side)}"))


CHECKS = [
    Check("visits", "predict_eval_visits",
          tr("examples counted twice and never after a failure",
             "故障后被算两次和从未被算的样本"), check_visits),
    Check("exactly_once", "choose_exactly_once",
          tr("a style that counts every example once, and its runs",
             "每个样本只算一次的评估方式及其运行次数"), check_exactly_once),
    Check("sidecar", "predict_sidecar",
          tr("the checkpoints a side-car evaluator evaluates", "边车评估器评估的检查点"),
          check_sidecar),
]
