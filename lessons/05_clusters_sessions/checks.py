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
from course.lessons import Check, CheckFailed, tr

DIFFICULTY = {"predict_counters": 2, "predict_ps_tasks": 1, "server_from_tf_config": 1,
              "fresh_experiment": 2}

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
        return run_python(code, timeout, net.preexec_fn())[0]["seen"]


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
        raise CheckFailed(f"predict_counters returned {predicted!r:.100}; expected a dict with "
                          f"the clients {sorted(actual)}",
                          tr("one list of values per client", "每个客户端一个值列表"))
    for name, values in actual.items():
        if list(predicted[name]) != values:
            raise CheckFailed(f"client {name}: you predicted {list(predicted[name])}, the "
                              f"simulated cluster gives {values}", *_story_hint(name))
    return "every client's values, as the simulator (and real TF, in the tests) gives them"


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
        predicted = module.predict_ps_tasks(list(sizes), num_ps, strategy)
        actual = actual_ps_tasks(sizes, num_ps, strategy)
        if list(predicted) != actual:
            raise CheckFailed(f"{strategy} over {num_ps} ps, sizes {list(sizes)} bytes: you "
                              f"predicted {list(predicted)}, replica_device_setter chose "
                              f"{actual}",
                              tr("round-robin ignores sizes; greedy looks at the bytes each ps holds",
                                 "轮询不看大小；贪心看每个 ps 已经存放的字节数"),
                              tr("round-robin cycles 0, 1, ..., n-1; greedy picks the ps with the fewest "
                                 "bytes so far (the lowest index on a tie)",
                                 "轮询按 0, 1, ..., n-1 循环；贪心选择目前字节数最少的 ps（相同时选编号最小的）"))
    return f"{len(PS_CASES)} variable layouts predicted right"


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
                raise CheckFailed(f"server_from_tf_config returned {server!r}, expected a "
                                  "tf.train.Server",
                                  tr("return the server you started", "返回你启动的服务器"))
            expected = "grpc://" + spec[job][int(index)]
            if (server.job_name, server.task_index, server.target) != (job, int(index),
                                                                        expected):
                raise CheckFailed(f"for task {job}:{index!r} you started the server of "
                                  f"{server.job_name}:{server.task_index!r} at {server.target}",
                                  tr("the \"task\" names the job and the index",
                                     "\"task\" 给出作业名和索引"),
                                  tr("TF's TFConfigClusterResolver reads the index with int(): "
                                     "\"0\" is task 0",
                                     "TF 的 TFConfigClusterResolver 用 int() 读取索引：\"0\" 就是任务 0"))
            if server.cluster != ClusterSpec(spec):
                raise CheckFailed(f"the server's cluster is {server.cluster}, expected {spec}",
                                  tr("pass the whole \"cluster\" to tf.train.ClusterSpec",
                                     "把整个 \"cluster\" 传给 tf.train.ClusterSpec"))
            sim.stop_all_servers()
    finally:
        sim.stop_all_servers()
    return ("the right server starts for worker:1, ps:0, a TFJob master:0 and an index written "
            "\"0\"")


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
                    "after your experiment the variable \"keeper\" of the default container "
                    "is gone: you freed another experiment's variables",
                    tr("free only what your experiment created", "只释放你的实验创建的东西"),
                    tr("put the experiment in a container of its own (tf.container) and reset "
                       "that one: Session.reset(target, [name])",
                       "把实验放进它自己的容器（tf.container），并只重置那一个："
                       "Session.reset(target, [name])"))
            if [v for v in default if v != "keeper"] or left:
                raise CheckFailed(
                    f"after your experiment the tasks still hold its variables: "
                    f"{left or {'ps:0': {DEFAULT_CONTAINER: default}}}",
                    tr("an experiment must clean up after itself: its variables stay on the "
                       "servers until they are reset", "实验结束后要自己清理：它的变量会一直留在"
                       "服务器上，直到被重置"),
                    tr("create them in a container of your own and call tf.Session.reset(target, "
                       "[that container]) at the end (the default container holds other "
                       "experiments' variables)",
                       "在你自己的容器里创建它们，最后调用 tf.Session.reset(target, [该容器])"
                       "（默认容器里还有其他实验的变量）"))
        if results != [STEPS, STEPS]:
            raise CheckFailed(f"two runs of {STEPS} steps returned {results}, expected "
                              f"[{STEPS}, {STEPS}]",
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
    return (f"two runs start fresh ({results}), free their own container, and leave the "
            "default one alone")


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
]
