"""Lesson 09, When the network saturates: the checks of ``simdist check 09``.

Each runs between-graph training on the simulated cluster
(``simdist.training.ps_training.train_on_ps``) and measures what the learner predicted or
decided: the bytes through a ps NIC per round of updates, the busiest ps NIC's load with the
learner's number of ps tasks, and the gradients averaged per second with the learner's
number of backup workers; and, with float16 gradients, the busiest ps NIC's load again
(in one process here, over MPI ranks in ``ps_nic_mpi.py``). A measurement is the same every
time (the simulator is deterministic), so each is made once per process.
"""

from functools import lru_cache

import numpy as np

from simdist.hardware.cluster import ClusterSpec, task_to_rank
from simdist.training.ps_spec import PSTrainingSpec
from simdist.training.ps_training import run_ps_training, train_on_ps
from course.answers import as_tuple, is_int, is_number
from course.lang import join
from course.lessons import Check, CheckFailed, tr


DIFFICULTY = {"ps_nic_bytes": 1, "choose_ps_shards": 2, "backup_workers_for_throughput": 2,
              "choose_ps_for_float16": 2, "sparse_update": 2}

BYTES = {"float32": 4, "float16": 2}


# -- exercise 1 ------------------------------------------------------------------------------

#: (parameters, workers, ps, gradient_dtype)
BYTE_CASES = ((100_000, 2, 1, "float32"), (100_000, 3, 1, "float16"),
              (120_000, 2, 3, "float16"))


@lru_cache(maxsize=None)
def measured_bytes(parameters, workers, ps, gradient_dtype) -> tuple[int, int]:
    """(received, sent) by the busiest ps NIC for one update of every worker: its bytes per
    worker run (each run pulls the weights and pushes a gradient) times ``workers``."""
    run = train_on_ps(workers=workers, ps=ps, mode="async", steps=3, features=parameters,
                      examples=2, gradient_dtype=gradient_dtype)
    runs = sum(run.worker_steps.values())
    nics = [load for task, load in run.nic_loads().items() if task.startswith("ps:")]
    return (max(n.received_bytes for n in nics) * workers // runs,
            max(n.sent_bytes for n in nics) * workers // runs)


def _close(mine, real) -> bool:
    """Within 1%: the global step, a bias and the RunGraph requests and responses (64-byte
    headers) cross the network too, a few hundred bytes a run."""
    return is_number(mine) and abs(mine - real) <= 0.01 * real


def _bytes_hint(mine, parameters, workers, ps, dtype) -> str:
    """The idea behind the likeliest wrong (received, sent)."""
    size = BYTES[dtype]
    received, sent = mine
    if _close(received, parameters * size / ps) and _close(sent, parameters * 4 / ps):
        return tr("every worker pushes its own gradient and pulls its own copy of the "
                  "weights: a round of updates is one of each per worker",
                  "每个工作器都推送自己的梯度、拉取自己的一份权重：一轮更新里每个工作器各一次")
    if _close(sent, workers * parameters * 2 / ps) and dtype == "float16":
        return tr("only the gradient is cast to float16: the variables on the ps stay "
                  "float32, and every pull reads them in float32",
                  "只有梯度被转换成 float16：参数服务器上的变量仍是 float32，每次拉取读到的都是 float32")
    if _close(received, workers * parameters * 4 / ps) and dtype == "float16":
        return tr("a float16 value takes 2 bytes, a float32 one 4",
                  "一个 float16 值占 2 个字节，float32 占 4 个")
    if ps > 1 and _close(received, workers * parameters * size) and _close(
            sent, workers * parameters * 4):
        return tr("each ps holds 1/ps of the weights, so its NIC carries 1/ps of the bytes",
                  "每个参数服务器只保存 1/ps 的权重，它的网卡也只承载 1/ps 的字节")
    if _close(received, 8 * workers * parameters * size / ps):
        return tr("bytes, not bits: a float32 is 4 bytes", "是字节，不是比特：一个 float32 占 4 个字节")
    return tr("count what one update moves (the weights out of the ps, the gradient into "
              "it), then how many updates a round has and how the weights are split",
              "先算一次更新搬运多少（权重从参数服务器流出，梯度流入），再看一轮有几次更新、权重怎样分片")


def check_bytes(module):
    for parameters, workers, ps, dtype in BYTE_CASES:
        answer = module.ps_nic_bytes(parameters, workers, ps, dtype)
        real = measured_bytes(parameters, workers, ps, dtype)
        mine = as_tuple(answer, 2, is_number)
        if mine is None:
            call = f"ps_nic_bytes({parameters}, {workers}, {ps}, {dtype!r})"
            raise CheckFailed(tr(f"{call} returned {answer!r}, expected a pair of numbers "
                                 "(received, sent)",
                                 f"{call} 返回了 {answer!r}，应为一对数（流入，流出）"),
                              tr("return two numbers: the bytes into one ps NIC, then out",
                                 "返回两个数：流入一个参数服务器网卡的字节数，然后是流出的"))
        if not all(_close(m, r) for m, r in zip(mine, real)):
            raise CheckFailed(
                tr(f"ps_nic_bytes({parameters}, {workers}, {ps}, {dtype!r}) returned "
                   f"{answer!r}; the simulated ps NIC received {real[0]:,} and sent "
                   f"{real[1]:,} bytes",
                   f"ps_nic_bytes({parameters}, {workers}, {ps}, {dtype!r}) 返回了 {answer!r}；"
                   f"模拟的参数服务器网卡流入 {real[0]:,} 字节，流出 {real[1]:,} 字节"),
                _bytes_hint(mine, parameters, workers, ps, dtype),
                tr("received = workers x parameters x (2 or 4 bytes) / ps, sent = workers x "
                   "parameters x 4 / ps", "流入 = workers x parameters x (2 或 4 字节) / ps，"
                   "流出 = workers x parameters x 4 / ps"))
    return tr(f"right for {len(BYTE_CASES)} clusters, to within 1% of the simulated NIC",
              f"{len(BYTE_CASES)} 个集群都正确，与模拟的网卡相差不超过 1%")


# -- exercise 2 ------------------------------------------------------------------------------

SHARDING = {"workers": 4, "mode": "async", "steps": 8, "features": 1_000_000, "examples": 2}
BUSY_AT_MOST = 0.5
MOST_PS = 8


@lru_cache(maxsize=None)
def busiest_ps_nic(ps) -> float:
    """The load (busy share of its busier direction) of the busiest ps NIC of
    ``SHARDING`` on ``ps`` ps tasks."""
    run = train_on_ps(ps=ps, **SHARDING)
    return max(load.busy for task, load in run.nic_loads().items() if task.startswith("ps:"))


def check_shards(module):
    mine = module.choose_ps_shards()
    if not is_int(mine) or not 1 <= mine <= MOST_PS:
        raise CheckFailed(tr(f"choose_ps_shards returned {mine!r}, expected an int "
                             f"1..{MOST_PS}",
                             f"choose_ps_shards 返回了 {mine!r}，应为 1..{MOST_PS} 的整数"),
                          tr("return the number of ps tasks", "返回参数服务器任务的个数"))
    busy = busiest_ps_nic(mine)
    if busy > BUSY_AT_MOST:
        raise CheckFailed(
            tr(f"with {mine} ps task{'s' if mine > 1 else ''} the busiest ps NIC is busy "
               f"{busy:.0%} of the time (at most {BUSY_AT_MOST:.0%} wanted)",
               f"{mine} 个参数服务器任务时，最忙的参数服务器网卡有 {busy:.0%} 的时间在忙"
               f"（要求至多 {BUSY_AT_MOST:.0%}）"),
            tr("each ps NIC carries 1/ps of every update's bytes; estimate the load as "
               "workers x (bytes per update / ps) / (bandwidth x one worker's time per "
               "update)", "每个参数服务器网卡承载每次更新字节数的 1/ps；负载约为 workers x "
               "(每次更新的字节数 / ps) / (带宽 x 单个工作器一次更新的时间)"),
            tr("4 MB per update and direction, 10 GbE (1.25 GB/s), an update every 8.7 ms "
               "for one worker alone: 4 x 3.2 ms / 8.7 ms = 1.47 NICs' worth in all, to "
               "share among the ps tasks",
               "每次更新每个方向 4 MB，10 GbE（1.25 GB/s），单个工作器每 8.7 毫秒完成一次更新："
               "4 x 3.2 毫秒 / 8.7 毫秒 = 共 1.47 块网卡的负载，由各个参数服务器分担"))
    if mine > 1 and busiest_ps_nic(mine - 1) <= BUSY_AT_MOST:
        raise CheckFailed(
            tr(f"{mine - 1} ps tasks also keep every ps NIC at most {BUSY_AT_MOST:.0%} busy "
               f"({busiest_ps_nic(mine - 1):.0%})",
               f"{mine - 1} 个参数服务器任务也能让每块参数服务器网卡的忙碌时间不超过 "
               f"{BUSY_AT_MOST:.0%}（{busiest_ps_nic(mine - 1):.0%}）"),
            tr("the fewest that do: every ps task is one more machine to pay for",
               "够用即可，越少越好：每个参数服务器任务都要多占一台机器"))
    return tr(f"{mine} ps tasks: the busiest ps NIC is busy {busy:.0%} of the time",
              f"{mine} 个参数服务器任务：最忙的参数服务器网卡有 {busy:.0%} 的时间在忙")


# -- exercise 3 ------------------------------------------------------------------------------

STRAGGLERS = {"workers": 6, "mode": "sync", "steps": 12,
              "step_us": (1000, 1000, 1000, 1000, 3000, 6000)}


@lru_cache(maxsize=None)
def gradients_per_second(backups) -> float:
    """The gradients the steps of ``STRAGGLERS`` average per second of simulated time with
    ``backups`` backup workers (replicas_to_aggregate = workers - backups)."""
    aggregate = STRAGGLERS["workers"] - backups
    run = train_on_ps(replicas_to_aggregate=aggregate, **STRAGGLERS)
    return aggregate * run.global_step / (run.trained_ns / 1e9)


def _backups_hint(mine: int) -> str:
    workers = STRAGGLERS["workers"]
    if mine == 0:
        return tr("without a backup worker every step waits for the 6 ms worker",
                  "没有备份工作器，每一步都要等那个 6 毫秒的工作器")
    if mine == workers - 1:
        return tr("the steps are short, but each averages a single gradient: count "
                  "gradients per step / step time", "每一步很短，但只平均一个梯度：算一算"
                  " 每步梯度数 / 每步时间")
    if mine == 1:
        return tr("one backup leaves the 3 ms worker holding up every step",
                  "只有一个备份工作器时，那个 3 毫秒的工作器仍然拖住每一步")
    return tr("once the slow workers are backups, another backup makes no step shorter: it "
              "only throws away a fast worker's gradient",
              "慢工作器都成了备份之后，再多一个备份也不会让步更短：只会扔掉一个快工作器的梯度")


def check_backups(module):
    mine = module.backup_workers_for_throughput()
    workers = STRAGGLERS["workers"]
    if not is_int(mine) or not 0 <= mine < workers:
        raise CheckFailed(tr(f"backup_workers_for_throughput returned {mine!r}, expected an "
                             f"int 0..{workers - 1}",
                             f"backup_workers_for_throughput 返回了 {mine!r}，应为 "
                             f"0..{workers - 1} 的整数"), tr("return the number of backup workers",
                                                  "返回备份工作器的个数"))
    rate = gradients_per_second(mine)
    for other in (mine - 1, mine + 1):
        if 0 <= other < workers and gradients_per_second(other) > rate:
            raise CheckFailed(
                tr(f"with {mine} backup workers the steps average {rate:,.0f} gradients/s; "
                   f"with {other}, {gradients_per_second(other):,.0f}",
                   f"{mine} 个备份工作器时，每秒平均 {rate:,.0f} 个梯度；{other} 个时为 "
                   f"{gradients_per_second(other):,.0f}"),
                _backups_hint(mine),
                tr("a step waits for the (workers - backups) fastest gradients: gradients/s "
                   "is about (workers - backups) / (the step time of the slowest of them + up "
                   "to 1 ms for the pull, the push and the token)",
                   "一步要等最快的 (workers - backups) 个梯度：每秒梯度数约为 (workers - "
                   "backups) / (其中最慢者的每步时间 + 拉取、推送和令牌最多约 1 毫秒)"))
    return tr(f"{mine} backup workers: {rate:,.0f} gradients averaged per second",
              f"{mine} 个备份工作器：每秒平均 {rate:,.0f} 个梯度")


# -- exercise 4 ------------------------------------------------------------------------------

#: half exercise 2's model and compute (the same loads, half the simulated time: a quicker
#: run under mpiexec), float16 gradients
FLOAT16 = {"workers": 4, "mode": "async", "steps": 8, "features": 500_000, "examples": 2,
           "step_us": (500,) * 4, "gradient_dtype": "float16"}
FLOAT16_AT_MOST = 0.45


def float16_answer(module) -> int:
    """The learner's ``choose_ps_for_float16``, an int 1..MOST_PS, else CheckFailed (on
    every MPI rank alike, before anything is simulated)."""
    mine = module.choose_ps_for_float16()
    if not is_int(mine) or not 1 <= mine <= MOST_PS:
        raise CheckFailed(tr(f"choose_ps_for_float16 returned {mine!r}, expected an int "
                             f"1..{MOST_PS}",
                             f"choose_ps_for_float16 返回了 {mine!r}，应为 1..{MOST_PS} 的整数"),
                          tr("return the number of ps tasks",
                                              "返回参数服务器任务的个数"))
    return mine


def float16_cases(mine: int) -> tuple[int, ...]:
    """The numbers of ps tasks the check runs: the learner's, and one fewer."""
    return tuple(p for p in (mine, mine - 1) if p >= 1)


def run_float16(ps, transport=None):
    """``FLOAT16`` on ``ps`` ps tasks (over ``transport``'s ranks if given): the run on rank
    0, None on the others."""
    return run_ps_training(PSTrainingSpec(ps=ps, **FLOAT16), transport)


def busiest_ps(run):
    """The NicLoad of the busiest ps NIC of a run (its busier direction decides)."""
    return max((load for task, load in run.nic_loads().items() if task.startswith("ps:")),
               key=lambda load: load.busy)


@lru_cache(maxsize=None)
def float16_load(ps):
    """``busiest_ps`` of ``FLOAT16`` on ``ps`` ps tasks, simulated in this process."""
    return busiest_ps(run_float16(ps))


def task_ranks(ps: int, ranks: int) -> str:
    """"rank 0: worker:0, worker:1; rank 1: ...": the tasks of {ps, worker: 4} that each MPI
    rank runs under ``mpiexec -n ranks``."""
    tasks = [t.name for t in ClusterSpec({"ps": ps, "worker": FLOAT16["workers"]}).tasks()]
    on = task_to_rank(len(tasks), ranks)
    return "; ".join(f"rank {r}: " + ", ".join(t for t, at in zip(tasks, on) if at == r)
                     for r in range(ranks))


def _load_text(ps, load) -> str:
    return tr(f"with {ps} ps task{'s' if ps > 1 else ''} the busiest ps NIC is busy "
              f"{load.busy:.0%} of the time (out {load.busy_out:.0%}, in {load.busy_in:.0%})",
              f"{ps} 个参数服务器任务时，最忙的参数服务器网卡有 {load.busy:.0%} 的时间在忙"
              f"（流出 {load.busy_out:.0%}，流入 {load.busy_in:.0%}）")


def verify_float16(mine: int, load_of) -> str:
    """The learner's number of ps tasks against the busiest ps NIC's load with it and, if
    that is low enough, with one fewer (``load_of(ps)``: a NicLoad, None for 0), else
    CheckFailed."""
    load = load_of(mine)
    if load.busy > FLOAT16_AT_MOST:
        raise CheckFailed(
            join(_load_text(mine, load), tr(f"; at most {FLOAT16_AT_MOST:.0%} wanted",
                                            f"；要求至多 {FLOAT16_AT_MOST:.0%}")),
            tr("float16 halves the pushes only: every pull still carries the float32 weights, "
               "so the egress is the busier direction; and a worker whose push is shorter comes "
               "back for the weights sooner",
               "float16 只减半了推送：每次拉取仍是 float32 的权重，所以流出方向更忙；"
               "而且推送变短之后，工作器会更早回来拉取权重"),
            tr("one worker alone makes an update every 3.75 ms, and its pull is still 2 MB of "
               "float32 weights, 1.6 ms on the wire: 4 x 1.6 / 3.75 = 1.71 NICs' worth of "
               "egress, to share among the ps tasks",
               "单个工作器每 3.75 毫秒完成一次更新，而它每次拉取的仍是 2 MB 的 float32 权重，"
               "在线路上要 1.6 毫秒：4 x 1.6 / 3.75 = 共 1.71 块网卡的流出负载，"
               "由各个参数服务器分担"))
    fewer = load_of(mine - 1)
    if fewer is not None and fewer.busy <= FLOAT16_AT_MOST:
        keep = "tasks also keep" if mine > 2 else "task also keeps"
        raise CheckFailed(
            tr(f"{mine - 1} ps {keep} every ps NIC at most {FLOAT16_AT_MOST:.0%} busy "
               f"({fewer.busy:.0%})",
               f"{mine - 1} 个参数服务器任务也能让每块参数服务器网卡的忙碌时间不超过 "
               f"{FLOAT16_AT_MOST:.0%}（{fewer.busy:.0%}）"),
            tr("the fewest that do: every ps task is one more machine to pay for",
               "够用即可，越少越好：每个参数服务器任务都要多占一台机器"))
    return join(_load_text(mine, load),
                tr(f"; with {mine - 1}, {fewer.busy:.0%}", f"；{mine - 1} 个时为 {fewer.busy:.0%}")
                if fewer else "")


def check_float16(module):
    mine = float16_answer(module)
    return verify_float16(mine, lambda ps: float16_load(ps) if ps >= 1 else None)


# -- exercise 6 ------------------------------------------------------------------------------


def sparse_step(tf, ids=(2, 5, 2), width=2, rows=8):
    """One SGD step (learning rate 1) of a zero (rows, width) float32 table after a lookup
    of the int32 ``ids``, each weighted by its position (1, 2, ...): the IndexedSlices
    gradient (indices, values, bytes) and the rows the update changed. ``tf`` is simdist's
    TF1 API or real TF's ``tf.compat.v1`` (the notebook runs it on both)."""
    with tf.Graph().as_default():
        table = tf.get_variable("table", initializer=np.zeros((rows, width), np.float32))
        looked = tf.nn.embedding_lookup(table, tf.constant(np.array(ids, np.int32)))
        weights = np.arange(1, len(ids) + 1, dtype=np.float32)[:, None]
        grad = tf.gradients(tf.reduce_sum(looked * tf.constant(weights)), [table])[0]
        train = tf.train.GradientDescentOptimizer(1.0).apply_gradients([(grad, table)])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            g = sess.run(grad)
            sess.run(train)
            after = sess.run(table)
    changed = [int(r) for r in np.nonzero(after.any(axis=1))[0]]
    return {"type": type(grad).__name__, "indices": np.asarray(g.indices).tolist(),
            "values": np.asarray(g.values).tolist(),
            "bytes": int(np.asarray(g.values).nbytes + np.asarray(g.indices).nbytes),
            "changed": changed, "after": {str(r): after[r].tolist() for r in changed}}


#: exercise 6's batch: a table of 10 rows of 4 (section 5 draws 8 rows of 2, ids 2, 5, 2)
SPARSE_IDS, SPARSE_WIDTH, SPARSE_ROWS = [3, 8, 3, 1, 8, 3, 6, 0], 4, 10


@lru_cache(maxsize=None)
def simulated_sparse_step() -> dict:
    import simdist.graph as tf

    return sparse_step(tf, tuple(SPARSE_IDS), SPARSE_WIDTH, SPARSE_ROWS)


def check_sparse(module):
    answer = module.sparse_update()
    mine = as_tuple(answer, 2)
    ran = simulated_sparse_step()
    right = (ran["changed"], ran["bytes"])
    shape = tr("return (the rows changed, a sorted list of ints; the bytes, an int)",
               "返回（改变的行，一个排好序的整数列表；字节数，一个整数）")
    if mine is None or not isinstance(mine[0], (list, tuple)) or not is_int(mine[1]) \
            or not all(is_int(r) for r in mine[0]):
        raise CheckFailed(tr(f"sparse_update returned {answer!r}, expected a pair (rows, "
                             "bytes)", f"sparse_update 返回了 {answer!r}，应为一对 (行, 字节数)"),
                          shape)
    rows, nbytes = [int(r) for r in mine[0]], int(mine[1])
    unique, width = len(set(SPARSE_IDS)), SPARSE_WIDTH
    if rows != right[0]:
        if sorted(set(rows)) == right[0]:
            hint = tr("each changed row once, in increasing order: a repeated id still "
                      "changes one row", "每个改变的行只写一次，按升序：重复的 id 仍只改变一行")
        else:
            hint = tr("a lookup's gradient touches exactly the rows looked up, and only them",
                      "查找的梯度只触及被查到的那些行，其他行一概不动")
        raise CheckFailed(tr(f"you said rows {rows} change; the simulated step changed "
                             f"{right[0]}", f"你说改变的行是 {rows}；模拟的这一步改变了 "
                             f"{right[0]}"), hint)
    if nbytes != right[1]:
        if nbytes == unique * width * 4 + unique * 4:
            hint = tr("the IndexedSlices keeps one row of values per lookup, repeated ids "
                      "too: the rows are summed only where the update is applied, on the ps",
                      "IndexedSlices 为每次查找保留一行值，重复的 id 也一样：这些行要到参数"
                      "服务器上执行更新时才相加")
        elif nbytes == len(SPARSE_IDS) * width * 4:
            hint = tr("the indices travel too: one int32 (4 bytes) per lookup",
                      "索引也要传过去：每次查找一个 int32（4 字节）")
        else:
            hint = tr(f"values: one row of {width} float32 per lookup; indices: one int32 per "
                      "lookup", f"值：每次查找一行 {width} 个 float32；索引：每次查找一个 int32")
        raise CheckFailed(tr(f"you said {nbytes} bytes; the simulated gradient holds "
                             f"{right[1]} bytes (indices {ran['indices']})",
                             f"你说 {nbytes} 字节；模拟的梯度有 {right[1]} 字节（索引 "
                             f"{ran['indices']}）"), hint)
    return tr(f"rows {right[0]} change, from an IndexedSlices of {len(SPARSE_IDS)} rows "
              f"({right[1]} bytes): row 3's three gradients are summed on the ps",
              f"改变的是第 {right[0]} 行，来自一个 {len(SPARSE_IDS)} 行的 IndexedSlices"
              f"（{right[1]} 字节）：第 3 行的三个梯度在参数服务器上相加")


CHECKS = [
    Check("bytes", "ps_nic_bytes",
          tr("bytes through a ps NIC per round of updates", "每轮更新经过参数服务器网卡的字节数"),
          check_bytes),
    Check("shards", "choose_ps_shards",
          tr("ps tasks that keep the NIC load under 50%", "让网卡负载低于 50% 的参数服务器个数"),
          check_shards),
    Check("backups", "backup_workers_for_throughput",
          tr("backup workers for the most gradients per second", "每秒梯度最多时的备份工作器个数"),
          check_backups),
    Check("float16", "choose_ps_for_float16",
          tr("ps tasks for float16 gradients, each NIC at most 45% busy",
             "float16 梯度下让每块网卡至多 45% 忙的参数服务器个数"), check_float16),
    Check("sparse", "sparse_update",
          tr("the rows a sparse update changes and the bytes it sends",
             "稀疏更新改变的行和它发送的字节数"), check_sparse),
]
