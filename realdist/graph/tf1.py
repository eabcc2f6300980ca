"""TF1 graph-mode programs on real TensorFlow, next to the same programs in simdist.graph.

A *program* is a function of the TF module: ``build(tf)`` builds a graph with
``tf.compat.v1``'s API and returns what to fetch. simdist runs it with ``simdist.graph`` as
``tf``; realdist runs its source in a fresh Python process with the real
``tf.compat.v1`` (graph mode, ``log_device_placement`` on), so the test process never
initialises TensorFlow and nothing can hang: every child has a timeout and is killed in a
``finally``. Real placement lines come from the child's stderr and are parsed with the same
function as simdist's (``parse_placement_log``).
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import tempfile
import textwrap
from dataclasses import dataclass

import numpy as np

from simdist.base.errors import DeadlineExceededError, UnavailableError
from simdist.graph.placement import parse_placement_log

from realdist.runtime.localcluster import PrivateNetwork
from realdist.runtime.processes import MARK, PRELUDE, child_env, free_ports, read_back
from realdist.runtime.tempdirs import owned_tempdir
from realdist.runtime.zygote import start_program


def program_source(fn) -> str:
    """The source of a program function, to run in another process."""
    return textwrap.dedent(inspect.getsource(fn))


def free_port() -> int:
    return free_ports(1)[0]


def run_python(code: str, timeout: float = 120, network=None) -> tuple[dict, str]:
    """Run ``PRELUDE + code`` as a fresh Python would (forked by this process's TF zygote,
    ``realdist.runtime.zygote``, or ``python -c`` where that is off), in ``network`` (a
    ``PrivateNetwork``) if given; returns (what it emitted, its stderr)."""
    with owned_tempdir("realdist-program-") as tmp, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:
        # AutoGraph's files go with tmp, whatever ends the program
        proc = start_program(PRELUDE + code, [], child_env(tmp), out.fileno(), err.fileno(),
                             "tf-program", network=network)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            text = read_back(out) + read_back(err)
            raise DeadlineExceededError(f"the real TF program ran past {timeout} s; its last "
                                        f"output:\n{text[-2000:]}") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stdout, stderr = read_back(out), read_back(err)
    if proc.returncode != 0:
        raise RuntimeError(f"the real TF program exited with {proc.returncode}:\n"
                           f"{stderr[-3000:]}")
    emitted = {}
    for line in stdout.splitlines():
        if line.startswith(MARK):
            emitted.update(json.loads(line[len(MARK):]))
    return emitted, stderr


# -- placement -----------------------------------------------------------------------------------


@dataclass
class Placement:
    """Where a program's ops ran ({op name: device}) and the values it fetched."""

    devices: dict
    requested: dict
    values: list


def _config_kwargs(device_count, soft):
    return {"device_count": dict(device_count), "log_device_placement": True,
            "allow_soft_placement": soft}


def sim_placement(fn, device_count=None, soft=False, machine=None) -> Placement:
    """Run ``fn(simdist.graph)`` in a local simdist Session; its placement and values."""
    import simdist.graph as sim

    device_count = device_count or {"CPU": 2}
    graph = sim.Graph()
    with graph.as_default():
        fetches = fn(sim)
        init = sim.global_variables_initializer()
    config = sim.ConfigProto(**_config_kwargs(device_count, soft))
    config.log_device_placement = False
    with sim.Session(graph=graph, config=config, machine=machine) as sess:
        sess.run(init)
        values = sess.run(fetches)
        devices = parse_placement_log("\n".join(sess.placement_log))
    requested = {op.name: op.device for op in graph.get_operations()}
    return Placement(devices, requested, _plain(values))


def real_placement(fn, device_count=None, soft=False, timeout: float = 120,
                   extra_source: str = "") -> Placement:
    """Run ``fn(tf.compat.v1)`` in a real TF Session with log_device_placement;
    ``extra_source`` defines what ``fn`` calls (e.g. a lesson's solution.py)."""
    device_count = device_count or {"CPU": 2}
    code = extra_source + "\n" + program_source(fn) + textwrap.dedent(f"""
        graph = tf1.Graph()
        with graph.as_default():
            fetches = {fn.__name__}(tf1)
            init = tf1.global_variables_initializer()
        config = tf1.ConfigProto(**{_config_kwargs(device_count, soft)!r})
        with tf1.Session(graph=graph, config=config) as sess:
            sess.run(init)
            emit("values", sess.run(fetches))
        emit("requested", {{op.name: op.device for op in graph.get_operations()}})
    """)
    emitted, err = run_python(code, timeout)
    return Placement(parse_placement_log(err), emitted["requested"], emitted["values"])


def compare_placement(sim: Placement, real: Placement, names=None) -> dict:
    """{op name: (simdist device, real device)} for the ops placed differently.

    Compares ``names`` (default: every op name both graphs have; the graphs differ in
    internal ops, e.g. real TF's resource variables have ReadVariableOp nodes).
    """
    names = names if names is not None else sorted(set(sim.devices) & set(real.devices))
    return {n: (sim.devices.get(n), real.devices.get(n)) for n in names
            if sim.devices.get(n) != real.devices.get(n)}


def _plain(values):
    if isinstance(values, (list, tuple)):
        return [_plain(v) for v in values]
    if isinstance(values, dict):
        return {k: _plain(v) for k, v in values.items()}
    return None if values is None else np.asarray(values).tolist()


# -- replica_device_setter -------------------------------------------------------------------------


def sim_variable_devices(fn) -> dict:
    """{variable op name: requested device} of the variables ``fn(simdist.graph)`` returns."""
    import simdist.graph as sim

    with sim.Graph().as_default():
        return {v.op.name: v.device for v in fn(sim)}


def real_variable_devices(fn, timeout: float = 120) -> dict:
    """The same with real TF's tf.compat.v1 (graph only: no server or session needed)."""
    code = program_source(fn) + textwrap.dedent(f"""
        with tf1.Graph().as_default():
            emit("devices", {{v.op.name: v.device for v in {fn.__name__}(tf1)}})
    """)
    return run_python(code, timeout)[0]["devices"]


# -- two clients sharing a variable through a localhost cluster ----------------------------------


def counter_client(tf, target, worker, initialize, increments, device="/job:ps/task:0"):
    """A client: builds ``counter`` on ``device`` (None: local) and increments it; returns
    the value after each increment. The same source runs with simdist.graph and real TF."""
    graph = tf.Graph()
    with graph.as_default():
        with tf.device(device):
            counter = tf.Variable(0, name="counter")
        with tf.device(None if device is None else f"/job:worker/task:{worker}"):
            increment = tf.assign_add(counter, 1)
    seen = []
    with tf.Session(target, graph=graph) as sess:
        if initialize:
            sess.run(counter.initializer)
        for _ in range(increments):
            seen.append(int(sess.run(increment)))
    return seen


def sim_shared_counter(increments=(3, 3), client=None) -> dict:
    """Two clients of a {ps: 1, worker: 2} simdist cluster, one after the other, and a local
    session: {"client0": [...], "client1": [...], "local": [...]}. ``client`` is a
    function like ``counter_client`` (default: that one)."""
    import simdist.graph as sim

    counter_client_ = client or counter_client
    cluster = sim.ClusterSpec({"ps": 1, "worker": 2})
    servers = [sim.Server(cluster, job, i) for job in ("ps", "worker")
               for i in range(cluster.num_tasks(job))]
    try:
        seen = {f"client{k}": counter_client_(sim, servers[1 + k].target, k, k == 0, n)
                for k, n in enumerate(increments)}
        seen["local"] = counter_client_(sim, "", 0, True, increments[0], device=None)
        return seen
    finally:
        for server in servers:
            server.stop()


_SERVERS = """
cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
config = tf1.ConfigProto(inter_op_parallelism_threads=4)
servers = [tf.distribute.Server(cluster, job, i, config=config)
           for job in cluster.jobs for i in range(cluster.num_tasks(job))]
print("READY", flush=True)
sys.stdin.read()  # serve until the parent closes stdin (or kills us)
"""


def real_shared_counter(increments=(3, 3), timeout: float = 120, source: str | None = None,
                        ) -> dict:
    """The same on real TF: one process runs the ps and worker servers on free loopback
    ports, in a private network (``realdist.runtime.localcluster``: reachable from no other
    machine); each client is its own process in it, run one after the other; then a local
    session. ``source`` is code defining ``counter_client`` (default: this module's)."""
    ports = [f"127.0.0.1:{port}" for port in free_ports(3)]
    cluster = {"ps": ports[:1], "worker": ports[1:]}
    with PrivateNetwork() as net:
        return _shared_counter_in(net, cluster, increments, timeout, source)


def _start_servers(network, cluster) -> tuple:
    """The process serving ``cluster`` (``_SERVERS``) in ``network``: (process, its stdout,
    its stdin), stdout and stdin pipes."""
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    with open(os.devnull, "wb") as null:
        servers = start_program(PRELUDE + _SERVERS, [json.dumps(cluster)], child_env(), out_w,
                                null.fileno(), "tf-servers", stdin=in_r, network=network)
    os.close(out_w)
    os.close(in_r)
    return servers, os.fdopen(out_r, "r"), os.fdopen(in_w, "w")


def _shared_counter_in(network, cluster, increments, timeout, source) -> dict:
    servers, stdout, stdin = _start_servers(network, cluster)
    try:
        line = stdout.readline()
        if line.strip() != "READY":
            raise UnavailableError(f"the real TF servers did not start (got {line!r})")
        client = (source or program_source(counter_client)) + "\n"
        seen = {}
        for k, n in enumerate(increments):
            target = f"grpc://{cluster['worker'][k]}"
            code = client + f"emit('seen', counter_client(tf1, {target!r}, {k}, {k == 0}, {n}))"
            seen[f"client{k}"] = run_python(code, timeout, network)[0]["seen"]
        code = client + f"emit('seen', counter_client(tf1, '', 0, True, {increments[0]}, None))"
        seen["local"] = run_python(code, timeout, network)[0]["seen"]
        return seen
    finally:
        servers.kill()
        servers.wait(timeout=30)
        stdout.close()
        stdin.close()
