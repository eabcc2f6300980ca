"""The differential harness: the same snippet on simdist and on real TensorFlow.

A graph snippet is a function ``snippet(tf)`` that builds a TF1 graph with ``tf`` (simdist.graph
here, real ``tf.compat.v1`` in a subprocess: graph mode, reference variables as in TF1) and
returns what to compare: ``names`` (ops whose type, requested device, colocation group and
dtype must agree, and whose effective device must agree where both ran them), ``runs`` (fetches
run one after the other in a Session on 2 CPUs; their values must agree) and ``init`` (run
the variables' initializer first, default True). A failure at build or run must be the same
error class on both sides (TF's ValueError or TypeError while building is simdist's
InvalidArgumentError). Every real snippet runs in ONE subprocess (TF starts once).

The eager side (one more subprocess) evaluates seeded fuzz cases against ``tf.DeviceSpec``,
``tf.train.ClusterSpec``, ``TFConfigClusterResolver`` and ``multi_worker_util.is_chief``, and
a MirroredStrategy's ``distribute_datasets_from_function`` on uneven data. A case agrees when
both give the same result, or both refuse it, or simdist refuses it on purpose and its error
says so (``errors.stricter_than_tf``). ``compare_*`` return the differences, empty when none.
"""

from __future__ import annotations

import inspect
import json
import random
import textwrap

import numpy as np

STRICTER = "TensorFlow accepts this; simdist does not"

# -- graph snippets (each self-contained: its source runs in the real TF subprocess) -------------


def unique_names(tf):
    a, b = tf.Variable(1.0), tf.Variable(2.0)
    x, x2 = tf.Variable(1.0, name="x"), tf.Variable(3.0, name="x")
    c, c2 = tf.constant(1.0, name="c"), tf.constant(2.0, name="c")
    with tf.name_scope("scope"):
        tf.constant(1.0, name="c")
    with tf.name_scope("scope"):
        tf.constant(1.0, name="c")
    looked_up = tf.get_default_graph().get_tensor_by_name("x_1:0")
    return {"names": ["Variable", "Variable_1", "Variable_1/Assign", "Variable_1/read", "x",
                      "x_1", "x_1/read", "c", "c_1", "scope/c", "scope_1/c"],
            "runs": [[a, b, x, x2, c, c2, looked_up]]}


def duplicate_exact_name(tf):
    tf.constant(1.0, name="q/")
    tf.constant(2.0, name="q")


def initializers_live_with_their_variable(tf):
    cluster = tf.train.ClusterSpec({"ps": ["h:1", "h:2"], "worker": ["h:3"]})
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        w = tf.get_variable("w", shape=(2, 3), initializer=tf.zeros_initializer())
        b = tf.get_variable("b", shape=(3,), initializer=tf.constant_initializer(0.5))
        tf.get_variable("k", initializer=[1.0, 2.0])
        tf.Variable([1.0, 2.0], name="v")
        tf.train.get_or_create_global_step()
        tf.identity(w, name="use_w")
        tf.identity(b, name="use_b")
    return {"names": ["w", "w/Initializer/zeros", "w/Assign", "w/read", "b",
                      "b/Initializer/Const", "k", "k/initial_value", "k/Assign", "v",
                      "v/initial_value", "v/Assign", "global_step",
                      "global_step/Initializer/zeros", "use_w", "use_b"]}


def initializers_run_where_their_variable_is(tf):
    def variables_on_cpu0(op):
        return "/cpu:0" if op.type in ("VariableV2", "VarHandleOp") else "/cpu:1"
    with tf.device(variables_on_cpu0):
        w = tf.get_variable("w", shape=(2,), initializer=tf.zeros_initializer())
        v = tf.Variable([1.0, 2.0], name="v")
        y = tf.add(w, v, name="y")
        with tf.device("/cpu:1"):
            bump = tf.assign_add(w, [1.0, 1.0], name="bump")
    return {"names": ["w", "w/Initializer/zeros", "w/Assign", "v", "v/initial_value",
                      "v/Assign", "y", "bump", "bump/value"],
            "runs": [bump, y]}


def colocated_ops_report_their_device(tf):
    with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
        v = tf.Variable([1.0, 2.0], name="v")
        u = tf.Variable([3.0], name="u")
        with tf.colocate_with(v):
            tf.constant(3.0, name="near_v")
        with tf.colocate_with(u.op):
            tf.constant(4.0, name="near_u")
        loss = tf.reduce_sum(v * v) + tf.reduce_sum(u)
        tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    return {"names": ["v", "v/Assign", "v/read", "near_v", "near_u", "v/Momentum",
                      "v/Momentum/Initializer/zeros", "v/Momentum/Assign", "u/Momentum",
                      "Momentum/update_v/ApplyMomentum", "Momentum/update_u/ApplyMomentum",
                      "Momentum/learning_rate", "Momentum/momentum", "Momentum"]}


def gradients_through_read_value(tf):
    v = tf.Variable([1.0, 2.0], name="v")
    w = tf.Variable([3.0], name="w")
    loss = tf.reduce_sum(v.read_value() * v.read_value()) + tf.reduce_sum(w.read_value())
    (grad_v, grad_w) = tf.gradients(loss, [v, w])
    train = tf.train.GradientDescentOptimizer(0.25).minimize(loss)
    return {"names": ["read", "read_1", "read_2", "GradientDescent"],
            "runs": [[grad_v, grad_w], train, [v, w], train, [v, w]]}


def tensor_hyper_parameters(tf):
    step = tf.train.get_or_create_global_step()
    decayed = tf.divide(0.5, tf.add(1.0, tf.cast(step, tf.float32)))
    a = tf.Variable([1.0, -2.0], name="a")
    b = tf.Variable([0.5, 4.0], name="b")
    c = tf.Variable([2.0, 1.0], name="c")
    loss = tf.reduce_sum(a * a) + tf.reduce_sum(b * b * b) + tf.reduce_sum(c * c)
    momentum = tf.constant(0.5) + tf.constant(0.25)
    trains = [
        tf.train.GradientDescentOptimizer(decayed).minimize(loss, var_list=[a]),
        tf.train.MomentumOptimizer(decayed, momentum, use_nesterov=True).minimize(
            loss, var_list=[b]),
        tf.train.AdamOptimizer(decayed, beta1=tf.constant(0.8), beta2=lambda: 0.99,
                               epsilon=1e-7).minimize(loss, global_step=step, var_list=[c]),
    ]
    runs = [trains, [a, b, c, step]] * 3
    return {"names": ["GradientDescent", "Momentum", "Adam", "Adam/epsilon"],
            "runs": runs}


def adam_state_as_tf_keeps_it(tf):
    b = tf.Variable(np.array([1.0, 2.0]), name="b")  # float64
    a = tf.Variable(np.array([[0.5], [-1.0]]), name="a")
    loss = tf.reduce_sum(b * b) + tf.reduce_sum(a * a * a)
    optimizer = tf.train.AdamOptimizer(0.1)
    train = optimizer.minimize(loss, var_list=[b, a])
    other = tf.Graph()
    with other.as_default():  # one optimizer, two graphs: the same names in each
        z = tf.Variable(np.float32(2.0), name="z")
        optimizer.minimize(z * z, var_list=[z])
        other_names = sorted(op.name for op in other.get_operations() if "power" in op.name)
    marker = "other_" + "_".join(n.replace("/", "_") for n in other_names[:2])
    tf.constant(0, name=marker)
    return {"names": ["beta1_power", "beta2_power", "beta1_power/read", "a/Adam", "a/Adam_1",
                      "b/Adam", "Adam/update_b/ApplyAdam", "Adam/update_b/Cast", "Adam/Assign",
                      "Adam/mul", "Adam", marker],
            "runs": [train, [a, b], train, [a, b]]}


def replica_device_setter_edge_cases(tf):
    with tf.device(tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:1",
                                                  merge_devices=False)):
        with tf.device("/device:CPU:1"):
            kept = tf.Variable(1.0, name="kept")
        with tf.device("/job:foo"):
            tf.constant(2.0, name="kept_const")
        placed = tf.Variable(1.0, name="placed")
        tf.constant(2.0, name="worker_const")
    with tf.device("/job:foo/task:3/device:CPU:1"):
        with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
            tf.Variable(1.0, name="merged")
            tf.constant(2.0, name="merged_const")
    cluster = {"ps": ["a:1"], "worker": ["b:1"]}
    outcomes = [tf.train.replica_device_setter(cluster=cluster, ps_device="/device:CPU:0"),
                tf.train.replica_device_setter(cluster=cluster, ps_device="/job:other"),
                tf.train.replica_device_setter(cluster={"worker": ["b:1"]}),
                tf.train.replica_device_setter(ps_tasks=0),
                tf.train.replica_device_setter(cluster=cluster, ps_device="/job:ps")]
    for i, fn in enumerate(outcomes):
        tf.constant(0, name=f"setter{i}_{'none' if fn is None else 'function'}")
    del kept, placed
    return {"names": ["kept", "kept_const", "placed", "worker_const", "merged", "merged_const",
                      "setter0_none", "setter1_none", "setter2_none", "setter3_none",
                      "setter4_function"]}


def group_per_device(tf):
    with tf.device("/cpu:0"):
        a = tf.Variable([1.0], name="a")
    with tf.device("/cpu:1"):
        b = tf.Variable([2.0], name="b")
    both = tf.group(a.assign_add([1.0]), b.assign_add([1.0]), name="both")
    one = tf.group(a.assign_add([2.0]), a.assign_add([3.0]))
    return {"names": ["both", "both/NoOp", "both/NoOp_1", "group_deps", "init", "init/NoOp",
                      "init/NoOp_1"],
            "runs": [both, one, [a, b]]}


def uninitialized_read(tf):
    v = tf.Variable([1.0], name="v")
    return {"runs": [v], "init": False}


def assign_of_the_wrong_shape(tf):
    v = tf.Variable([1.0, 2.0], name="v")
    tf.assign(v, [1.0, 2.0, 3.0])


GRAPH_SNIPPETS = [unique_names, duplicate_exact_name, initializers_live_with_their_variable,
                  initializers_run_where_their_variable_is, colocated_ops_report_their_device,
                  gradients_through_read_value, tensor_hyper_parameters,
                  adam_state_as_tf_keeps_it, replica_device_setter_edge_cases,
                  group_per_device, uninitialized_read, assign_of_the_wrong_shape]

# -- the runner: the same source runs on both sides ------------------------------------------

RUNNER = '''
def plain(value):
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return None if value is None else np.asarray(value).tolist()


def run_snippet(tf, snippet, colocation, run, kind_of):
    """Build and run one snippet; what the differential tests compare."""
    graph = tf.Graph()
    out = {"ops": {}, "values": [], "placement": {}, "error": None, "names": []}
    spec = {}
    try:
        with graph.as_default():
            spec = snippet(tf) or {}
            init = tf.global_variables_initializer() if "runs" in spec else None
    except Exception as error:
        out["error"] = ["build", kind_of(error)]
    out["names"] = list(spec.get("names", []))
    out["ops"] = {op.name: [op.type, op.device, colocation(op),
                            op.outputs[0].dtype.name if op.outputs else None]
                  for op in graph.get_operations()}
    if out["error"] is None and "runs" in spec:
        config = tf.ConfigProto(device_count={"CPU": 2})
        sess = tf.Session(graph=graph, config=config)
        try:
            if spec.get("init", True):
                run(sess, init, out["placement"])
            for fetch in spec["runs"]:
                out["values"].append(plain(run(sess, fetch, out["placement"])))
        except Exception as error:
            out["error"] = ["run", kind_of(error)]
        finally:
            sess.close()
    return out
'''

_REAL_ADAPTERS = '''
tf1.disable_resource_variables()  # TF1's reference variables, which simdist models


def colocation(op):
    return ",".join(sorted(g.decode()[len("loc:@"):] for g in op.colocation_groups()))


def run(sess, fetch, placement):
    options = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE)
    meta = tf1.RunMetadata()
    value = sess.run(fetch, options=options, run_metadata=meta)
    for dev in meta.step_stats.dev_stats:
        for node in dev.node_stats:
            placement[node.node_name] = dev.device
    return value


def kind_of(error):
    if isinstance(error, tf.errors.OpError):
        return type(error).__name__
    if isinstance(error, (ValueError, TypeError)):
        return "InvalidArgumentError"
    return type(error).__name__
'''


def sim_kind_of(error) -> str:
    """simdist's TF error class of ``error`` (ClusterSpecError is an InvalidArgumentError)."""
    for cls in type(error).__mro__:
        if cls.__module__ == "simdist.base.errors" and cls.__name__ != "SimdistError":
            return cls.__name__
    return type(error).__name__


def _sim_colocation(op) -> str:
    root = op
    while root.colocate is not None:
        root = root.colocate
    return root.name


def _sim_run(sess, fetch, placement):
    value = sess.run(fetch)
    placement.update(sess.last_placement)
    return value


def _runner_namespace() -> dict:
    namespace = {"np": np}
    exec(RUNNER, namespace)  # noqa: S102 (our own source, shared with the real side)
    return namespace


def sim_graph(snippet) -> dict:
    """One snippet on simdist.graph, in this process."""
    import simdist.graph as sim

    out = _runner_namespace()["run_snippet"](sim, snippet, _sim_colocation, _sim_run,
                                             sim_kind_of)
    return json.loads(json.dumps(out))


def real_graphs(snippets=GRAPH_SNIPPETS, timeout: float = 300) -> dict:
    """Every snippet on real TF, in one subprocess: {snippet name: result}."""
    from realdist.graph.tf1 import run_python

    sources = "\n".join(textwrap.dedent(inspect.getsource(fn)) for fn in snippets)
    loop = "\n".join(f"emit({fn.__name__!r}, run_snippet(tf1, {fn.__name__}, colocation, run, "
                     f"kind_of))" for fn in snippets)
    emitted, _ = run_python(_REAL_ADAPTERS + RUNNER + sources + "\n" + loop, timeout)
    return emitted


def compare_graph(sim: dict, real: dict) -> list[str]:
    """The differences between one snippet's simdist and real results."""
    problems = []
    if sim["error"] != real["error"]:
        problems.append(f"error: simdist {sim['error']}, TF {real['error']}")
    for name in real["names"]:
        if name not in real["ops"]:
            problems.append(f"{name}: TF has no such op (fix the snippet)")
        elif name not in sim["ops"]:
            problems.append(f"{name}: simdist has no such op")
        else:
            for field, a, b in zip(("type", "requested device", "colocation", "dtype"),
                                   sim["ops"][name], _without_ref(real["ops"][name])):
                if a != b:
                    problems.append(f"{name}: {field} {a!r} in simdist, {b!r} in TF")
            if name in real["placement"] and sim["placement"].get(name) != \
                    real["placement"][name]:
                problems.append(f"{name}: placed on {sim['placement'].get(name)!r} by "
                                f"simdist, {real['placement'][name]!r} by TF")
    if len(sim["values"]) != len(real["values"]):
        problems.append(f"values of {len(sim['values'])} runs in simdist, "
                        f"{len(real['values'])} in TF")
    for k, (a, b) in enumerate(zip(sim["values"], real["values"])):
        if not _close(a, b):
            problems.append(f"run {k}: simdist {a}, TF {b}")
    return problems


def _without_ref(record):
    """TF1's reference dtypes ("float32_ref") are plain dtypes in simdist (README)."""
    kind, device, colocation, dtype = record
    return [kind, device, colocation, dtype and dtype.removesuffix("_ref")]


def _close(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and not (
            a and all(isinstance(x, (int, float)) for x in a)):
        return all(_close(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is b
    try:
        return np.allclose(np.asarray(a, float), np.asarray(b, float), rtol=1e-6, atol=1e-7)
    except (ValueError, TypeError):
        return a == b


# -- seeded fuzz cases -------------------------------------------------------------------------

_PARTS = ["job:worker", "job:ps", "job:Worker", "job:w-1", "job:", "replica:0", "replica:1",
          "task:0", "task:3", "task:-1", "task:x", "task:+2", "device:CPU:0", "device:GPU:1",
          "device:gpu:0", "device:XLA_CPU:0", "device:TPU_SYSTEM:0", "device:GPU:*",
          "device::0", "device:GPU", "cpu:0", "gpu:1", "GPU", "tpu:2", "epu:0", "tpu_system:0",
          "fpga:0", "cpu:0:1", "Job:a", ""]
_JOBS = ["worker", "ps", "chief", "evaluator", "Worker", "my-job", "9w", "local", "w_1"]
_ADDRESSES = ["localhost:2222", "h:1", "10.0.0.1:5000", "localhost", ""]


def device_cases(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["/".join(rng.choice(_PARTS) for _ in range(rng.randint(1, 4)))
            if rng.random() < 0.8 else rng.choice(_PARTS) for _ in range(n)]


_GOOD_PARTS = ["job:worker", "job:ps", "replica:0", "task:0", "task:2", "device:CPU:0",
               "device:GPU:1", "device:GPU:*", "cpu:1", "gpu", "device:XLA_CPU:0", ""]


def merge_cases(seed: int, n: int) -> list[list[str]]:
    """Pairs of device strings that mostly parse, to merge (the inner one wins)."""
    rng = random.Random(seed)

    def one():
        parts = rng.sample(_GOOD_PARTS, rng.randint(0, 3))
        return "/".join(parts) if rng.random() < 0.9 else rng.choice(_PARTS)
    return [[one(), one()] for _ in range(n)]


def _job_value(rng):
    kind = rng.random()
    addresses = [rng.choice(_ADDRESSES) for _ in range(rng.randint(0, 3))]
    if kind < 0.6:
        return addresses
    if kind < 0.9:
        return {rng.choice([0, 1, 3, "2", -1]): a for a in addresses}
    return rng.choice(["h:1", None])  # (a task count is simdist's extension: TF has none)


def cluster_cases(seed: int, n: int) -> list[str]:
    """ClusterSpec arguments, as Python literals (sparse jobs have int keys)."""
    rng = random.Random(seed)
    return [repr({rng.choice(_JOBS): _job_value(rng) for _ in range(rng.randint(0, 3))})
            for _ in range(n)]


def tf_config_cases(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        config: dict = {}
        if rng.random() < 0.85:
            config["cluster"] = {rng.choice(_JOBS[:4]): [rng.choice(_ADDRESSES[:3])
                                                         for _ in range(rng.randint(1, 3))]
                                 for _ in range(rng.randint(1, 3))}
        if rng.random() < 0.8:
            task = {"type": rng.choice(_JOBS[:4] + [3]),
                    "index": rng.choice([0, 1, 2, 5, "1", "0", "x", -1, 1.0])}
            if rng.random() < 0.1:
                del task[rng.choice(["type", "index"])]
            config["task"] = task if rng.random() < 0.95 else "worker:0"
        if rng.random() < 0.2:
            config["rpc_layer"] = rng.choice(["grpc", 5])
        cases.append(json.dumps(config) if rng.random() < 0.95 else
                     rng.choice(["[1, 2]", "null", "{", '"text"']))
    return cases


def chief_cases(seed: int, n: int) -> list[list]:
    """(cluster, task type, task index) in TF's allowed jobs (no TFJob "master")."""
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        cluster = {"worker": [f"w:{i}" for i in range(rng.randint(1, 3))]}
        for job in ("chief", "ps", "evaluator"):
            if rng.random() < 0.5:
                cluster[job] = [f"{job}:{i}" for i in range(rng.randint(1, 2 if job == "ps"
                                                                       else 1))]
        job = rng.choice(list(cluster))
        cases.append([cluster, job, rng.randrange(len(cluster[job]))])
    return cases


def dataset_cases() -> list[list[int]]:
    """Per-replica element counts of a dataset of id batches (size 2) for 2 replicas."""
    return [[5, 2], [1, 2], [4, 2], [0, 2], [7, 2]]


_EAGER = '''
import ast
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.distribute.cluster_resolver import TFConfigClusterResolver

cases = json.loads(sys.argv[1])


def attempt(fn):
    try:
        return ["ok", fn()]
    except Exception as error:
        return ["error", type(error).__name__]


def device(text):
    spec = tf.DeviceSpec.from_string(text)
    return [spec.to_string(), spec.job, spec.replica, spec.task, spec.device_type,
            spec.device_index]


def cluster(text):
    spec = tf.train.ClusterSpec(ast.literal_eval(text))
    return [spec.jobs, repr(spec), bool(spec), repr(spec.as_dict()),
            {job: spec.num_tasks(job) for job in spec.jobs}]


def tf_config(text):
    os.environ["TF_CONFIG"] = text
    resolver = TFConfigClusterResolver()
    return [repr(resolver.cluster_spec().as_dict()), resolver.task_type, resolver.task_id,
            resolver.rpc_layer]


def datasets(counts, batch):
    n, replicas = counts
    def dataset_fn(ctx):
        ids = tf.range(n * batch, dtype=tf.int32)
        return tf.data.Dataset.from_tensor_slices(ids).batch(batch)
    out = []
    for inputs in strategy.distribute_datasets_from_function(dataset_fn):
        out.append([x.numpy().tolist() for x in strategy.experimental_local_results(inputs)])
    return out


cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
emit("devices", [attempt(lambda: device(t)) for t in cases["devices"]])
emit("merges", [attempt(lambda: tf.DeviceSpec.from_string(a).make_merged_spec(
    tf.DeviceSpec.from_string(b)).to_string()) for a, b in cases["merges"]])
emit("clusters", [attempt(lambda: cluster(t)) for t in cases["clusters"]])
emit("tf_configs", [attempt(lambda: tf_config(t)) for t in cases["tf_configs"]])
emit("chiefs", [attempt(lambda: multi_worker_util.is_chief(*c)) for c in cases["chiefs"]])
emit("datasets", [attempt(lambda: datasets(c, 2)) for c in cases["datasets"]])
'''

SEED, N = 2026, 150


def eager_cases(seed: int = SEED, n: int = N) -> dict:
    return {"devices": device_cases(seed, n), "merges": merge_cases(seed, n),
            "clusters": cluster_cases(seed, n), "tf_configs": tf_config_cases(seed, n),
            "chiefs": chief_cases(seed, n // 3), "datasets": dataset_cases()}


def real_eager(cases: dict, timeout: float = 300) -> dict:
    """Every eager case on real TF, in one subprocess (eager mode: realdist.graph.tf1's prelude
    turns it off, and the first line turns it back on before TF does anything)."""
    from realdist.graph.tf1 import run_python

    source = _EAGER.replace("json.loads(sys.argv[1])", f"json.loads({json.dumps(cases)!r})")
    emitted, _ = run_python("tf1.enable_eager_execution()\n" + source, timeout)
    return emitted


def sim_eager(cases: dict) -> dict:
    """The same cases on simdist, in this process."""
    import ast

    from simdist.hardware.cluster import ClusterSpec
    from simdist.hardware.tf_config import TFConfig
    from simdist.hardware.device_spec import DeviceSpec

    def attempt(fn):
        try:
            return ["ok", fn()]
        except Exception as error:  # the comparison needs its class and message
            return ["error", sim_kind_of(error), str(error)]

    def device(text):
        spec = DeviceSpec.from_string(text)
        return [spec.to_string(), spec.job, spec.replica, spec.task, spec.device_type,
                spec.device_index]

    def cluster(text):
        spec = ClusterSpec(ast.literal_eval(text))
        return [spec.jobs, repr(spec), bool(spec), repr(spec.as_dict()),
                {job: spec.num_tasks(job) for job in spec.jobs}]

    def tf_config(text):
        config = TFConfig.from_json(text)
        return [repr(config.cluster.as_dict()), config.task_type, config.task_id,
                config.rpc_layer]

    out = {
        "devices": [attempt(lambda: device(t)) for t in cases["devices"]],
        "merges": [attempt(lambda: DeviceSpec.from_string(a).make_merged_spec(
            DeviceSpec.from_string(b)).to_string()) for a, b in cases["merges"]],
        "clusters": [attempt(lambda: cluster(t)) for t in cases["clusters"]],
        "tf_configs": [attempt(lambda: tf_config(t)) for t in cases["tf_configs"]],
        "chiefs": [attempt(lambda: TFConfig(*c).is_chief) for c in cases["chiefs"]],
        "datasets": [attempt(lambda: sim_datasets(c, 2)) for c in cases["datasets"]],
    }
    return json.loads(json.dumps(out))


def sim_datasets(counts, batch) -> list:
    """``distribute_datasets_from_function`` on a simulated MirroredStrategy of 2 CPUs."""
    from simdist import simulate
    from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
    from simdist.distribute import MirroredStrategy

    n, replicas = counts

    def dataset_fn(ctx):
        ids = np.arange(n * batch, dtype=np.int32)
        return [(ids[i:i + batch], ids[i:i + batch]) for i in range(0, len(ids), batch)]

    def body(ctx):
        strategy = MirroredStrategy(ctx, devices=list(range(replicas)))
        out = [[x.tolist() for x in b[0].values]
               for b in strategy.distribute_datasets_from_function(dataset_fn)]
        yield ctx.timeout(1)
        return out

    hardware = Hardware.from_catalog(HardwareCatalog.default(), "cpu",
                                     Layout(devices_per_task=replicas))
    return simulate({"worker": 1}, body, hardware=hardware).returns["worker:0"]


def compare_cases(kind: str, cases: list, sim: list, real: list) -> list[str]:
    """The cases where simdist and TF disagree: a different result, or one side refusing
    what the other accepts (unless simdist says it refuses on purpose)."""
    problems = []
    for case, s, r in zip(cases, sim, real):
        if s[0] == r[0] == "ok":
            if s[1] != r[1]:
                problems.append(f"{kind} {case!r}: simdist {s[1]!r}, TF {r[1]!r}")
        elif s[0] == "error" and r[0] == "ok":
            if STRICTER not in s[2]:
                problems.append(f"{kind} {case!r}: simdist refuses it ({s[1]}: {s[2]}), TF "
                                f"gives {r[1]!r}")
        elif s[0] == "ok" and r[0] == "error":
            problems.append(f"{kind} {case!r}: TF refuses it ({r[1]}), simdist gives "
                            f"{s[1]!r}")
    if len(sim) != len(real):
        problems.append(f"{kind}: {len(sim)} results in simdist, {len(real)} in TF")
    return problems


# -- uneven per-worker datasets, two workers ---------------------------------------------------

UNEVEN = {"counts": [5, 1], "batch": 2}


def real_uneven_workers(job=UNEVEN, timeout: float = 120) -> list:
    """Per worker, the ids each step gave its replica, on two real TF workers."""
    from pathlib import Path

    from realdist.distribute.multiworker import launch

    program = str(Path(__file__).parent / "programs" / "uneven_datasets_worker.py")
    outs = launch({**job, "timeout": timeout}, [{"CUDA_VISIBLE_DEVICES": ""}] * 2, timeout,
                  worker=(program,))
    return [out["steps"] for out in outs]


def sim_uneven_workers(job=UNEVEN) -> list:
    """The same on two simulated MultiWorkerMirroredStrategy workers (one replica each),
    with a collective every step, as the real program has."""
    from simdist import simulate
    from simdist.collectives import ReduceOp
    from simdist.distribute import MultiWorkerMirroredStrategy

    def dataset_fn(ctx):
        first = 100 * ctx.input_pipeline_id
        ids = np.arange(first, first + job["counts"][ctx.input_pipeline_id], dtype=np.int32)
        return [(ids[i:i + job["batch"]], ids[i:i + job["batch"]])
                for i in range(0, len(ids), job["batch"])]

    def body(ctx):
        strategy = MultiWorkerMirroredStrategy(ctx)
        steps = []
        for batch in strategy.distribute_datasets_from_function(dataset_fn):
            steps.append([x.tolist() for x in batch[0].values])
            sizes = yield from strategy.run(lambda x, y: np.array(x.size, np.float32),
                                            args=batch)
            yield from strategy.reduce(ReduceOp.SUM, sizes)
        return steps

    returns = simulate({"worker": 2}, body).returns
    return [returns["worker:0"], returns["worker:1"]]
