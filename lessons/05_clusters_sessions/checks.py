# long file: five exercises' checks, each with its story, its real-TF twin and its hints
"""Lesson 05, Clusters, servers, sessions and containers: the checks of ``simdist check 05``.

They run the learner's code against simulated servers (``simdist.graph``): a story of counter
clients on a {ps: 1, worker: 2} cluster whose values the learner predicts,
replica_device_setter's choices, TF_CONFIG launching and an experiment that must start fresh
and clean up after itself. tests/course/test_lessons_04_05_placement_sessions.py runs the counter story and the ps
assignment on real TensorFlow too and finds the same numbers.
"""

import json

import numpy as np

import simdist.graph as sim
from simdist.hardware.cluster import ClusterSpec
from simdist.graph._sim.runtime import DEFAULT_CONTAINER
from course.answers import as_list
from course.lessons import Check, CheckFailed, tr


DIFFICULTY = {"predict_counters": 2, "predict_ps_tasks": 1, "server_from_tf_config": 1,
              "fresh_experiment": 2, "predict_partitions": 2}

CLUSTER = {"ps": 1, "worker": 2}


def _servers(cluster=CLUSTER):
    sim.stop_all_servers()
    spec = ClusterSpec(cluster)
    return {t.name: sim.Server(spec, t.task_type, t.task_id) for t in spec.tasks()}


# -- exercise 1 ------------------------------------------------------------------------------

#: the clients of exercise 1, one after the other: (name, session target, the counter's
#: device, its container, whether the client initializes it, how many increments)
STORY = (
    ("A", "worker:0", "/job:ps/task:0", "", True, 2),
    ("B", "worker:1", "/job:ps/task:0", "", False, 3),
    ("C", "local", None, "", True, 2),
    ("D", "worker:0", "/job:ps/task:0", "trial", True, 1),
    ("E", "worker:1", "/job:worker/task:1", "", True, 2),
    ("F", "worker:0", "/job:ps/task:0", "", False, 1),
    ("G", "worker:1", "/job:ps/task:0", "", True, 1),
    ("H", "worker:0", "/job:ps/task:0", "trial", False, 2),
)


def counter_story(tf, targets, story):
    """Run the clients of ``story`` one after the other; {client: the values it saw}.
    ``targets``: {"worker:0": target, "worker:1": target, "local": ""}. The same source runs
    with simdist.graph and with real TF (``real_counter_story``)."""
    seen = {}
    for name, where, device, container, initialize, increments in story:
        graph = tf.Graph()
        with graph.as_default():
            with tf.container(container), tf.device(device):
                counter = tf.Variable(0, name="counter")
                increment = tf.assign_add(counter, 1)
        with tf.Session(targets[where], graph=graph) as sess:
            if initialize:
                sess.run(counter.initializer)
            seen[name] = [int(sess.run(increment)) for _ in range(increments)]
    return seen


def sim_counter_story(story=STORY) -> dict:
    servers = _servers()
    try:
        return counter_story(sim, {"worker:0": servers["worker:0"].target,
                                   "worker:1": servers["worker:1"].target, "local": ""}, story)
    finally:
        sim.stop_all_servers()


def real_counter_story(story=STORY, timeout: float = 120) -> dict:
    """The same story on real TF: a {ps: 1, worker: 2} cluster of real servers on free
    loopback ports, in a private network, and the clients in the same process."""
    from realdist.runtime.localcluster import PrivateNetwork
    from realdist.graph.tf1 import free_port, program_source, run_python

    cluster = {"ps": [f"127.0.0.1:{free_port()}"],
               "worker": [f"127.0.0.1:{free_port()}" for _ in range(2)]}
    code = program_source(counter_story) + f"""
cluster = tf1.train.ClusterSpec({cluster!r})
config = tf1.ConfigProto(inter_op_parallelism_threads=4)
servers = {{f"{{job}}:{{i}}": tf1.train.Server(cluster, job, i, config=config)
           for job in cluster.jobs for i in range(cluster.num_tasks(job))}}
targets = {{"worker:0": servers["worker:0"].target, "worker:1": servers["worker:1"].target,
           "local": ""}}
emit("seen", counter_story(tf1, targets, {list(story)!r}))
"""
    with PrivateNetwork() as net:
        return run_python(code, timeout, net)[0]["seen"]


def _story_hint(name: str) -> tuple:
    _, where, device, container, initialize, _ = next(c for c in STORY if c[0] == name)
    if where == "local":
        return (tr("a local session has containers of its own",
                   "本地会话有它自己的容器"),
                tr("tf.Session() with no target runs in this process: its counter is a new "
                   "variable, whatever the cluster holds",
                   "不带 target 的 tf.Session() 在本进程内运行：它的 counter 是一个新变量，"
                   "与集群里保存的无关"))
    if container:
        return (tr("a container is a separate namespace on the task",
                   "容器是任务上一个独立的命名空间"),
                tr(f"\"counter\" in container \"{container}\" is a different variable from "
                   "\"counter\" in the default container, even on the same ps",
                   f"容器 \"{container}\" 中的 \"counter\" 与默认容器中的 \"counter\" 是两个不同"
                   "的变量，即使在同一个 ps 上"))
    if device.startswith("/job:worker"):
        return (tr("a variable lives on the task its device names",
                   "变量存放在它的设备所指的任务上"),
                tr("the same name on another task is another variable",
                   "同名变量放在另一个任务上就是另一个变量"))
    if initialize:
        return (tr("running the initializer again resets the shared variable for everybody",
                   "再次运行初始化器会把共享变量重置，对所有人都是如此"), "")
    return (tr("a client that does not initialize goes on from where the last client of the "
               "same variable left it",
               "不做初始化的客户端从同一变量的上一个客户端停下的地方接着计数"),
            tr("the cluster's servers keep the variable between sessions; which client last "
               "touched this one (same task, same container, same name)?",
               "集群的服务器在会话之间保存变量；最后一个动过这个变量（同一任务、同一容器、同一名字）"
               "的是哪个客户端？"))


def check_counters(module):
    predicted = module.predict_counters()
    actual = sim_counter_story()
    if not isinstance(predicted, dict) or set(predicted) != set(actual):
        raise CheckFailed(tr(f"predict_counters returned {predicted!r:.100}; expected a dict "
                             f"with the clients {sorted(actual)}",
                             f"predict_counters 返回了 {predicted!r:.100}；应为以客户端 "
                             f"{sorted(actual)} 为键的 dict"),
                          tr("one list of values per client", "每个客户端一个值列表"))
    for name, values in actual.items():
        if list(predicted[name]) != values:
            raise CheckFailed(tr(f"client {name}: you predicted {list(predicted[name])}, the "
                                 f"simulated cluster gives {values}",
                                 f"客户端 {name}：你预测 {list(predicted[name])}，模拟的集群给出 "
                                 f"{values}"), *_story_hint(name))
    return tr("every client's values, as the simulator (and real TF, in the tests) gives them",
              "每个客户端的值都与模拟器（以及测试中的真实 TF）给出的一致")


# -- exercise 2 ------------------------------------------------------------------------------

PS_CASES = [((40, 4, 4, 400, 8), 2, "round_robin"), ((4,) * 7, 3, "round_robin"),
            ((4000, 40, 40, 2000, 8, 8), 2, "greedy"), ((100, 100, 100, 100, 300), 3, "greedy")]


def actual_ps_tasks(sizes, num_ps, strategy):
    """What simdist's replica_device_setter does with float32 variables of those sizes."""
    chosen = (sim.GreedyLoadBalancingStrategy(num_ps, sim.byte_size_load_fn)
              if strategy == "greedy" else None)
    graph = sim.Graph()
    with graph.as_default(), sim.device(sim.train.replica_device_setter(
            ps_tasks=num_ps, ps_strategy=chosen)):
        variables = [sim.get_variable(f"v{i}", shape=(size // 4,)) for i, size in
                     enumerate(sizes)]
    return [int(v.device.rsplit(":", 1)[1]) for v in variables]


def check_ps_tasks(module):
    for sizes, num_ps, strategy in PS_CASES:
        answer = module.predict_ps_tasks(list(sizes), num_ps, strategy)
        predicted = as_list(answer, len(sizes))
        if predicted is None:
            raise CheckFailed(tr(f"predict_ps_tasks({list(sizes)}, {num_ps}, {strategy!r}) "
                                 f"returned {answer!r:.100}, expected a list of {len(sizes)} "
                                 "ps task indices",
                                 f"predict_ps_tasks({list(sizes)}, {num_ps}, {strategy!r}) 返回了 "
                                 f"{answer!r:.100}，应为 {len(sizes)} 个参数服务器任务编号组成的"
                                 "列表"),
                              tr("return one ps index per variable, e.g. [0, 1, 0]",
                                 "每个变量返回一个参数服务器编号，例如 [0, 1, 0]"))
        actual = actual_ps_tasks(sizes, num_ps, strategy)
        if predicted != actual:
            raise CheckFailed(tr(f"{strategy} over {num_ps} ps, sizes {list(sizes)} bytes: you "
                                 f"predicted {list(predicted)}, replica_device_setter chose "
                                 f"{actual}",
                                 f"{num_ps} 个 ps 上的 {strategy}，大小 {list(sizes)} 字节：你预测 "
                                 f"{list(predicted)}，replica_device_setter 选择了 {actual}"),
                              tr("round-robin ignores sizes; greedy looks at the bytes each ps holds",
                                 "轮询不看大小；贪心看每个 ps 已经存放的字节数"),
                              tr("round-robin cycles 0, 1, ..., n-1; greedy picks the ps with the fewest "
                                 "bytes so far (the lowest index on a tie)",
                                 "轮询按 0, 1, ..., n-1 循环；贪心选择目前字节数最少的 ps（相同时选编号最小的）"))
    return tr(f"{len(PS_CASES)} variable layouts predicted right",
              f"{len(PS_CASES)} 种变量布局都预测正确")


# -- exercise 3 ------------------------------------------------------------------------------


def check_tf_config(module):
    cluster = {"ps": ["localhost:3000"], "worker": ["localhost:3001", "localhost:3002"]}
    tfjob = {"master": ["localhost:3010"], "worker": ["localhost:3011"]}
    sim.stop_all_servers()
    try:
        for spec, job, index in ((cluster, "worker", 1), (cluster, "ps", 0),
                                 (tfjob, "master", 0), (cluster, "worker", "0")):
            text = json.dumps({"cluster": spec, "task": {"type": job, "index": index}})
            server = module.server_from_tf_config(sim, text)
            if not isinstance(server, sim.Server):
                raise CheckFailed(tr(f"server_from_tf_config returned {server!r}, expected a "
                                     "tf.train.Server",
                                     f"server_from_tf_config 返回了 {server!r}，应为 "
                                     "tf.train.Server"),
                                  tr("return the server you started", "返回你启动的服务器"))
            expected = "grpc://" + spec[job][int(index)]
            if (server.job_name, server.task_index, server.target) != (job, int(index),
                                                                        expected):
                raise CheckFailed(tr(f"for task {job}:{index!r} you started the server of "
                                     f"{server.job_name}:{server.task_index!r} at "
                                     f"{server.target}",
                                     f"对任务 {job}:{index!r}，你启动的是 "
                                     f"{server.job_name}:{server.task_index!r} 的服务器，位于 "
                                     f"{server.target}"),
                                  tr("the \"task\" names the job and the index",
                                     "\"task\" 给出作业名和索引"),
                                  tr("TF's TFConfigClusterResolver reads the index with int(): "
                                     "\"0\" is task 0",
                                     "TF 的 TFConfigClusterResolver 用 int() 读取索引：\"0\" 就是任务 0"))
            if server.cluster != ClusterSpec(spec):
                raise CheckFailed(tr(f"the server's cluster is {server.cluster}, expected "
                                     f"{spec}", f"服务器的集群是 {server.cluster}，应为 {spec}"),
                                  tr("pass the whole \"cluster\" to tf.train.ClusterSpec",
                                     "把整个 \"cluster\" 传给 tf.train.ClusterSpec"))
            sim.stop_all_servers()
    finally:
        sim.stop_all_servers()
    return tr("the right server starts for worker:1, ps:0, a TFJob master:0 and an index "
              "written \"0\"",
              "worker:1、ps:0、TFJob 的 master:0 以及写成 \"0\" 的索引都启动了正确的服务器")


def verify_tf_config_job(results: dict, jobs: dict, adds: int) -> str:
    """Exercise 3 under mpiexec (``tf_config_mpi.py``): every task of ``jobs`` started the
    server its TF_CONFIG names, and the workers' ``adds`` adds each all reached the ps."""
    targets = set()
    for job, count in jobs.items():
        for index in range(count):
            task = f"{job}:{index}"
            server = results.get(task, {}).get("server")
            if server is None or (server["job"], server["index"]) != (job, index):
                started = "none" if server is None else f"{server['job']}:{server['index']!r}"
                raise CheckFailed(tr(f"task {task} started the server of {started}",
                                     f"任务 {task} 启动的是 {started} 的服务器"),
                                  tr("the \"task\" of TF_CONFIG names the job and the index",
                                     "TF_CONFIG 的 \"task\" 给出作业名和索引"))
            targets.add(server["target"])
    if len(targets) != sum(jobs.values()):
        raise CheckFailed(tr(f"the tasks' servers share targets: {sorted(targets)}",
                             f"各任务的服务器共用了目标地址：{sorted(targets)}"),
                          tr("each task's server listens at its own address in the cluster",
                             "每个任务的服务器在集群里有自己的地址"))
    total = max(r.get("last", 0) for r in results.values())
    if total != jobs["worker"] * adds:
        raise CheckFailed(tr(f"the counter ended at {total}, expected {jobs['worker'] * adds}",
                             f"计数器最终是 {total}，应为 {jobs['worker'] * adds}"),
                          tr("every worker's session must reach the ps through its server",
                             "每个工作器的会话都要通过它的服务器访问参数服务器"))
    return tr(f"{sum(jobs.values())} servers, each its task's; the counter reached "
              f"{jobs['worker']} x {adds} = {total}",
              f"{sum(jobs.values())} 个服务器，各属其任务；计数器达到 "
              f"{jobs['worker']} x {adds} = {total}")


# -- exercise 4 ------------------------------------------------------------------------------

STEPS = 3


def experiment(tf):
    """An experiment's graph: a step counter from 0, a train op adding 1; returns (init,
    train, value)."""
    with tf.device("/job:ps/task:0"):
        steps = tf.Variable(0, name="steps")
        train = tf.assign_add(steps, 1)
    return steps.initializer, train, steps


def _kept(runtime_servers) -> dict:
    """What every task still holds: {task: {container: [names]}}."""
    return {name: {c: sorted(v) for c, v in server.runtime.resources.containers.items() if v}
            for name, server in runtime_servers.items()}


def check_fresh(module):
    servers = _servers()
    target = servers["worker:0"].target
    try:
        graph = sim.Graph()
        with graph.as_default(), sim.device("/job:ps/task:0"):
            keeper = sim.Variable(np.float32(7.0), name="keeper")
        keep = sim.Session(target, graph=graph)
        keep.run(keeper.initializer)
        keep.close()
        results = []
        for _ in range(2):
            results.append(module.fresh_experiment(sim, servers["worker:1"].target,
                                                   experiment, STEPS))
            left = {task: {c: v for c, v in held.items() if c != DEFAULT_CONTAINER}
                    for task, held in _kept(servers).items()}
            left = {task: held for task, held in left.items() if held}
            default = _kept(servers)["ps:0"].get(DEFAULT_CONTAINER, [])
            if "keeper" not in default:
                raise CheckFailed(
                    tr("after your experiment the variable \"keeper\" of the default container "
                       "is gone: you freed another experiment's variables",
                       "你的实验结束后，默认容器中的变量 \"keeper\" 不见了：你释放了另一个实验的"
                       "变量"),
                    tr("free only what your experiment created", "只释放你的实验创建的东西"),
                    tr("put the experiment in a container of its own (tf.container) and reset "
                       "that one: Session.reset(target, [name])",
                       "把实验放进它自己的容器（tf.container），并只重置那一个："
                       "Session.reset(target, [name])"))
            if [v for v in default if v != "keeper"] or left:
                raise CheckFailed(
                    tr(f"after your experiment the tasks still hold its variables: "
                       f"{left or {'ps:0': {DEFAULT_CONTAINER: default}}}",
                       f"你的实验结束后，各任务仍持有它的变量："
                       f"{left or {'ps:0': {DEFAULT_CONTAINER: default}}}"),
                    tr("an experiment must clean up after itself: its variables stay on the "
                       "servers until they are reset", "实验结束后要自己清理：它的变量会一直留在"
                       "服务器上，直到被重置"),
                    tr("create them in a container of your own and call tf.Session.reset(target, "
                       "[that container]) at the end (the default container holds other "
                       "experiments' variables)",
                       "在你自己的容器里创建它们，最后调用 tf.Session.reset(target, [该容器])"
                       "（默认容器里还有其他实验的变量）"))
        if results != [STEPS, STEPS]:
            raise CheckFailed(tr(f"two runs of {STEPS} steps returned {results}, expected "
                                 f"[{STEPS}, {STEPS}]",
                                 f"两次各 {STEPS} 步的运行返回了 {results}，应为 "
                                 f"[{STEPS}, {STEPS}]"),
                              tr("each run starts from fresh variables and returns the value "
                                 "after its last step",
                                 "每次运行都从全新的变量开始，并返回最后一步之后的值"),
                              tr("read the value before you reset: Session.reset closes every "
                                 "session on that target, as TF does (AbortedError on its next "
                                 "run); open a new session if you need one after it",
                                 "在重置之前读取值：Session.reset 会关闭该目标上的所有会话，与 TF "
                                 "一样（下次 run 时抛出 AbortedError）；之后如需会话请新开一个"))
    finally:
        sim.stop_all_servers()
    return tr(f"two runs start fresh ({results}), free their own container, and leave the "
              "default one alone",
              f"两次运行都从头开始（{results}），释放自己的容器，不动默认容器")


# -- exercise 5 ------------------------------------------------------------------------------

#: the runs of exercise 5, one after the other: (name, the task whose target the session
#: opens, the tensor it fetches, the tensor it feeds or None)
PARTITION_RUNS = (("loss", "worker:0", "loss", "x"), ("scaled", "worker:0", "scaled", None),
                  ("from_h", "worker:0", "loss", "h"), ("scaled_via_ps", "ps:0", "scaled", None))
FIELDS = ("partitions", "pairs", "across_tasks", "feeds", "fetches")


def partition_story(tf, targets, compute, runs):
    """Build exercise 5's graph (h and y on ``compute``), run each of ``runs`` once in a
    session on its target and count what RunMetadata.partition_graphs holds: {run: {field:
    count}}. The same source runs with simdist.graph and with real TF."""
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            w = tf.Variable([[1.0, 2.0], [3.0, 4.0]], name="w")
        with tf.device("/job:ps/task:1"):
            b = tf.Variable([0.5, -0.5], name="b")
        with tf.device(compute):
            x = tf.placeholder(tf.float32, [1, 2], name="x")
            h = tf.matmul(x, w, name="h")
            y = tf.add(h, b, name="y")
        with tf.device("/job:worker/task:0/device:CPU:0"):
            loss = tf.reduce_sum(tf.square(y, name="sq"), name="loss")
            scaled = tf.multiply(w, 2.0, name="scaled")
    tensors = {"x": x, "h": h, "loss": loss, "scaled": scaled}

    def attr(node, key):  # simdist's attr holds the value, real TF's an AttrValue
        value = node.attr[key]
        if hasattr(value, "WhichOneof"):
            return value.s.decode() if value.WhichOneof("value") == "s" else value.b
        return value

    with tf.Session(targets[runs[0][1]], graph=graph) as sess:
        sess.run([w.initializer, b.initializer])
    counts = {}
    for name, where, fetch, feed in runs:
        metadata = tf.RunMetadata()
        with tf.Session(targets[where], graph=graph) as sess:
            sess.run(tensors[fetch], {tensors[feed]: [[1.0, 1.0]]} if feed else {},
                     options=tf.RunOptions(output_partition_graphs=True),
                     run_metadata=metadata)
        nodes = [n for g in metadata.partition_graphs for n in g.node]
        client = [n for n in nodes if n.op in ("_Send", "_Recv")
                  and attr(n, "client_terminated")]
        pairs = [n for n in nodes if n.op == "_Send" and not attr(n, "client_terminated")]
        counts[name] = {
            "partitions": len(metadata.partition_graphs), "pairs": len(pairs),
            "across_tasks": sum(attr(n, "send_device").split("/device:")[0] !=
                                attr(n, "recv_device").split("/device:")[0] for n in pairs),
            "feeds": sum(n.op == "_Recv" for n in client),
            "fetches": sum(n.op == "_Send" for n in client)}
    return counts


def sim_partition_story(runs=PARTITION_RUNS) -> dict:
    """The runs on a simulated {ps: 2, worker: 1} cluster, worker:0 with one GPU."""
    sim.stop_all_servers()
    spec = ClusterSpec({"ps": 2, "worker": 1})
    servers = {t.name: sim.Server(spec, t.task_type, t.task_id, machine=sim.Machine(
        gpus=1 if t.task_type == "worker" else 0)) for t in spec.tasks()}
    try:
        return partition_story(sim, {name: s.target for name, s in servers.items()},
                               "/job:worker/task:0/device:GPU:0", runs)
    finally:
        sim.stop_all_servers()


def real_partition_story(runs=PARTITION_RUNS, timeout: float = 120) -> dict:
    """The same runs on real TF, its servers on free loopback ports in a private network.
    No GPU is needed: worker:0 gets a second CPU device (device_count) for h and y, which
    cuts the graph the same way as the GPU does."""
    from realdist.runtime.localcluster import PrivateNetwork
    from realdist.graph.tf1 import program_source, run_python
    from realdist.runtime.processes import free_ports

    ports = [f"127.0.0.1:{port}" for port in free_ports(3)]
    code = program_source(partition_story) + f"""
tf1.disable_resource_variables()  # TF1's reference variables, which simdist models
cluster = tf1.train.ClusterSpec({{"ps": {ports[:2]!r}, "worker": {ports[2:]!r}}})
servers = {{f"ps:{{i}}": tf1.train.Server(cluster, "ps", i) for i in range(2)}}
servers["worker:0"] = tf1.train.Server(cluster, "worker", 0,
                                       config=tf1.ConfigProto(device_count={{"CPU": 2}}))
emit("counts", partition_story(tf1, {{n: s.target for n, s in servers.items()}},
                               "/job:worker/task:0/device:CPU:1", {list(runs)!r}))
"""
    with PrivateNetwork() as net:
        return run_python(code, timeout, net)[0]["counts"]


def _partition_hint(run: str, field: str, said: int, counts: dict) -> tuple:
    if run == "scaled_via_ps" and field in ("pairs", "across_tasks"):
        return (tr("feeds enter and fetches leave at the client device: the CPU:0 of the "
                   "master, the task whose target the session opened",
                   "feed 从客户端设备进入、fetch 从客户端设备离开：客户端设备是 master 的 CPU:0，"
                   "也就是会话所连 target 的那个任务"),
                tr("this session is on ps:0: scaled, made on worker:0, travels back to ps:0",
                   "这个会话连在 ps:0 上：在 worker:0 上算出的 scaled 要再传回 ps:0"))
    if field == "partitions":
        if said > counts[field]:
            return (tr("the master prunes the graph to what the fetches need",
                       "master 把图剪枝到 fetch 所需要的部分"),
                    tr("a device none of whose ops the fetches need gets no partition; a fed "
                       "tensor replaces the ops that compute it (feeding h cuts off x, h's "
                       "MatMul and w)", "fetch 用不到其任何操作的设备没有分区；被 feed 的张量"
                       "取代了计算它的操作（feed h 就切掉了 x、h 的 MatMul 和 w）"))
        return (tr("one partition per device that runs something, not one per task",
                   "每个运行了东西的设备一个分区，而不是每个任务一个"),
                tr("worker:0's CPU:0 and GPU:0 are two devices, so two partitions; the client "
                   "device holds the feeds' _Recv and the fetches' _Send",
                   "worker:0 的 CPU:0 和 GPU:0 是两个设备，所以是两个分区；客户端设备上有 feed 的 "
                   "_Recv 和 fetch 的 _Send"))
    if field == "pairs" and said == counts["pairs"] + counts["feeds"] + counts["fetches"]:
        return (tr("feeds and fetches are counted apart: their _Recv and _Send have no "
                   "partner in the graph", "feed 和 fetch 单独计数：它们的 _Recv 和 _Send "
                   "在图中没有配对的节点"),
                tr("they are client_terminated: the client hands the fed value to the _Recv "
                   "and takes the fetched one from the _Send",
                   "它们标着 client_terminated：客户端把 feed 的值交给 _Recv，从 _Send 取走 fetch 的值"))
    if field == "pairs":
        return (tr("one pair per tensor and device that needs it, when that device is not "
                   "the one that made it", "每个张量对每个需要它的其他设备一对"),
                tr("a fed tensor starts on the client device, so a consumer on the GPU needs "
                   "a pair; a fetched one ends there, so one made elsewhere needs a pair too",
                   "被 feed 的张量从客户端设备出发，所以 GPU 上的使用者需要一对；被 fetch 的张量"
                   "终于客户端设备，所以在别处算出的也需要一对"))
    if field == "across_tasks" and said == counts["pairs"]:
        return (tr("a pair inside one task is not a message", "同一任务内的一对不是消息"),
                tr("worker:0's CPU:0 and GPU:0 are one process: their pairs are copies over "
                   "PCIe; the network carries only the pairs between tasks",
                   "worker:0 的 CPU:0 和 GPU:0 在同一个进程里：它们之间的一对是经 PCIe 的拷贝；"
                   "网络只承载任务之间的那些对"))
    if field == "across_tasks":
        return (tr("count the pairs whose _Send and _Recv are on different tasks",
                   "数一数 _Send 和 _Recv 在不同任务上的那些对"), "")
    return (tr("one client-terminated _Recv per fed tensor, one _Send per fetched tensor",
               "每个被 feed 的张量一个 client_terminated 的 _Recv，每个被 fetch 的张量一个 _Send"),
            tr("they sit on the client device, whatever the devices of the tensors",
               "不论张量在哪个设备上，它们都在客户端设备上"))


def check_partitions(module):
    predicted = module.predict_partitions()
    actual = sim_partition_story()
    if not isinstance(predicted, dict) or set(predicted) != set(actual) or any(
            not isinstance(predicted[run], dict) or set(predicted[run]) != set(FIELDS)
            for run in actual):
        raise CheckFailed(tr(f"predict_partitions returned {predicted!r:.120}; expected a dict "
                             f"with the runs {sorted(actual)}, each {{field: count}} for the "
                             f"fields {list(FIELDS)}",
                             f"predict_partitions 返回了 {predicted!r:.120}；应为以运行 "
                             f"{sorted(actual)} 为键的 dict，每项是字段 {list(FIELDS)} 的 "
                             "{字段: 计数}"),
                          tr("one dict of five counts per run", "每次运行一个含五个计数的字典"))
    for run, counts in actual.items():
        for field in FIELDS:
            if predicted[run][field] != counts[field]:
                raise CheckFailed(tr(f"run {run}, {field}: you predicted "
                                     f"{predicted[run][field]!r}, the master made "
                                     f"{counts[field]}",
                                     f"运行 {run}，{field}：你预测 {predicted[run][field]!r}，"
                                     f"master 实际做出 {counts[field]}"),
                                  *_partition_hint(run, field, predicted[run][field], counts))
    return tr("every run's partitions, pairs, messages, feeds and fetches, as simdist's master "
              "(and real TF's, in the tests) makes them",
              "每次运行的分区、配对、消息、feed 和 fetch 都与 simdist 的 master（以及测试中真实 "
              "TF 的 master）做出的一致")



CHECKS = [
    Check("counters", "predict_counters",
          tr("predict_counters: what each client of the story sees",
             "predict_counters：故事中每个客户端看到的值"), check_counters),
    Check("ps_tasks", "predict_ps_tasks",
          tr("predict_ps_tasks: round-robin and greedy", "predict_ps_tasks：轮询与贪心"),
          check_ps_tasks),
    Check("tf_config", "server_from_tf_config",
          tr("server_from_tf_config: the task's server", "server_from_tf_config：该任务的服务器"),
          check_tf_config),
    Check("fresh", "fresh_experiment",
          tr("fresh_experiment: starts fresh, cleans up, spares the others",
             "fresh_experiment：从头开始、清理干净、不碰别人的变量"), check_fresh),
    Check("partitions", "predict_partitions",
          tr("predict_partitions: the master's partitions and _Send/_Recv pairs",
             "predict_partitions：master 的分区与 _Send/_Recv 对"), check_partitions),
]
