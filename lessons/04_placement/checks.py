"""Lesson 04, Devices and placement: the checks that ``simdist check 04`` runs.

Each check builds a small graph with the learner's code in ``simdist.graph`` and compares
what the placer and the simulated run did with the rules of TF's placer. The real-TF half of
the lesson (tests/course/test_lessons_04_05_placement_sessions.py and the notebook) runs the same programs on real
TensorFlow and finds the same devices.
"""

from types import SimpleNamespace

import numpy as np

import simdist.graph as sim
from course.lessons import Check, CheckFailed, tr

DIFFICULTY = {"split_devices": 1, "predict_placement": 2, "ordered_sum": 1, "gpu_plan": 2,
              "inter_op_threads": 2}

LOCAL = "/job:localhost/replica:0/task:0/device:"
QUIZ_OPS = ("a", "b", "c", "v", "d", "e")


def placement_quiz(tf):
    """The graph of exercise 2 (two CPU devices, no GPU, allow_soft_placement=True)."""
    def variables_on_cpu1(op):
        return "/cpu:1" if op.type in ("VariableV2", "VarHandleOp") else "/cpu:0"
    with tf.device("/cpu:1"):
        a = tf.constant([1.0, 2.0], name="a")
        with tf.device("/job:localhost"):
            b = tf.add(a, a, name="b")
    c = tf.multiply(b, 2.0, name="c")
    with tf.device(variables_on_cpu1):
        v = tf.Variable([3.0, 4.0], name="v")
        d = tf.add(c, v, name="d")
    with tf.device("/gpu:0"):
        e = tf.identity(d, name="e")
    return [e]


def quiz_placement() -> dict:
    """{op name: device} the simulated placer gives the quiz."""
    graph = sim.Graph()
    with graph.as_default():
        fetches = placement_quiz(sim)
        init = sim.global_variables_initializer()
    config = sim.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=True)
    with sim.Session(graph=graph, config=config) as sess:
        sess.run(init)
        sess.run(fetches)
        return sess.last_placement


# -- exercise 1 ------------------------------------------------------------------------------


def _split_graph(module, variable_device, compute_device):
    fn = module.split_devices(variable_device, compute_device)
    if not callable(fn):
        raise CheckFailed(tr(f"split_devices returned {fn!r}, not a function",
                             f"split_devices 返回了 {fn!r}，不是函数"),
                          tr("return a function that takes an op and returns a device string",
                             "返回一个函数：参数是 op，返回设备字符串"),
                          tr("def device_fn(op): ...; return device_fn",
                             "def device_fn(op): ...; return device_fn"))
    graph = sim.Graph()
    with graph.as_default(), sim.device(fn):
        w = sim.Variable(np.ones((4, 4), np.float32), name="w")
        x = sim.constant(np.ones((2, 4), np.float32), name="x")
        y = sim.matmul(x, w, name="y")
    sess = sim.Session(graph=graph, machine=sim.Machine(gpus=1))
    sess.run(w.initializer)
    value = sess.run(y)
    sess.close()
    return sess.last_placement, value


def check_variables_half(module):
    where, _ = _split_graph(module, "/cpu:0", "/gpu:0")
    if where["w"] != LOCAL + "CPU:0":
        raise CheckFailed(tr(f"variable w was placed on {where['w']}, expected {LOCAL}CPU:0",
                             f"变量 w 被放在 {where['w']}，应为 {LOCAL}CPU:0"),
                          tr("the function sees every op: tell the variables by their op type",
                             "这个函数会看到每一个 op：按 op 的类型认出变量"),
                          tr("return variable_device when op.type is 'VariableV2' or 'VarHandleOp'",
                             "当 op.type 是 'VariableV2' 或 'VarHandleOp' 时返回 variable_device"))
    fake = SimpleNamespace(type="VarHandleOp", name="r", device="")
    got = module.split_devices("/cpu:0", "/gpu:0")(fake)
    if got != "/cpu:0":
        raise CheckFailed(tr(f"a resource variable (op type VarHandleOp) got {got!r}, expected "
                             "'/cpu:0'", f"资源变量（op 类型 VarHandleOp）得到 {got!r}，应为 "
                             "'/cpu:0'"),
                          tr("real TF 2 makes resource variables", "真实的 TF 2 创建的是资源变量"),
                          tr("their op type is VarHandleOp, not VariableV2: accept both",
                             "它们的 op 类型是 VarHandleOp 而不是 VariableV2：两种都要认"))
    return tr("variables go to the CPU (VariableV2 and VarHandleOp)",
              "变量放到 CPU 上（VariableV2 和 VarHandleOp）")


def check_compute_half(module):
    where, value = _split_graph(module, "/cpu:0", "/gpu:0")
    wrong = {n: where[n] for n in ("x", "y") if where[n] != LOCAL + "GPU:0"}
    if wrong:
        raise CheckFailed(tr(f"ops {wrong} should be on {LOCAL}GPU:0",
                             f"op {wrong} 应当放在 {LOCAL}GPU:0"),
                          tr("every op that is not a variable goes to compute_device",
                             "不是变量的 op 都放到 compute_device"))
    if not np.allclose(value, 4.0):
        raise CheckFailed(tr(f"y = x @ w gave {value.tolist()}, expected 4.0 everywhere",
                             f"y = x @ w 得到 {value.tolist()}，应处处为 4.0"),
                          tr("the device function must not change what the ops compute",
                             "设备函数不能改变 op 的计算结果"))
    return tr("the other ops go to the GPU, and the values are right",
              "其他 op 放到 GPU 上，数值正确")


# -- exercise 2 ------------------------------------------------------------------------------


def check_prediction(module):
    predicted = module.predict_placement()
    if not isinstance(predicted, dict):
        raise CheckFailed(tr(f"predict_placement returned {predicted!r}, expected a dict",
                             f"predict_placement 返回了 {predicted!r}，应为 dict"),
                          tr("return {op name: full device name}", "返回 {op 名称: 完整设备名}"))
    actual = quiz_placement()
    missing = [n for n in QUIZ_OPS if n not in predicted]
    if missing:
        raise CheckFailed(tr(f"no prediction for {missing}", f"没有对 {missing} 的预测"),
                          tr("predict every op of QUIZ_OPS", "为 QUIZ_OPS 中的每个 op 给出预测"))
    wrong = {n: (predicted[n], actual[n]) for n in QUIZ_OPS if predicted[n] != actual[n]}
    if wrong:
        lines = [f"{n}: you said {p}, the placer chose {a}" for n, (p, a) in wrong.items()]
        lines_zh = [f"{n}：你说 {p}，放置器选择了 {a}" for n, (p, a) in wrong.items()]
        raise CheckFailed(tr("\n".join(lines), "\n".join(lines_zh)), *_quiz_hint(wrong))
    return tr(f"all {len(QUIZ_OPS)} predictions match the placer",
              f"全部 {len(QUIZ_OPS)} 个预测都与放置器一致")


def _quiz_hint(wrong: dict) -> tuple:
    first = next(iter(wrong))
    ideas = {
        "b": (tr("an inner scope overrides only the fields it names",
                 "内层作用域只覆盖它写出的字段"),
              tr("/job:localhost inside /cpu:1 keeps the device field /cpu:1",
                 "在 /cpu:1 里面写 /job:localhost，设备字段仍然是 /cpu:1")),
        "c": (tr("outside every scope the placer picks the default device",
                 "在所有作用域之外，放置器选择默认设备"),
              tr("no GPU here: the default is CPU:0", "这里没有 GPU：默认是 CPU:0")),
        "v": (tr("a device function sees every op created inside it, variables too",
                 "设备函数会看到在其中创建的每个 op，包括变量"), ""),
        "d": (tr("a device function sees every op created inside it, not only variables",
                 "设备函数会看到在其中创建的每个 op，而不只是变量"),
              tr("read variables_on_cpu1 again: what does it return for an Add?",
                 "再读一遍 variables_on_cpu1：它对 Add 返回什么？")),
        "e": (tr("the machine has no GPU, and soft placement is on",
                 "机器上没有 GPU，并且开启了软放置"),
              tr("soft placement moves the op to the CPU, device 0",
                 "软放置会把 op 移到 CPU 的 0 号设备")),
    }
    return ideas.get(first, (tr("inner scopes win field by field; a device function sees every "
                                "op; a device that does not exist falls back with soft "
                                "placement",
                                "内层作用域逐字段覆盖；设备函数看到每个 op；不存在的设备在软放置下回退"),
                             ""))


# -- exercise 3 ------------------------------------------------------------------------------


def check_ordering(module):
    xa = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
    graph = sim.Graph()
    with graph.as_default():
        x = sim.constant(xa, name="x")
        p, q, big = module.ordered_sum(sim, x)
    controls = {c.name for c in big.op.control_inputs}
    if not {p.op.name, q.op.name} <= controls:
        raise CheckFailed(tr(f"big's control inputs are {sorted(controls)}: expected p and q",
                             f"big 的控制输入是 {sorted(controls)}：应为 p 和 q"),
                          tr("an order without a data edge is a control dependency",
                             "没有数据边的先后顺序就是控制依赖"),
                          tr("create big inside `with tf.control_dependencies([p, q]):`",
                             "在 `with tf.control_dependencies([p, q]):` 之内创建 big"))
    if {t.op for t in big.op.inputs} & {p.op, q.op}:
        raise CheckFailed(tr("big uses the value of p or q", "big 用到了 p 或 q 的值"),
                          tr("big must stay x @ x", "big 必须仍然是 x @ x"))
    with sim.Session(graph=graph) as sess:
        pv, qv, bv = sess.run([p, q, big])
        spans = {s.name: s for s in sess.last_trace.spans}
    if not (np.isclose(pv, xa.sum()) and np.isclose(qv, xa.mean()) and np.allclose(bv, xa @ xa)):
        raise CheckFailed(tr("wrong values: expected p = sum(x), q = mean(x), big = x @ x",
                             "数值不对：应为 p = sum(x)，q = mean(x)，big = x @ x"),
                          tr("reduce_sum, reduce_mean and matmul of x", "对 x 做 reduce_sum、reduce_mean 和 matmul"))
    first = max(spans[p.op.name].end, spans[q.op.name].end)
    if spans[big.op.name].start < first:
        raise CheckFailed(tr(f"big started at {spans[big.op.name].start} ns, before p and q "
                             f"finished ({first} ns)",
                             f"big 在 {spans[big.op.name].start} ns 开始，早于 p 和 q 结束"
                             f"（{first} ns）"),
                          tr("big must wait for p and q", "big 必须等待 p 和 q"))
    return tr(f"big starts at {spans[big.op.name].start} ns, after p and q",
              f"big 在 {spans[big.op.name].start} ns 开始，在 p 和 q 之后")


# -- exercise 4 ------------------------------------------------------------------------------

#: the processes of exercise 4, in the order they start, and the share of one GPU each needs
GPU_NEEDS = {"trainer0": 0.6, "trainer1": 0.6, "evaluator": 0.25}
GPUS = 2


def _plan_hint_cap(name) -> tuple:
    return (tr(f"{name} is not capped: a process that can grow takes what the others need",
               f"{name} 没有上限：可以增长的进程会占用其他进程需要的显存"),
            tr("allow_growth alone lets a process grow to the whole GPU; "
               "per_process_gpu_memory_fraction is the cap (with or without allow_growth)",
               "单独的 allow_growth 允许进程增长到整块 GPU；per_process_gpu_memory_fraction 才是"
               "上限（可与 allow_growth 同用）"))


def check_gpu_plan(module):
    plan = module.gpu_plan(sim)
    if not isinstance(plan, dict) or set(plan) != set(GPU_NEEDS):
        raise CheckFailed(tr(f"gpu_plan returned {plan!r:.120}; expected a dict with the keys "
                             f"{sorted(GPU_NEEDS)}",
                             f"gpu_plan 返回了 {plan!r:.120}；应为以 {sorted(GPU_NEEDS)} 为键的 "
                             "dict"),
                          tr("one ConfigProto per process", "每个进程一个 ConfigProto"))
    machine = sim.Machine(gpus=GPUS)
    total = machine.gpu_profile.memory
    sessions, caps = {}, {g: 0.0 for g in range(GPUS)}
    try:
        for name, need in GPU_NEEDS.items():
            config = plan[name]
            if not isinstance(config, sim.ConfigProto):
                raise CheckFailed(tr(f"{name}: {config!r:.80} is not a tf.ConfigProto",
                                     f"{name}：{config!r:.80} 不是 tf.ConfigProto"),
                                  tr("build each with tf.ConfigProto(gpu_options=...)",
                                     "每个都用 tf.ConfigProto(gpu_options=...) 构造"))
            try:
                sessions[name] = sim.Session(config=config, machine=machine)
            except sim.errors.ResourceExhaustedError as error:
                raise CheckFailed(
                    tr(f"{name} could not start: {str(error)[:160]}",
                       f"{name} 无法启动：{str(error)[:160]}"),
                    tr("by default a process takes all of every GPU it sees",
                       "默认情况下，一个进程会占满它看到的每块 GPU"),
                    tr("give each process a fraction of one GPU that leaves room for the ones "
                       "that start after it",
                       "给每个进程一块 GPU 的一部分，并为之后启动的进程留出空间")) from None
            allocators = list(sessions[name].runtimes["localhost:0"].allocators.values())
            if len(allocators) != 1:
                raise CheckFailed(
                    tr(f"{name} sees {len(allocators)} GPUs; each process needs one",
                       f"{name} 看到 {len(allocators)} 块 GPU；每个进程只需要一块"),
                    tr("a process holds memory on every GPU it sees",
                       "进程会在它看到的每块 GPU 上占用显存"),
                    tr("gpu_options.visible_device_list chooses the GPUs a process sees",
                       "gpu_options.visible_device_list 决定进程能看到哪些 GPU"))
            pool = allocators[0]
            if pool.limit >= total or not config.gpu_options.per_process_gpu_memory_fraction:
                raise CheckFailed(tr(f"{name} can grow to the whole GPU {pool.physical}",
                                     f"{name} 可以增长到占满整块 GPU {pool.physical}"),
                                  *_plan_hint_cap(name))
            if pool.limit < int(need * total):
                raise CheckFailed(
                    tr(f"{name} needs {need:.0%} of a GPU but is capped at "
                       f"{pool.limit / total:.0%}",
                       f"{name} 需要一块 GPU 的 {need:.0%}，但上限是 {pool.limit / total:.0%}"),
                    tr("the cap must hold what the process needs",
                       "上限必须容得下进程所需的显存"), "")
            caps[pool.physical] += pool.limit / total
    finally:
        for session in sessions.values():
            session.close()
    over = {g: c for g, c in caps.items() if c > 1.0 + 1e-9}
    if over:
        raise CheckFailed(tr(f"the caps on GPU {list(over)[0]} add up to "
                             f"{list(over.values())[0]:.0%}",
                             f"GPU {list(over)[0]} 上的上限加起来是 {list(over.values())[0]:.0%}"),
                          tr("caps that add up to more than a GPU can still run out",
                             "上限加起来超过一块 GPU，仍然可能耗尽显存"), "")
    shares = ", ".join(f"GPU {g} {c:.0%}" for g, c in caps.items())
    return tr(f"three processes start, each sees one GPU and is capped at what it needs: "
              f"{shares}", f"三个进程都能启动，每个只看到一块 GPU，上限正好是它所需的：{shares}")


# -- exercise 5 ------------------------------------------------------------------------------

#: why a session of a scenario gets its pool: the hint when its prediction is wrong
POOL_HINTS = {
    "global": (tr("by default every session of a process shares one global inter-op pool",
                  "默认情况下，一个进程的所有会话共用一个全局 inter-op 线程池"),
               tr("the first session that uses it creates it with its inter_op_parallelism_"
                  "threads (0: one thread per core); a later session's own value is ignored",
                  "第一个用它的会话按自己的 inter_op_parallelism_threads 创建它（0：每个核一个"
                  "线程）；之后的会话自己的设置被忽略")),
    "per_session": (tr("use_per_session_threads gives the session a pool of its own",
                       "use_per_session_threads 让会话拥有自己的线程池"),
                    tr("its size is the session's inter_op_parallelism_threads (0: one per "
                       "core), and it does not touch the global pool",
                       "大小是会话自己的 inter_op_parallelism_threads（0：每个核一个），"
                       "也不会动全局线程池")),
    "pool": (tr("session_inter_op_thread_pool lists the session's pools; "
                "RunOptions.inter_op_thread_pool picks the one a run uses",
                "session_inter_op_thread_pool 列出会话的各个线程池；"
                "RunOptions.inter_op_thread_pool 选出一次 run 用哪一个"),
             tr("num_threads 0 means the session's default: inter_op_parallelism_threads, "
                "else one per core",
                "num_threads 为 0 表示会话的默认值：inter_op_parallelism_threads，否则每个核一个")),
    "named": (tr("a pool with a global_name is the process's pool of that name, shared by "
                 "every session that names it",
                 "带 global_name 的线程池是进程里同名的那个线程池，所有写这个名字的会话共用"),
              tr("the first session that names it sets its size; a later num_threads is "
                 "ignored", "第一个写这个名字的会话决定它的大小；之后的 num_threads 被忽略")),
    "caller": (tr("inter_op_thread_pool -1 runs the ops on the caller's thread",
                  "inter_op_thread_pool 为 -1 时，op 在调用者的线程上运行"),
               tr("one thread: one op at a time", "一个线程：一次一个 op")),
}


def _pool_scenarios():
    """(cores, [(config, run_pool, hint key)]): each a fresh process, sessions in order."""
    config, pool = sim.ConfigProto, sim.ThreadPoolOptionProto
    return [
        (8, [(config(inter_op_parallelism_threads=3), 0, "global"),
             (config(inter_op_parallelism_threads=6), 0, "global"),
             (config(), 0, "global")]),
        (2, [(config(), 0, "global"),
             (config(inter_op_parallelism_threads=4, use_per_session_threads=True), 0,
              "per_session"),
             (config(inter_op_parallelism_threads=1), 0, "global")]),
        (4, [(config(inter_op_parallelism_threads=3, use_per_session_threads=True), -1,
              "caller"),
             (config(inter_op_parallelism_threads=5), 0, "global"),
             (config(use_per_session_threads=True), 0, "per_session")]),
        (4, [(config(inter_op_parallelism_threads=6,
                     session_inter_op_thread_pool=[pool(), pool(1, "io")]), 0, "pool"),
             (config(inter_op_parallelism_threads=6,
                     session_inter_op_thread_pool=[pool(), pool(1, "io")]), 1, "pool"),
             (config(session_inter_op_thread_pool=[pool(3, "io")]), 0, "named"),
             (config(inter_op_parallelism_threads=2), 0, "global")]),
    ]


POOL_OPS = 8  # independent ops of every run, each on its own CPU device


def simulated_threads(cores: int, sessions) -> list[int]:
    """The most ops each session's run runs at once in simdist, the sessions created in a
    fresh process (its global pools empty) on a machine of ``cores`` cores."""
    from simdist.graph._sim import runtime

    graph = sim.Graph()
    with graph.as_default():
        m = np.ones((32, 32), np.float32)
        outs = []
        for i in range(POOL_OPS):
            with sim.device(f"/cpu:{i}"):
                outs.append(sim.matmul(sim.constant(m), sim.constant(m), name=f"op{i}"))
    saved = dict(runtime._PROCESS_POOLS)
    runtime._PROCESS_POOLS.clear()
    try:
        most = []
        for config, run_pool, _ in sessions:
            config = sim.ConfigProto(**{**config.__dict__, "device_count": {"CPU": POOL_OPS}})
            with sim.Session(graph=graph, config=config, machine=sim.Machine(cores=cores)) as s:
                s.run(outs, options=sim.RunOptions(inter_op_thread_pool=run_pool))
                spans = [x for x in s.last_trace.spans if x.name.startswith("op")]
            most.append(max(sum(1 for t in spans if t.start <= x.start < t.end)
                            for x in spans))
        return most
    finally:
        runtime._PROCESS_POOLS.clear()
        runtime._PROCESS_POOLS.update(saved)


def describe_session(config, run_pool) -> str:
    """A session's thread options, as they would be written."""
    parts = [f"inter_op_parallelism_threads={config.inter_op_parallelism_threads}"]
    if config.use_per_session_threads:
        parts.append("use_per_session_threads=True")
    if config.session_inter_op_thread_pool:
        pools = ", ".join(f"({p.num_threads}, {p.global_name!r})"
                          for p in config.session_inter_op_thread_pool)
        parts.append(f"session_inter_op_thread_pool=[{pools}]")
    return ", ".join(parts) + f"; run on pool {run_pool}"


def check_inter_op_threads(module):
    for k, (cores, sessions) in enumerate(_pool_scenarios(), 1):
        answer = module.inter_op_threads([(c, p) for c, p, _ in sessions], cores)
        if not isinstance(answer, (list, tuple)) or len(answer) != len(sessions) or not all(
                isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in answer):
            raise CheckFailed(tr(f"inter_op_threads returned {answer!r:.80}; expected a list of "
                                 f"{len(sessions)} ints, one per session",
                                 f"inter_op_threads 返回了 {answer!r:.80}；应为 {len(sessions)} "
                                 "个整数组成的列表，每个会话一个"),
                              tr("one number per session, in the order they were created",
                                 "每个会话一个数，按创建顺序"))
        truth = simulated_threads(cores, sessions)
        for i, ((config, run_pool, why), mine, real) in enumerate(zip(sessions, answer, truth)):
            if int(mine) != real:
                case = describe_session(config, run_pool)
                raise CheckFailed(
                    tr(f"process {k} ({cores} cores), session {i} ({case}): you predicted "
                       f"{int(mine)} ops at once, simdist runs {real}",
                       f"进程 {k}（{cores} 个核），会话 {i}（{case}）：你预测同时运行 "
                       f"{int(mine)} 个 op，simdist 运行了 {real} 个"), *POOL_HINTS[why])
    return tr(f"the threads of every run in {len(_pool_scenarios())} processes, as simdist "
              "(and TF's DirectSession) give them",
              f"{len(_pool_scenarios())} 个进程里每次 run 的线程数都与 simdist（和 TF 的 "
              "DirectSession）一致")


CHECKS = [
    Check("split_variables", "split_devices",
          tr("split_devices: variables on the CPU", "split_devices：变量放在 CPU 上"),
          check_variables_half),
    Check("split_compute", "split_devices",
          tr("split_devices: the other ops on the GPU", "split_devices：其他 op 放在 GPU 上"),
          check_compute_half),
    Check("predict", "predict_placement",
          tr("predict_placement: the placer's choices", "predict_placement：放置器的选择"),
          check_prediction),
    Check("ordering", "ordered_sum",
          tr("ordered_sum: big waits for p and q", "ordered_sum：big 等待 p 和 q"),
          check_ordering),
    Check("gpu_plan", "gpu_plan",
          tr("gpu_plan: two trainers and an evaluator share two GPUs, each capped",
             "gpu_plan：两个训练进程和一个评估进程共用两块 GPU，各有上限"), check_gpu_plan),
    Check("inter_op_threads", "inter_op_threads",
          tr("inter_op_threads: shared, per-session and named inter-op pools",
             "inter_op_threads：共享的、每会话的和具名的 inter-op 线程池"),
          check_inter_op_threads),
]
