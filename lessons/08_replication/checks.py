"""Lesson 08, In-graph and between-graph replication: the checks of ``simdist check 08``.

They hold the learner's answers to the simulator: ``in_graph_training`` (one client, a
tower per worker) and ``train_on_ps`` (a client per worker) in both update modes, for the
clients and where the gradients are averaged; ``model_parallel`` (one network split over
two GPUs) for when a split pays; the master's RegisterGraph and RunGraph requests of an
in-graph run, in one process here and over MPI ranks in ``in_graph_mpi.py``. ``towers.py``
runs the in-graph program on real TF too.
"""

import functools
from contextlib import contextmanager

import simdist.graph as sim
from simdist.graph._sim.clients import current_client
from simdist.hardware.cluster import ClusterSpec, task_to_rank
from simdist.training.ps_training import train_on_ps
from simdist.training.replication import in_graph_training, model_parallel
from course.answers import as_tuple, is_int
from course.lessons import Check, CheckFailed, tr

DIFFICULTY = {"clients_and_threads": 1, "averaging_device": 2, "split_pays": 2,
              "master_requests": 2}

COMBINATIONS = (("in-graph", "sync"), ("in-graph", "async"), ("between-graph", "sync"),
                ("between-graph", "async"))


@contextmanager
def session_run_threads():
    """The Python threads (simulated client threads) that call ``Session.run`` meanwhile: a
    set of their names, filled as they run (a training loop is named after its task, a
    queue runner's threads ``"sync_token_q/QueueRunner 0"`` and ``".../close_on_stop"``)."""
    names, run = set(), sim.Session.run

    def recorded(self, *args, **kwargs):
        client = current_client()
        names.add(client.name if client is not None else "main")
        return run(self, *args, **kwargs)

    sim.Session.run = recorded
    try:
        yield names
    finally:
        sim.Session.run = run


@functools.lru_cache(maxsize=None)
def simulated(replication, mode, workers):
    """One short simulated run of a combination: (client programs, names of the threads
    calling Session.run, devices where several replicas' gradients were averaged)."""
    if replication == "in-graph":  # one client program; its threads are the run's callers
        run = in_graph_training(workers=workers, mode=mode, steps=2)
        return 1, tuple(run.threads), frozenset(run.averaging.values())
    with session_run_threads() as threads:  # each worker's loop, and the chief's queue runner
        run = train_on_ps(workers=workers, mode=mode, steps=2, stop_grace_period_secs=0.001)
    takes = {"/job:{}/task:{}".format(*s.pid.split(":")) for s in run.trace.spans
             if s.args.get("type") == "ResourceAccumulatorTakeGradient"}
    return len(run.worker_runs), tuple(sorted(threads)), frozenset(takes)


# -- exercise 1 ------------------------------------------------------------------------------

def _threads_hint(replication, mode, names) -> str:
    """The idea behind a wrong number of threads of a combination with the right clients."""
    if replication == "between-graph" and mode == "sync":
        return tr("besides each worker's training loop, the sync chief starts the "
                  "SyncReplicasOptimizer's queue runner (make_session_run_hook(is_chief=True)): "
                  "one thread runs sync_token_q's EnqueueMany (the sync op) and one, "
                  "close_on_stop, cancels the queue when training stops; both call the session",
                  "除了每个工作器的训练循环，同步模式的主工作器还会启动 SyncReplicasOptimizer 的"
                  "队列运行器（make_session_run_hook(is_chief=True)）：一个线程运行 sync_token_q 的 "
                  "EnqueueMany（也就是同步操作），另一个 close_on_stop 线程在训练停止时取消这个队列；"
                  "两个线程都调用会话")
    if replication == "between-graph":
        return tr("asynchronous between-graph: no queue runner, so each client is a plain "
                  "one-thread training loop", "异步的图间复制：没有队列运行器，每个客户端就是普通的"
                  "单线程训练循环")
    if mode == "async":
        return tr("asynchronous in-graph: each tower's train op runs in a thread of its own, so "
                  "that no tower waits for another",
                  "异步的图内复制：每个塔的训练操作在各自的线程里运行，谁也不等谁")
    return tr("synchronous in-graph: one Session.run runs every tower at once; one thread is "
              "enough", "同步的图内复制：一次 Session.run 就运行了所有的塔，一个线程就够了")


def check_clients(module):
    for workers in (2, 4):
        for replication, mode in COMBINATIONS:
            answer = module.clients_and_threads(replication, mode, workers)
            clients, names, _ = simulated(replication, mode, workers)
            mine = as_tuple(answer, 2, is_int)
            if mine == (clients, len(names)):
                continue
            call = f"clients_and_threads({replication!r}, {mode!r}, {workers})"
            said = tr(f"{call} returned {answer!r}", f"{call} 返回了 {answer!r}")
            if mine is None:
                raise CheckFailed(tr(f"{said}, expected a pair of ints (client programs, "
                                     "threads)", f"{said.zh}，应为一对整数（客户端程序数，线程数）"),
                                  tr("return a tuple of two ints", "返回两个整数组成的元组"))
            if mine[0] != clients:
                hint = (tr("in-graph replication: ONE client builds ONE graph with a tower per "
                           "worker", "图内复制：只有一个客户端，它构建一张图，每个工作器一个塔")
                        if replication == "in-graph" else
                        tr("between-graph replication: every worker task runs its own client "
                           "program, which builds its own graph",
                           "图间复制：每个工作器任务都运行自己的客户端程序，构建自己的图"))
            else:
                hint = _threads_hint(replication, mode, names)
            raise CheckFailed(tr(f"{said}; the simulator has {clients} client program(s) and "
                                 f"{len(names)} thread(s) calling Session.run "
                                 f"({', '.join(names)})",
                                 f"{said.zh}；模拟器中有 {clients} 个客户端程序和 {len(names)} 个"
                                 f"调用 Session.run 的线程（{', '.join(names)}）"),
                              hint,
                              tr("look at in_graph_training(...).threads, at "
                                 "train_on_ps(...).worker_runs (one entry per client) and at the "
                                 "QueueRunner that SyncReplicasOptimizer's chief hook starts",
                                 "看 in_graph_training(...).threads、train_on_ps(...).worker_runs"
                                 "（每个客户端一项），以及 SyncReplicasOptimizer 的主工作器钩子启动的 "
                                 "QueueRunner"))
    return tr("right for the four combinations with 2 and 4 workers",
              "2 个和 4 个工作器的四种组合都正确")


# -- exercise 2 ------------------------------------------------------------------------------

def check_averaging(module):
    for replication, mode in COMBINATIONS:
        mine = module.averaging_device(replication, mode)
        found = simulated(replication, mode, 2)[2]
        where = next(iter(found)) if found else None
        if mine == where:
            continue
        call = f"averaging_device({replication!r}, {mode!r})"
        said = tr(f"{call} returned {mine!r}", f"{call} 返回了 {mine!r}")
        if where is None:
            hint = tr("asynchronous updates: each gradient is applied alone, as it comes; "
                      "nothing averages them", "异步更新：每个梯度到了就单独应用，没有谁去求平均")
        elif mine is None:
            hint = tr("synchronous updates: the replicas' gradients of a step are averaged "
                      "once, then applied", "同步更新：一步中各副本的梯度先求一次平均，再应用")
        elif replication == "between-graph":
            hint = tr("the chief's queue runner asks for the average, but the "
                      "ConditionalAccumulator that sums and divides lives beside its variable",
                      "主工作器的队列运行器只是发出请求，真正求和、求平均的 "
                      "ConditionalAccumulator 和它的变量在一起")
        else:
            hint = tr("the average is an op of the one graph: it runs where its tf.device scope "
                      "puts it, not where the client is",
                      "求平均是这张图里的一个操作：它在 tf.device 作用域指定的设备上运行，"
                      "而不是客户端所在的地方")
        raise CheckFailed(tr(f"{said}; in the simulated run it is "
                             f"{'nowhere (None)' if where is None else where}",
                             f"{said.zh}；在模拟运行中它"
                             f"{'不在任何地方（None）' if where is None else '在 ' + where}"), hint,
                          tr("in-graph: in_graph_training(mode=...).averaging; between-graph: "
                             "the ResourceAccumulatorTakeGradient spans of train_on_ps's trace",
                             "图内复制：in_graph_training(mode=...).averaging；图间复制："
                             "train_on_ps 轨迹中的 ResourceAccumulatorTakeGradient"))
    return tr("right for the four combinations", "四种组合都正确")


# -- exercise 3 ------------------------------------------------------------------------------

#: (architecture, width, layers, batch), in the order that meets each wrong rule's case first
SPLITS = (("dense", 256, 8, 64), ("branches", 512, 8, 64), ("branches", 64, 2, 2048),
          ("branches", 1024, 2, 128), ("branches", 512, 4, 32), ("dense", 512, 4, 32))


@functools.lru_cache(maxsize=None)
def split_case(architecture, width, layers, batch):
    """model_parallel's answer: (one layer's compute in us (MatMul + Relu), one activation's
    transfer between the GPUs in us, whether the split beats one GPU, the speedup)."""
    run = model_parallel(architecture, width=width, layers=layers, batch=batch)
    first = {s.name: s.dur for s in run.trace.spans if s.cat == "compute"}
    layer_us = (first["MatMul"] + first["Relu"]) / 1000
    transfer_us = max(s.dur for s in run.trace.spans if s.cat == "recv") / 1000
    return layer_us, transfer_us, run.speedup > 1, run.speedup


def check_split(module):
    for architecture, width, layers, batch in SPLITS:
        layer_us, transfer_us, pays, speedup = split_case(architecture, width, layers, batch)
        mine = module.split_pays(architecture, layers, layer_us, transfer_us)
        call = f"split_pays({architecture!r}, {layers}, {layer_us}, {transfer_us})"
        said = tr(f"{call} returned {mine!r}", f"{call} 返回了 {mine!r}")
        if not isinstance(mine, bool):
            raise CheckFailed(tr(f"{said}, expected True or False",
                                 f"{said.zh}，应为 True 或 False"),
                              tr("return a bool: does the split beat one GPU?",
                                 "返回一个布尔值：拆分后是否比单个 GPU 快？"))
        if mine == pays:
            continue
        if architecture == "dense":
            hint = tr("a dense stack is a chain: layer i + 1 needs layer i's output, so GPU 1 "
                      "idles until GPU 0 is done, and the activation crosses on top",
                      "全连接堆叠是一条链：第 i + 1 层要用第 i 层的输出，所以 GPU 1 要一直等到 "
                      "GPU 0 算完，还得再加上激活值的传输")
        elif pays:
            hint = tr("the two branches run at the same time: the split saves half of the "
                      "layers' time, and here that is more than the transfers cost",
                      "两个分支同时运行：拆分省下了一半层的时间，这里省下的比传输花掉的多")
        elif transfer_us < layers * layer_us / 2:
            hint = tr("count both crossings on GPU 1's path: its input comes over first, and "
                      "its branch's output goes back to GPU 0 for the sum",
                      "把 GPU 1 路径上的两次传输都算上：先把输入传过去，分支算完后还要把输出"
                      "传回 GPU 0 求和")
        else:
            hint = tr("the split saves half of the layers' time but pays for the transfers: "
                      "here they cost more than they save",
                      "拆分省下一半层的时间，却要付出传输的代价：这里传输比省下的还多")
        raise CheckFailed(tr(f"{said}; the simulator's split runs {speedup:.2f}x as fast as "
                             f"one GPU ({architecture}, width {width}, batch {batch})",
                             f"{said.zh}；模拟器中拆分后的速度是单个 GPU 的 {speedup:.2f} 倍"
                             f"（{architecture}，宽度 {width}，批次 {batch}）"), hint,
                          tr("one GPU: layers * layer_us; split dense stack: layers * layer_us "
                             "+ 2 * transfer_us; split branches: 2 * transfer_us + layers / 2 "
                             "* layer_us", "单个 GPU：layers * layer_us；拆分的全连接堆叠："
                             "layers * layer_us + 2 * transfer_us；拆分的两个分支："
                             "2 * transfer_us + layers / 2 * layer_us"))
    return tr(f"right for {len(SPLITS)} models", f"{len(SPLITS)} 个模型都正确")


# -- exercise 4 ------------------------------------------------------------------------------

#: (workers, mode, steps) of in_graph_training: each has 4 tasks or more, so that
#: ``mpiexec -n 4`` can spread every one of them
REQUEST_CASES = ((3, "sync", 4), (4, "sync", 2), (4, "async", 3))
MASTER = "worker:0"


def request_answers(module) -> dict:
    """The learner's ``master_requests`` for every case, each a pair of ints, else
    CheckFailed (on every MPI rank alike, before anything is simulated)."""
    answers = {}
    for case in REQUEST_CASES:
        answer = module.master_requests(*case)
        mine = as_tuple(answer, 2, is_int)
        if mine is None:
            raise CheckFailed(tr(f"master_requests{case} returned {answer!r}, expected a pair "
                                 "of ints (register_graph, run_graph)",
                                 f"master_requests{case} 返回了 {answer!r}，应为一对整数 "
                                 "(register_graph, run_graph)"),
                              tr("return a tuple of two ints: the RegisterGraph requests, then "
                                 "the RunGraph requests",
                                 "返回两个整数组成的元组：先是 RegisterGraph 请求数，再是 "
                                 "RunGraph 请求数"))
        answers[case] = mine
    return answers


def run_requests_case(case, transport=None):
    """``in_graph_training`` of one case (over ``transport``'s ranks if given): the run on
    rank 0, None on the others."""
    workers, mode, steps = case
    return in_graph_training(workers=workers, mode=mode, steps=steps, transport=transport)


def counted_requests(run) -> tuple[int, int]:
    """(RegisterGraph, RunGraph) requests the master sent over the network: the flows
    "RegisterGraph (...)" and "RunGraph (...)" of the run's trace from worker:0 (their
    responses are flows "... response (...)" back to it)."""
    flows = [f for f in run.trace.flows if f.src_pid == MASTER]
    return (sum(f.name.startswith("RegisterGraph (") for f in flows),
            sum(f.name.startswith("RunGraph (") for f in flows))


@functools.lru_cache(maxsize=None)
def simulated_requests(case) -> tuple[int, int]:
    """``counted_requests`` of one case, simulated in this process."""
    return counted_requests(run_requests_case(case))


def between_ranks(run, workers: int, ranks: int) -> int:
    """How many of the master's requests went to a task on another MPI rank (real MPI
    messages there)."""
    tasks = [t.name for t in ClusterSpec({"ps": 1, "worker": workers}).tasks()]
    rank = dict(zip(tasks, task_to_rank(len(tasks), ranks)))
    return sum(1 for f in run.trace.flows if f.src_pid == MASTER and " response" not in f.name
               and f.name.startswith(("RegisterGraph (", "RunGraph (")) and
               rank[f.dst_pid] != rank[MASTER])


def _requests_hint(case, mine, real) -> str:
    """The idea behind the likeliest wrong (register_graph, run_graph)."""
    workers, mode, steps = case
    (register, run), (real_register, real_run) = mine, real
    plans = 1 if mode == "sync" else workers
    if (register, run) == (2 * real_register, 2 * real_run):
        return tr("count the master's requests only: each one is answered by a response from "
                  "the worker, which is not a request",
                  "只数 master 发出的请求：每个请求都有工作器发回的一个响应，响应不算请求")
    if register == real_run or register == run:
        return tr("RegisterGraph goes once per plan, on its first run; the plan's later runs "
                  "only send RunGraph",
                  "RegisterGraph 每个计划只发一次，在它第一次运行时；之后的运行只发 RunGraph")
    if (register, run) == (real_register + plans, real_run + plans * steps):
        return tr("the master's own task, worker:0, gets its partitions without a message: "
                  "only the other tasks' requests cross the network",
                  "master 所在的任务 worker:0 拿到自己的分区不需要消息：只有发给其他任务的请求才走网络")
    if mode == "async" and (register, run) == (workers, workers * steps):
        return tr("asynchronous: each tower's train op is a plan of its own, and its parts sit "
                  "on ps:0 and on its tower's worker; each thread runs its own plan",
                  "异步：每个塔的训练操作是一个独立的计划，它的分区在 ps:0 和该塔的工作器上；"
                  "每个线程运行自己的计划")
    if mode == "sync" and (register, run) == (workers - 1, (workers - 1) * steps):
        return tr("the ps holds w and the average: it has a partition of the plan too",
                  "参数服务器上有 w 和求平均的操作：计划也有它的一个分区")
    return tr("per plan, count the tasks other than worker:0 that hold one of its partitions: "
              "one RegisterGraph each on the plan's first run, one RunGraph each on every run",
              "对每个计划，数一数除 worker:0 之外、持有它某个分区的任务：计划第一次运行时每个任务"
              "一个 RegisterGraph，之后每次运行每个任务一个 RunGraph")


def verify_requests(answers: dict, measured: dict) -> str:
    """Every case's answer against the requests counted in its run, else CheckFailed."""
    for case in REQUEST_CASES:
        mine, real = answers[case], measured[case]
        if mine == real:
            continue
        raise CheckFailed(
            tr(f"master_requests{case} returned {mine!r}; the master sent {real[0]} "
               f"RegisterGraph and {real[1]} RunGraph requests",
               f"master_requests{case} 返回了 {mine!r}；master 发送了 {real[0]} 个 RegisterGraph "
               f"请求和 {real[1]} 个 RunGraph 请求"), _requests_hint(case, mine, real),
            tr("look at the flows of in_graph_training(...).trace from worker:0 named "
               "'RegisterGraph (...)' and 'RunGraph (...)': each names its plan's graph or "
               "the step, and goes to the task that holds a partition",
               "看 in_graph_training(...).trace 里从 worker:0 发出、名为 'RegisterGraph (...)' "
               "和 'RunGraph (...)' 的流：每条都写明它的计划图或步，发往持有分区的任务"))
    return tr("right for " + ", ".join(f"{w} workers {m}" for w, m, _ in REQUEST_CASES),
              "、".join(f"{w} 个工作器 {m}" for w, m, _ in REQUEST_CASES) + " 都正确")



def check_requests(module):
    answers = request_answers(module)
    return verify_requests(answers, {case: simulated_requests(case) for case in REQUEST_CASES})


CHECKS = [
    Check("clients", "clients_and_threads",
          tr("client programs and threads of each combination",
             "每种组合的客户端程序数和线程数"), check_clients),
    Check("averaging", "averaging_device",
          tr("where the gradients are averaged", "梯度在哪里求平均"), check_averaging),
    Check("split", "split_pays",
          tr("when model parallelism pays", "模型并行什么时候划算"), check_split),
    Check("requests", "master_requests",
          tr("the master's RegisterGraph and RunGraph requests",
             "master 发出的 RegisterGraph 和 RunGraph 请求"), check_requests),
]
