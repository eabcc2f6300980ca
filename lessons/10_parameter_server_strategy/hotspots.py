"""Lesson 10, section 8: a sharded table read whole (``tf.convert_to_tensor``) or looked up
by rows (``tf.nn.embedding_lookup``), a learning-rate variable every step reads, and
functions without return values, each a small simulated job; and the checks of exercises 6
and 7 (``checks.py`` adds them to its list)."""

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simdist import simulate
from simdist.distribute.cluster_coordinator import ClusterCoordinator
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
from simdist.distribute.rpc import SGD
from simdist.distribute.server import InProcessCluster
from simdist.distribute.sharded_variable import FixedShardsPartitioner
from course.answers import is_int
from course.lessons import CheckFailed, tr

DIFFICULTY = {"lookup_ps_tasks": 2, "fetch_time_saved": 2}


def _job(jobs: dict, chief, partitioner=None):
    """Simulate ``chief(ctx, strategy, cluster)`` (a generator) on the chief of ``jobs``
    while the workers and ps serve; (its value, the trace)."""
    cluster = InProcessCluster()

    def main(ctx):
        if ctx.task_type != "chief":
            return cluster.server(ctx).join()
        return chief(ctx, ParameterServerStrategy(ctx, cluster.resolver(ctx), partitioner),
                     cluster)

    result = simulate(jobs, main)
    return result.returns["chief:0"], result.trace


@dataclass
class TableRun:
    """A (rows, 2) table on the ps, read whole by the coordinator and looked up by a
    function: each shard's (name, ps task, first row, rows), the whole value, the rows
    looked up, the ps tasks the whole read asked, and the rows each ps sent to the lookup."""

    shards: list
    whole: np.ndarray
    looked: np.ndarray
    read_from: list
    lookup_rows: dict


def sharded_table(partitioner, ids, rows: int = 12, ps: int = 3) -> TableRun:
    """The table ``np.arange(2 * rows).reshape(rows, 2)`` under ``partitioner`` on ``ps`` ps
    tasks: ``strategy.read`` of it on the coordinator (``tf.convert_to_tensor``), then one
    scheduled function that calls ``strategy.embedding_lookup(table, ids)``."""
    def chief(ctx, strategy, cluster):
        with strategy.scope():
            table = strategy.variable("table", np.arange(2 * rows, dtype=np.float32)
                                      .reshape(rows, 2))
        whole = (yield from strategy.read([table], ctx=ctx))[0]
        coordinator = ClusterCoordinator(strategy)

        def lookup():
            return (yield from strategy.embedding_lookup(table, np.asarray(ids)))
        cluster.register(lookup)
        looked = yield from coordinator.schedule(lookup).fetch()
        parts = getattr(table, "variables", [table])
        offsets = table.offsets() if hasattr(table, "offsets") else [0]
        shards = [(p.name.split(":")[0], p.task, offsets[i], p.shape[0])
                  for i, p in enumerate(parts)]
        return shards, whole, looked

    (shards, whole, looked), trace = _job({"chief": 1, "worker": 1, "ps": ps}, chief,
                                          partitioner)
    requests = [s for s in trace.spans if s.cat == "ps"]
    read_from = sorted({s.pid for s in requests if s.name.startswith("read")})
    size = {name: n for name, _, _, n in shards}
    lookup_rows: dict = {}
    flat = np.asarray(ids).reshape(-1)
    for s in requests:
        if s.name.startswith("lookup"):
            shard = s.name.split(" ", 1)[1]
            first = next(f for name, _, f, _ in shards if name == shard)
            mine = ((flat >= first) & (flat < first + size[shard])).sum()
            lookup_rows[s.pid] = lookup_rows.get(s.pid, 0) + int(mine)
    return TableRun(shards, whole, looked, read_from, dict(sorted(lookup_rows.items())))


@dataclass
class StepsRun:
    """``functions`` training steps scheduled on ``workers``: the simulated time, the fetch
    round trips (their spans) and the requests each ps answered per function."""

    ns: int
    fetches: list
    requests: dict


@lru_cache(maxsize=None)
def scheduled(workers: int, functions: int, returns: bool, lr_variable: bool = False,
              compute_us: int = 200, ps: int = 3) -> StepsRun:
    """A step function (read the kernel, in 3 shards, and the bias; ``compute_us`` of
    compute; SGD update) scheduled ``functions`` times with ``remote_value_fetch`` on; it
    returns its loss when ``returns`` (else None). With ``lr_variable`` the learning rate is
    a variable (created after the kernel and the bias: the next ps in turn) that each ps
    applying an update reads from its ps, as TF's apply ops do; here the worker asks for it
    once per such ps, which gives the learning rate's ps the same requests."""
    def chief(ctx, strategy, cluster):
        with strategy.scope():
            w = strategy.variable("kernel", np.zeros((16, 4), np.float32))
            b = strategy.variable("bias", np.zeros(4, np.float32))
            lr = strategy.variable("learning_rate", np.float32(0.1)) if lr_variable else None
        coordinator = ClusterCoordinator(strategy, remote_value_fetch=True)
        updated = sorted({p.task for v in (w, b) for p in getattr(v, "variables", [v])})

        def step():
            read = yield from strategy.read([w, b])
            yield strategy._worker.timeout(compute_us * 1000)  # forward and backward
            rate = np.float32(0.1)
            for task in updated if lr is not None else ():
                if task != lr.task:  # that ps fetches the learning rate for its apply
                    rate = (yield from strategy.read([lr]))[0]
            yield from strategy.extended.update(
                {"w": w, "b": b}, {"w": np.ones((16, 4), np.float32),
                                   "b": np.ones(4, np.float32)}, SGD(np.float32(rate)))
            return np.float32(read[0].sum()) if returns else None
        cluster.register(step)
        for _ in range(functions):
            coordinator.schedule(step)
        yield from coordinator.join()
        return ctx.now

    ns, trace = _job({"chief": 1, "worker": workers, "ps": ps}, chief,
                     FixedShardsPartitioner(3))
    requests = {f"ps:{i}": 0 for i in range(ps)}
    for s in trace.spans:
        if s.cat == "ps":
            requests[s.pid] += 1
    return StepsRun(ns, [s for s in trace.spans if s.cat == "fetch"],
                    {task: n / functions for task, n in requests.items()})


# -- exercise 6 ------------------------------------------------------------------------------

#: exercise 6: a table of 10 rows in 4 shards on 3 ps (section 8 draws 12 rows, 3 shards)
LOOKUP = {"partitioner": FixedShardsPartitioner(4), "rows": 10, "ps": 3, "ids": [9, 4, 5, 9]}


def check_lookup(module):
    mine = module.lookup_ps_tasks()
    run = sharded_table(LOOKUP["partitioner"], LOOKUP["ids"], LOOKUP["rows"], LOOKUP["ps"])
    right = sorted(run.lookup_rows)
    if not isinstance(mine, (list, tuple)) or not all(isinstance(t, str) for t in mine):
        raise CheckFailed(tr(f"lookup_ps_tasks returned {mine!r}, expected a list of ps task "
                             "names such as ['ps:0']",
                             f"lookup_ps_tasks 返回了 {mine!r}，应为参数服务器任务名的列表，"
                             "例如 ['ps:0']"),
                          tr("return the names of the ps tasks that send rows, e.g. ['ps:1']",
                             "返回发送行的参数服务器任务名，例如 ['ps:1']"))
    layout = ", ".join(f"{name} rows {first}-{first + n - 1} on {task}"
                       for name, task, first, n in run.shards)
    if sorted(set(mine)) != right:
        chosen = sorted(set(mine))
        if chosen == [f"ps:{i}" for i in range(LOOKUP["ps"])]:
            hint = tr("that is a read of the whole table (tf.convert_to_tensor asks every "
                      "shard); a lookup asks only the shards that hold the ids",
                      "那是读整张表（tf.convert_to_tensor 会问每个分片）；查找只问存有这些 "
                      "id 的分片")
        elif "ps:2" in chosen:
            hint = tr("FixedShardsPartitioner(4) on 10 rows gives shards of 3, 3, 2 and 2 rows "
                      "(the first ones get the extra rows), and the 4 shards go to the ps in "
                      "turn: shard 3 lands on ps:0 again",
                      "FixedShardsPartitioner(4) 把 10 行切成 3、3、2、2 行（多出的行给前面的"
                      "分片），4 个分片轮流放到参数服务器上：分片 3 又落在 ps:0")
        else:
            hint = tr("find each id's shard (rows 0-2, 3-5, 6-7, 8-9), then the shard's ps "
                      "(round-robin: ps:0, ps:1, ps:2, ps:0)",
                      "先找每个 id 所在的分片（第 0-2、3-5、6-7、8-9 行），再找分片所在的参数"
                      "服务器（轮流：ps:0、ps:1、ps:2、ps:0）")
        raise CheckFailed(tr(f"you said {chosen}; the simulated lookup of ids {LOOKUP['ids']} "
                             f"got rows from {right}",
                             f"你答的是 {chosen}；模拟中查找 id {LOOKUP['ids']} 时从 {right} "
                             "取了行"), hint, tr(f"the shards: {layout}",
                                                 f"分片：{layout}"))
    return tr(f"{right} send rows ({run.lookup_rows}); the other ps is not asked for any",
              f"{right} 发送了行（{run.lookup_rows}）；另一个参数服务器一行也没被要")


# -- exercise 7 ------------------------------------------------------------------------------

#: exercise 7: 2 workers and 12 functions (section 8 draws 1 worker and 8)
SAVED = {"workers": 2, "functions": 12, "compute_us": 500}
TOLERANCE = 0.15


def saved_us() -> float:
    """What returning None saves in exercise 7's job (us of simulated time)."""
    values = scheduled(SAVED["workers"], SAVED["functions"], True,
                       compute_us=SAVED["compute_us"])
    nothing = scheduled(SAVED["workers"], SAVED["functions"], False,
                        compute_us=SAVED["compute_us"])
    return (values.ns - nothing.ns) / 1e3


def check_saved(module):
    mine = module.fetch_time_saved()
    if isinstance(mine, bool) or not isinstance(mine, (int, float)) and not is_int(mine):
        raise CheckFailed(tr(f"fetch_time_saved returned {mine!r}, expected a number of us",
                             f"fetch_time_saved 返回了 {mine!r}，应为微秒数"),
                          tr("return microseconds, e.g. 50.0", "返回微秒数，例如 50.0"))
    saved = saved_us()
    one = scheduled(1, 8, True).fetches[0].dur / 1e3
    if abs(mine - saved) > TOLERANCE * saved:
        if abs(mine - SAVED["functions"] * one) <= TOLERANCE * saved:
            hint = tr("each worker has a coordinator thread of its own: the two threads fetch "
                      "at the same time, so count the fetches of one worker",
                      "每个工作器有自己的协调器线程：两个线程同时取值，所以只数一个工作器的取值")
        elif mine < saved:
            hint = tr(f"every function that returns a value costs one fetch round trip "
                      f"(about {one:.0f} us, section 8) before its worker gets the next",
                      f"每个有返回值的函数都要多一次取值往返（约 {one:.0f} 微秒，第 8 节），"
                      "之后它的工作器才拿到下一个函数")
        else:
            hint = tr("only the fetches are saved: the functions themselves still run, and "
                      "the coordinator still pays 100 us for each",
                      "省下的只有取值：函数本身照样运行，协调器照样为每个函数付 100 微秒")
        raise CheckFailed(tr(f"you predicted {mine} us; returning None saved {saved:.0f} us "
                             f"(within {TOLERANCE:.0%} wanted)",
                             f"你预测 {mine} 微秒；不返回值省下了 {saved:.0f} 微秒（要求误差在 "
                             f"{TOLERANCE:.0%} 以内）"), hint)
    return tr(f"returning None saved {saved:.0f} us: {SAVED['functions'] // SAVED['workers']} "
              f"fetches of about {one:.0f} us on each worker's thread, side by side",
              f"不返回值省下 {saved:.0f} 微秒：每个工作器的线程各省 "
              f"{SAVED['functions'] // SAVED['workers']} 次约 {one:.0f} 微秒的取值，两边同时")


def real_sharded_lookup(tf, ids, rows, shards):
    """On real TF (TF2's API in graph mode, CPU): TF's own ShardedVariable, the class
    ParameterServerStrategy makes, of ``shards`` shards of a (rows, 2) table; what
    ``tf.convert_to_tensor`` of it runs, and the rows each shard's gather gives a lookup of
    ``ids``."""
    from tensorflow.python.distribute.sharded_variable import ShardedVariable

    sizes = [rows // shards + (1 if i < rows % shards else 0) for i in range(shards)]
    starts = np.cumsum([0] + sizes)
    table = np.arange(2 * rows, dtype=np.float32).reshape(rows, 2)
    with tf.Graph().as_default() as graph:
        parts = [tf.Variable(table[a:a + n], name=f"table/part_{i}")
                 for i, (a, n) in enumerate(zip(starts, sizes))]
        sharded = ShardedVariable(parts)
        whole = tf.convert_to_tensor(sharded)
        looked = tf.nn.embedding_lookup(sharded, tf.constant(ids))
        gathers = [op for op in graph.get_operations() if op.type == "ResourceGather"]
        with tf.compat.v1.Session() as sess:
            sess.run([p.initializer for p in parts])
            got = sess.run({"whole": whole, "looked": looked,
                            "per shard": [op.outputs[0] for op in gathers]})
    return {"convert_to_tensor": f"{whole.op.type} of "
                                 f"{[i.op.type for i in whole.op.inputs[:-1]]}",
            "whole shape": list(got["whole"].shape), "looked": got["looked"].tolist(),
            "rows per shard": [len(g) for g in got["per shard"]],
            "gather of shard": [op.inputs[0].op.name for op in gathers]}
