# long file: three exercises' checks, each message and hint in English and Chinese
"""Lesson 01, Collectives from scratch: the checks that ``simdist check 01`` runs.

Each check calls the learner's function (their exercises, the solution or ``--file``) inside
the simulator and compares what happened with something known: numpy's sum for the values,
2(p-1) for the messages, ``formulas.ring`` for the simulated time, and the simulator's own
measurements for the prediction exercise. Every simulated task gets its own copy of the
learner's module, as every MPI rank imports its own: state shared through module globals
shows up here, in one process, as it would under mpiexec. ``ring_mpi.py`` runs the same ring
checks over MPI.
"""

import functools
import inspect
from collections import Counter

import numpy as np

from simdist import Hardware, HardwareCatalog, Layout, Phantom, SimulationDeadlock, simulate
from simdist.collectives import all_reduce, formulas
from course.lang import say
from course.lessons import Check, CheckFailed, load_module, side_by_side, tr

from simdist.trace.plots import plot_timeline
from simdist.hardware.units import format_bytes, format_ns

DIFFICULTY = {"ring_all_reduce": 2, "predict_fastest": 2}

# -- exercise 1: ring_all_reduce ----------------------------------------------------------------

RING_SIZES = (1, 2, 3, 4, 5)
INT_SHAPE = (7, 143)  # 1001 elements: not a multiple of 2, 3, 4 or 5
FLOAT_SIZE = 30011  # 120044 bytes of float32: not a multiple of 2, 3, 4 or 5 elements
SYSTEM = "cpu"  # one task per machine: every message crosses 10 GbE (a = 10 us, B = 1.25 GB/s)
TOLERANCE = 0.01  # simulated time within 1% of formulas.ring


def ring_hardware():
    return Hardware.from_catalog(HardwareCatalog.default(), SYSTEM, Layout(tasks_per_machine=1))


def member_value(kind: str, order: int):
    """The value member ``order`` passes in: int64 of shape INT_SHAPE, or float32."""
    rng = np.random.default_rng([1, order])
    if kind == "int":
        return rng.integers(-1000, 1000, size=INT_SHAPE, dtype=np.int64)
    return rng.standard_normal(FLOAT_SIZE).astype(np.float32)


def members_of(p: int) -> list:
    return [f"worker:{i}" for i in range(p)]


def task_copies(module, p: int) -> list:
    """One fresh copy of the learner's module per simulated task (as each MPI rank imports
    its own): module globals then cannot carry data from one task to another."""
    path = getattr(module, "__file__", None)
    if path is None:
        return [module] * p
    return [load_module(path, f"{module.__name__}_task{i}") for i in range(p)]


def run_ring(ring_all_reduce, p: int, kind: str, transport=None):
    """Simulate a ring on p workers; the SimulationResult, or CheckFailed.

    ``ring_all_reduce`` is the function, or a list of p functions (one per task). Each task
    returns {"sum": what the ring returned, "changed": whether the ring modified the task's
    input, "aliased": whether the result shares memory with the input}."""
    members = members_of(p)
    rings = ring_all_reduce if isinstance(ring_all_reduce, list) else [ring_all_reduce] * p

    def main(ctx):
        value = member_value(kind, ctx.order)
        before = value.copy()
        steps = rings[ctx.order](ctx, list(members), value)
        if not inspect.isgenerator(steps):
            raise CheckFailed(
                tr(f"ring_all_reduce returned {_short(steps)} instead of a generator",
                   f"ring_all_reduce 返回了 {_short(steps)}，而不是生成器"),
                tr("ring_all_reduce must wait for messages with `msg = yield ctx.recv(...)`",
                   "ring_all_reduce 必须用 `msg = yield ctx.recv(...)` 等待消息"),
                tr("a function that contains `yield` is a generator; the program calls it "
                   "with `yield from`",
                   "含有 `yield` 的函数是生成器，程序用 `yield from` 调用它"))
        total = yield from steps
        return {"sum": total, "changed": not np.array_equal(value, before),
                "aliased": isinstance(total, np.ndarray) and np.shares_memory(total, value)}

    where = tr(f"p = {p}, {_kind_name(kind)} values", f"p = {p}，{_kind_name(kind)} 值")
    try:
        return simulate({"worker": p}, main, hardware=ring_hardware(), trace=True,
                        transport=transport, metadata={"program": "lesson 01 ring check"})
    except SimulationDeadlock as error:
        if p == 1:
            hint = tr("with p = 1 there is no neighbour: nothing to send or receive",
                      "p = 1 时没有邻居：无需发送或接收任何消息")
            detail = tr("return a copy of the value (value.copy()) without calling ctx.send "
                        "or ctx.recv", "直接返回 value.copy()，不要调用 ctx.send 或 ctx.recv")
        else:
            hint = tr("every member is waiting in ctx.recv for a message nobody sends",
                      "每个成员都在 ctx.recv 中等待一条没有人发送的消息")
            detail = tr("send your chunk (ctx.send does not block) before you wait for your "
                        "neighbour's, and check that the tags and the neighbours of ctx.send "
                        "and ctx.recv match",
                        "先发送自己的块（ctx.send 不会阻塞），再等待邻居的块；并检查 ctx.send "
                        "与 ctx.recv 的标签（tag）和邻居是否一致")
        raise CheckFailed(tr(f"{where}: the simulation deadlocked:\n{error}",
                             f"{where.zh}：模拟陷入死锁：\n{error}"), hint, detail) from None
    except AttributeError as error:
        if "Recv" in str(error) or "Event" in str(error):
            raise CheckFailed(
                tr(f"{where}: {error}", f"{where.zh}：{error}"),
                tr("ctx.recv returns an event: wait for it with `yield`",
                   "ctx.recv 返回的是一个事件：要用 `yield` 等待它"),
                tr("msg = yield ctx.recv(left, tag); the array is msg.payload",
                   "msg = yield ctx.recv(left, tag)；数组在 msg.payload 中")) from None
        raise


def _kind_name(kind: str) -> str:
    return "int64" if kind == "int" else "float32"


def _short(x) -> str:
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} ({x.dtype})"
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def verify_sums(result, p: int, kind: str) -> None:
    """Every member returns numpy's sum (exactly for ints), with the value's shape and dtype,
    in a new array, and leaves its input as it was."""
    values = [member_value(kind, i) for i in range(p)]
    expected = np.sum(values, axis=0, dtype=values[0].dtype)
    for order, name in enumerate(members_of(p)):
        out = result.returns[name]
        got = out["sum"]
        where = tr(f"p = {p}, {_kind_name(kind)} values of shape {values[0].shape}: {name}",
                   f"p = {p}，形状为 {values[0].shape} 的 {_kind_name(kind)} 值：{name}")
        if got is None:
            raise CheckFailed(tr(f"{where} returned None", f"{where.zh} 返回了 None"),
                              tr("end ring_all_reduce with `return` and the summed array",
                                 "ring_all_reduce 最后要 `return` 求和后的数组"))
        if not isinstance(got, np.ndarray):
            raise CheckFailed(tr(f"{where} returned {_short(got)}, not a numpy array",
                                 f"{where.zh} 返回了 {_short(got)}，不是 numpy 数组"),
                              tr("return the joined chunks as one numpy array",
                                 "把各块拼接成一个 numpy 数组返回"),
                              tr("np.concatenate(chunks).reshape(value.shape)",
                                 "np.concatenate(chunks).reshape(value.shape)"))
        if out["changed"]:
            raise CheckFailed(
                tr(f"{where}: your ring changed the value it was given (the caller's gradient)",
                   f"{where.zh}：你的环修改了传给它的值（调用者的梯度）"),
                tr("leave `value` as it is: work on copies of its chunks",
                   "不要修改 `value`：在它的各块的副本上计算"),
                tr("np.array_split(value.reshape(-1), p) returns views into value, so "
                   "`chunk += received` writes into the caller's array: take "
                   "[c.copy() for c in np.array_split(...)], or add with `chunk = chunk + "
                   "received`",
                   "np.array_split(value.reshape(-1), p) 返回的是 value 的视图，`chunk += "
                   "received` 会写进调用者的数组：用 [c.copy() for c in np.array_split(...)]，"
                   "或者写成 `chunk = chunk + received`"))
        if out["aliased"]:
            raise CheckFailed(
                tr(f"{where}: the array your ring returned shares memory with its input",
                   f"{where.zh}：你的环返回的数组与它的输入共享内存"),
                tr("return a new array: the caller's value must stay its own",
                   "返回一个新数组：调用者的 value 必须保持独立"),
                tr("with p = 1 return value.copy(), not value; a reshape or view of value is "
                   "the same memory too",
                   "p = 1 时返回 value.copy() 而不是 value；value 的 reshape 或视图也共享同一块内存"))
        if got.shape != expected.shape:
            raise CheckFailed(
                tr(f"{where} returned shape {got.shape}, expected {expected.shape}",
                   f"{where.zh} 返回的形状是 {got.shape}，应为 {expected.shape}"),
                tr("give the result the value's shape", "结果要恢复成 value 的形状"),
                tr("np.concatenate(chunks).reshape(value.shape)",
                   "np.concatenate(chunks).reshape(value.shape)"))
        if got.dtype != expected.dtype:
            raise CheckFailed(tr(f"{where} returned dtype {got.dtype}, expected "
                                 f"{expected.dtype}",
                                 f"{where.zh} 返回的 dtype 是 {got.dtype}，应为 {expected.dtype}"),
                              tr("keep the value's dtype", "保持 value 的 dtype"),
                              tr("add chunks of the same dtype; do not build float arrays "
                                 "with np.zeros(n) for int values",
                                 "用相同 dtype 的块相加；整数值不要用 np.zeros(n) 建浮点数组"))
        same = got == expected if kind == "int" else np.isclose(got, expected, atol=1e-5)
        if not same.all():
            hint, detail = _sum_hint(got, expected, values[order], p)
            wrong = _wrong_chunks(got, expected, values[order], p)
            raise CheckFailed(tr(f"{where} returned a wrong sum: {wrong}",
                                 f"{where.zh} 返回的和不对：{wrong.zh}"), hint, detail)


def _chunk_bounds(n: int, p: int):
    sizes = [len(c) for c in np.array_split(np.empty(n), p)]
    bounds = np.cumsum([0] + sizes)
    return [(int(bounds[i]), int(bounds[i + 1])) for i in range(p)]


def _wrong_chunks(got, expected, own, p) -> str:
    g, e = got.reshape(-1), expected.reshape(-1)
    bad = [i for i, (lo, hi) in enumerate(_chunk_bounds(e.size, p))
           if not np.allclose(g[lo:hi], e[lo:hi], atol=1e-5)]
    first = int(np.flatnonzero(~np.isclose(g, e, atol=1e-5))[0])
    return tr(f"{len(bad)} of its {p} chunks differ from numpy's sum (chunks {bad}, as "
              f"np.array_split cuts them); first at flat index {first}: got {g[first]}, "
              f"expected {e[first]}",
              f"它的 {p} 块中有 {len(bad)} 块与 numpy 的和不同（按 np.array_split 的切法是第 "
              f"{bad} 块）；第一处在展平后的下标 {first}：得到 {g[first]}，应为 {e[first]}")


def _sum_hint(got, expected, own, p) -> tuple:
    g, e, o = got.reshape(-1), expected.reshape(-1), own.reshape(-1)
    for lo, hi in _chunk_bounds(e.size, p):
        if hi > lo and not np.allclose(g[lo:hi], e[lo:hi], atol=1e-5):
            if np.array_equal(g[lo:hi], o[lo:hi]):
                return (tr("a chunk still holds this member's own value: it never received "
                           "the finished chunk",
                           "有一块仍是该成员自己的值：它从未收到完成求和的那一块"),
                        tr("check the all-gather phase: p - 1 steps, each member sending the "
                           "finished chunk it received in the step before (the first time, "
                           "the one it finished itself), and storing what it receives",
                           "检查 all-gather 阶段：共 p - 1 步，每个成员发送上一步收到的已完成块"
                           "（第一步发送自己完成的那块），并保存收到的块"))
            break
    return (tr("some chunks hold a partial sum or a chunk added twice",
               "有些块只是部分和，或者某块被加了两次"),
            tr("in the reduce-scatter, the chunk you send in step s + 1 is the one you just "
               "added into in step s; in the all-gather, replace (do not add) the chunk you "
               "receive",
               "在 reduce-scatter 中，第 s + 1 步发送的正是第 s 步刚累加过的那块；在 all-gather "
               "中，收到的块要替换（不是相加）自己的副本"))


def verify_messages(result, p: int) -> str:
    """Each member sends exactly 2(p-1) messages."""
    sent = Counter(f.src_pid for f in result.trace.flows)
    want = 2 * (p - 1)
    counts = {name: sent.get(name, 0) for name in members_of(p)}
    for name, n in counts.items():
        if n == want:
            continue
        message = tr(f"p = {p}: {name} sent {n} message{'s' * (n != 1)}; a ring all-reduce "
                     f"sends 2(p-1) = {want}",
                     f"p = {p}：{name} 发送了 {n} 条消息；环形 all-reduce 发送 2(p-1) = {want} 条")
        detail = ""
        if len(set(counts.values())) > 1:
            message = tr(message + " from every member (" + ", ".join(
                f"{k} sent {v}" for k, v in counts.items()) + ")",
                message.zh + "，每个成员都是如此（" + "，".join(
                    f"{k} 发送了 {v} 条" for k, v in counts.items()) + "）")
            hint = tr("in a ring every member sends in every step, all at the same time",
                      "在环中，每一步每个成员都同时发送")
            detail = tr("p - 1 reduce-scatter steps, then p - 1 all-gather steps, one send "
                        "per member per step",
                        "p - 1 步 reduce-scatter，然后 p - 1 步 all-gather，每步每个成员发送一次")
        elif p > 1 and n == p - 1:
            hint = tr("did you forget the all-gather phase?", "是不是忘了 all-gather 阶段？")
            detail = tr("after the reduce-scatter each member holds one finished chunk; p - 1 "
                        "more steps pass them around the ring",
                        "reduce-scatter 之后每个成员只持有一个完成的块；还要再用 p - 1 步把它们在环上传一圈")
        elif n < want:
            hint = tr("each phase takes p - 1 steps, one send per step",
                      "每个阶段 p - 1 步，每步发送一次")
        elif n == 2 * p:
            hint = tr("one step too many per phase", "每个阶段多了一步")
            detail = tr("each phase has p - 1 steps, not p", "每个阶段是 p - 1 步，不是 p 步")
        else:
            hint = tr("send one chunk per step", "每步只发送一个块")
            detail = tr("not the whole value, not one message per element or per neighbour; "
                        "p - 1 steps per phase",
                        "不是整个 value，也不是每个元素或每个邻居一条消息；每个阶段 p - 1 步")
        raise CheckFailed(message, hint, detail)
    return tr(f"{want} messages each", f"每个成员 {want} 条消息")


def verify_time(result, p: int) -> tuple:
    """The simulated time is within TOLERANCE of formulas.ring(p, n, a, B): returns (the
    relative difference, a short description)."""
    hw = ring_hardware()
    a, B = hw.network.latency_ns, hw.network.bandwidth
    n = member_value("float", 0).nbytes
    want = formulas.ring(p, n, a, B)
    got = result.end_time
    if abs(got - want) <= TOLERANCE * want:
        return (abs(got - want) / want if want else 0.0,
                tr(f"{format_ns(got)} simulated, {format_ns(round(want))} by the formula",
                   f"模拟 {format_ns(got)}，公式 {format_ns(round(want))}"))
    per_step = a + -(-n // p) * 1e9 / B
    message = tr(f"p = {p}, {format_bytes(n)}: simulated {format_ns(got)}, but formulas.ring "
                 f"gives {format_ns(round(want))} = 2(p-1) steps of a + (n/p)/B = "
                 f"{format_ns(round(per_step))} each (a = {format_ns(a)}, B = {B / 1e9:g} GB/s)",
                 f"p = {p}，{format_bytes(n)}：模拟得到 {format_ns(got)}，但 formulas.ring 给出 "
                 f"{format_ns(round(want))} = 2(p-1) 步，每步 a + (n/p)/B = "
                 f"{format_ns(round(per_step))}（a = {format_ns(a)}，B = {B / 1e9:g} GB/s）")
    if got > want:
        hint = tr("slower than a ring: the steps do not overlap as a ring's do",
                  "比环慢：各步没有像环那样同时进行")
        detail = tr("does each step send one chunk of about n/p bytes (not the whole value)? "
                    "Does every member send in each step at the same time (not one after "
                    "another around the ring)? Do not call ctx.compute or ctx.timeout",
                    "每一步是否只发送约 n/p 字节的一块（而不是整个 value）？每一步所有成员是否"
                    "同时发送（而不是沿环依次发送）？不要调用 ctx.compute 或 ctx.timeout")
    else:
        hint = tr("faster than a ring can be", "比环可能达到的速度还快")
        detail = tr("does each message carry a whole chunk?", "每条消息是否携带了完整的一块？")
    raise CheckFailed(message, hint, detail)


def _ring_fns(ex, p: int) -> list:
    return [copy.ring_all_reduce for copy in task_copies(ex, p)]


def check_ring_sums(ex) -> str:
    for p in RING_SIZES:
        for kind in ("int", "float"):
            try:
                verify_sums(run_ring(_ring_fns(ex, p), p, kind), p, kind)
            except Exception:
                _shared_globals(ex, p, kind)
                raise
    sizes = ", ".join(map(str, RING_SIZES))
    return tr(f"p = {sizes}; int64 exact, float32 close to numpy's sum; inputs untouched",
              f"p = {sizes}；int64 完全相等，float32 与 numpy 的和接近；输入未被修改")


def _shared_globals(ex, p: int, kind: str) -> None:
    """Raise the globals diagnosis when the ring works only with one module for all tasks."""
    try:
        verify_sums(run_ring(ex.ring_all_reduce, p, kind), p, kind)
    except Exception:  # noqa: BLE001 (wrong either way: the first failure is reported)
        return
    raise CheckFailed(
        tr(f"p = {p}: your ring gives the right sum only when every task shares one copy of "
           "your module: with a copy per task (as under mpiexec, one per MPI rank) it fails",
           f"p = {p}：只有所有任务共用你的模块的同一份副本时，你的环才给出正确的和；每个任务一份"
           "副本时（就像 mpiexec 下每个 MPI rank 一份）它就出错"),
        tr("your tasks pass data through Python globals; simulated tasks may share only "
           "messages",
           "你的各个任务通过 Python 全局变量传递数据；模拟的任务之间只能通过消息共享数据"),
        tr("move every module-level list, dict or counter your ring writes into the function, "
           "and send chunks with ctx.send / receive them with ctx.recv",
           "把环写入的模块级 list、dict 或计数器都移到函数内部，用 ctx.send 发送块、用 "
           "ctx.recv 接收块")) from None


def check_ring_messages(ex) -> str:
    for p in RING_SIZES:
        verify_messages(run_ring(_ring_fns(ex, p), p, "float"), p)
    sizes = ", ".join(map(str, RING_SIZES))
    return tr(f"2(p-1) messages from every member, for p = {sizes}",
              f"p = {sizes} 时，每个成员都发送 2(p-1) 条消息")


def check_ring_time(ex) -> str:
    worst = 0.0
    for p in RING_SIZES:
        detail = verify_time(run_ring(_ring_fns(ex, p), p, "float"), p)
        worst = max(worst, detail[0])
    sizes = ", ".join(map(str, RING_SIZES))
    return tr(f"within {100 * worst:.2f}% of formulas.ring for p = {sizes} (p = {p}: "
              f"{detail[1]})",
              f"p = {sizes} 时与 formulas.ring 相差不超过 {100 * worst:.2f}%（p = {p}："
              f"{detail[1].zh}）")


def draw_rings(mine, reference):
    """The learner's ring and the reference's on 4 workers, 1 MiB each, side by side."""
    traces = []
    for module in (mine, reference):
        result = run_ring([m.ring_all_reduce for m in task_copies(module, 4)], 4, "float")
        traces.append(result.trace)
    return side_by_side(plot_timeline(traces[0], title=say("your ring_all_reduce",
                                                           "你的 ring_all_reduce")),
                        plot_timeline(traces[1], title=say("the reference ring", "参考答案的环")))


PICTURES = {"ring_all_reduce": draw_rings}


# -- exercise 2: predict_fastest ----------------------------------------------------------------

CANDIDATES = ("reduce-to-one", "ring", "recursive-doubling", "halving-doubling")
TIE = 0.02  # an algorithm within 2% of the fastest counts as fastest

#: (p, nbytes, system, tasks_per_machine, hint, detail): cases where the answer is clear-cut
SCENARIOS = (
    (8, 8, "cpu", 1,
     tr("8 bytes: the time is all latency", "8 字节：时间全是延迟"),
     tr("a = 10 us, n/B = 6 ns, o = 2 us a message on a card. Count the latencies on the "
        "critical path of each formula: 2 for reduce-to-one, log2(p) for recursive doubling, "
        "2 log2(p) for halving-doubling, 2(p-1) for the ring; and reduce-to-one's root takes "
        "2(p-1) messages, each costing its card o",
        "a = 10 us，n/B = 6 ns，每条消息占用网卡 o = 2 us。数一数每个公式关键路径上的延迟次数："
        "reduce-to-one 是 2，recursive doubling 是 log2(p)，halving-doubling 是 2 log2(p)，"
        "环是 2(p-1)；另外 reduce-to-one 的根节点要处理 2(p-1) 条消息，每条都让网卡花费 o")),
    (32, 4 << 10, "cpu", 1,
     tr("4 KiB on 32 tasks: both terms matter", "32 个任务、4 KiB：两项都重要"),
     tr("n/B = 3.3 us, a = 10 us. Reduce-to-one pays 2(p-1) n/B at the root; which formula "
        "has few latencies and a small bandwidth term here?",
        "n/B = 3.3 us，a = 10 us。reduce-to-one 在根节点要付 2(p-1) n/B；哪个公式在这里"
        "延迟次数少、带宽项也小？")),
    (16, 1 << 20, "cpu", 1,
     tr("1 MiB on 16 tasks: the bytes are the same for two algorithms; the latencies are not",
        "16 个任务、1 MiB：有两种算法传输的字节数相同，但延迟次数不同"),
     tr("ring and halving-doubling both move 2(p-1)/p n bytes: count the latencies each "
        "pays", "环和 halving-doubling 都传输 2(p-1)/p n 字节：数一数各自的延迟次数")),
    (8, 64 << 20, "cpu", 1,
     tr("64 MiB: the bandwidth term dominates", "64 MiB：带宽项占主导"),
     tr("which algorithms send only 2(p-1)/p n bytes per task?",
        "哪些算法每个任务只发送 2(p-1)/p n 字节？")),
    (5, 64 << 20, "cpu", 1,
     tr("p = 5 is not a power of two", "p = 5 不是 2 的幂"),
     tr("recursive algorithms first fold the extra task into a partner, sending the whole "
        "value twice more (see formulas._fold)",
        "递归类算法先把多出来的任务并入一个伙伴，要多发送两次完整的值（见 formulas._fold）")),
    (16, 64 << 20, "cpu", 4,
     tr("4 tasks share each machine's network card: the formulas assume one card per task",
        "每台机器的 4 个任务共用一块网卡：公式假设每个任务一块网卡"),
     tr("in a ring only one message per machine crosses the network each step; in "
        "halving-doubling all 4 tasks of a machine send across it at once",
        "环中每一步每台机器只有一条消息跨网络；halving-doubling 中一台机器的 4 个任务同时跨网络发送")),
)


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return format_bytes(n)


def scenario_title(p, nbytes, system, tasks_per_machine) -> str:
    per = "1 task per machine" if tasks_per_machine == 1 else \
        f"{tasks_per_machine} tasks per machine"
    return tr(f"predict_fastest: {_bytes(nbytes)} on {p} tasks ({system}, {per})",
              f"predict_fastest：{p} 个任务、{_bytes(nbytes)}（{system}，每台机器 "
              f"{tasks_per_machine} 个任务）")


@functools.lru_cache(maxsize=None)
def measured_times(p, nbytes, system, tasks_per_machine) -> dict:
    """Simulated time of each candidate algorithm for one scenario (size-only values)."""
    hw = Hardware.from_catalog(HardwareCatalog.default(), system, Layout(tasks_per_machine))
    times = {}
    for algorithm in CANDIDATES:
        def main(ctx, algorithm=algorithm):
            members = list(range(ctx.num_tasks))
            return (yield from all_reduce(ctx, members, Phantom(nbytes), algorithm=algorithm))
        times[algorithm] = simulate({"worker": p}, main, hardware=hw, trace=False).end_time
    return times


def fastest(times: dict) -> list:
    best = min(times.values())
    return [a for a in CANDIDATES if times[a] <= (1 + TIE) * best]


def check_prediction(scenario, ex) -> str:
    p, nbytes, system, tasks_per_machine, hint, detail = scenario
    guess = ex.predict_fastest(p, nbytes, system, tasks_per_machine)
    if guess not in CANDIDATES:
        names = ", ".join(repr(c) for c in CANDIDATES)
        raise CheckFailed(tr(f"predict_fastest returned {guess!r}; expected one of {names}",
                             f"predict_fastest 返回了 {guess!r}；应为以下之一：{names}"),
                          tr("return one of the candidate names exactly as written",
                             "返回候选名称之一，拼写要完全一致"))
    times = measured_times(p, nbytes, system, tasks_per_machine)
    best = fastest(times)
    table = ", ".join(f"{a} {format_ns(times[a])}" for a in CANDIDATES)
    if guess in best:
        return tr(f"{guess}: {format_ns(times[guess])} simulated",
                  f"{guess}：模拟 {format_ns(times[guess])}")
    raise CheckFailed(tr(f"you predicted {guess}, but the simulator measures {table}",
                         f"你预测的是 {guess}，但模拟器测得 {table}"), hint, detail)


# -- the list that simdist check runs -----------------------------------------------------------

CHECKS = [
    Check("ring_sums", "ring_all_reduce",
          tr("ring_all_reduce: every member gets numpy's sum (p = 1..5, int64 and float32)",
             "ring_all_reduce：每个成员都得到与 numpy 相同的和（p = 1..5，int64 和 float32）"),
          check_ring_sums),
    Check("ring_messages", "ring_all_reduce",
          tr("ring_all_reduce: every member sends 2(p-1) messages",
             "ring_all_reduce：每个成员发送 2(p-1) 条消息"), check_ring_messages),
    Check("ring_time", "ring_all_reduce",
          tr("ring_all_reduce: simulated time within 1% of formulas.ring",
             "ring_all_reduce：模拟时间与 formulas.ring 相差不超过 1%"), check_ring_time),
] + [
    Check(f"predict_{i + 1}", "predict_fastest", scenario_title(*s[:4]),
          functools.partial(check_prediction, s))
    for i, s in enumerate(SCENARIOS)
]
