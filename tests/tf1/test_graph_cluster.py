"""simdist.graph clusters: servers, sessions sharing variables, containers, reset,
replica_device_setter's strategies, and the errors of a bad target or a missing task."""

import numpy as np
import pytest

import simdist.graph as tf
from simdist.hardware.cluster import ClusterSpec
from simdist.hardware.tf_config import TFConfig


pytestmark = pytest.mark.usefixtures("fresh_tf1")


def start(cluster):
    return {f"{j}:{i}": tf.train.Server(cluster, j, i)
            for j in cluster.jobs for i in cluster.task_indices(j)}


def counter_client(target, initialize, container="", device="/job:ps/task:0"):
    graph = tf.Graph()
    with graph.as_default(), tf.container(container):
        with tf.device(device):
            counter = tf.Variable(0, name="counter")
        increment = tf.assign_add(counter, 1)
    sess = tf.Session(target, graph=graph)
    if initialize:
        sess.run(counter.initializer)
    return sess, increment


def test_two_clients_share_a_variable_on_the_ps_and_a_local_session_keeps_its_own():
    servers = start(ClusterSpec({"ps": 1, "worker": 2}))
    a, inc_a = counter_client(servers["worker:0"].target, initialize=True)
    b, inc_b = counter_client(servers["worker:1"].target, initialize=False)
    seq = [int(s.run(i)) for s, i in [(a, inc_a), (b, inc_b), (a, inc_a), (b, inc_b)]]
    assert seq == [1, 2, 3, 4]
    local, inc_local = counter_client("", initialize=True, device=None)
    assert [int(local.run(inc_local)) for _ in range(2)] == [1, 2]
    assert int(b.run(inc_b)) == 5
    # the increment crossed the network: worker -> ps Send/Recv in the trace
    names = {(s.pid, s.name) for s in b.last_trace.spans}
    assert ("worker:1", "Send AssignAdd/value:0") in names and \
        ("ps:0", "Recv AssignAdd/value:0") in names
    assert ("ps:0", "AssignAdd") in names


def test_containers_isolate_and_reset_frees_them():
    servers = start(ClusterSpec({"ps": 1, "worker": 1}))
    target = servers["worker:0"].target
    default, inc_default = counter_client(target, True)
    exp, inc_exp = counter_client(target, True, container="experiment0")
    assert [int(default.run(inc_default)), int(exp.run(inc_exp)), int(exp.run(inc_exp))] == \
        [1, 1, 2]
    assert tf.Session.reset(target, ["experiment0"]) is None  # as TF
    # as TF, reset closed every session on the target
    with pytest.raises(tf.errors.AbortedError, match="Session.reset"):
        default.run(inc_default)
    with pytest.raises(tf.errors.AbortedError):
        exp.close()
    again = tf.Session(target, graph=inc_default.graph)
    assert int(again.run(inc_default)) == 2  # the default container is untouched
    again_exp = tf.Session(target, graph=inc_exp.graph)
    with pytest.raises(tf.errors.FailedPreconditionError,
                       match="uninitialized value counter"):
        again_exp.run(inc_exp)
    tf.Session.reset(target)
    with pytest.raises(tf.errors.FailedPreconditionError):
        tf.Session(target, graph=inc_default.graph).run(inc_default)
    with pytest.raises(tf.errors.InvalidArgumentError, match="needs a server target"):
        tf.Session.reset("")


def test_a_server_address_needs_a_port():
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="Could not parse port for local server from 'localhost'"):
        tf.train.Server({"worker": ["localhost"]}, "worker", 0, start=False)


def test_local_server_and_bad_targets():
    server = tf.train.Server.create_local_server()
    assert server.target.startswith("grpc://localhost:")
    with tf.Session(server.target) as sess:
        assert sess.run(tf.constant(3.0) * 2.0) == 6.0
        assert sess.list_devices() == ["/job:localhost/replica:0/task:0/device:CPU:0"]
    with pytest.raises(tf.errors.UnavailableError,
                       match=r"no server serves the session target 'grpc://localhost:9'.*"
                             r"running server targets: grpc://localhost:"):
        tf.Session("grpc://localhost:9")
    with pytest.raises(tf.errors.InvalidArgumentError, match="session target 'local' is not"):
        tf.Session("local")
    with pytest.raises(tf.errors.UnavailableError, match="already in use"):
        tf.train.Server(server.cluster, "localhost", 0)
    with pytest.raises(tf.errors.OutOfRangeError, match="task index 3 out of range"):
        tf.train.Server(ClusterSpec({"worker": 2}), "worker", 3)


def test_an_op_on_a_task_without_a_server_is_unavailable():
    cluster = ClusterSpec({"ps": 1, "worker": 1})
    worker = tf.train.Server(cluster, "worker", 0)
    with tf.device("/job:ps/task:0"):
        v = tf.Variable(1.0, name="v")
    sess = tf.Session(worker.target)
    with pytest.raises(tf.errors.UnavailableError,
                       match=r"op 'v/initial_value' is placed on /job:ps/task:0, but no server "
                             r"runs that task \(address localhost:2223\)"):
        sess.run(v.initializer)
    tf.train.Server(cluster, "ps", 0)
    sess = tf.Session(worker.target)
    sess.run(v.initializer)
    assert sess.run(v) == 1.0


def test_replica_device_setter_round_robin():
    cluster = ClusterSpec({"ps": 2, "worker": 2})
    setter = tf.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:1")
    with tf.device(setter):
        vs = [tf.Variable(float(i), name=f"v{i}") for i in range(5)]
        total = tf.add_n([v.value() for v in vs], name="total")
        with tf.device("/job:ps/task:1"):
            pinned = tf.Variable(0.0, name="pinned")
    assert [v.device for v in vs] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0",
                                      "/job:ps/task:1", "/job:ps/task:0"]
    assert total.device == "/job:worker/task:1" and pinned.device == "/job:ps/task:1"
    assert vs[0].initial_value.device == "/job:worker/task:1"
    servers = start(cluster)
    sess = tf.Session(servers["worker:1"].target)
    sess.run(tf.global_variables_initializer())
    assert sess.run(total) == 10.0
    assert sess.last_placement["v1"] == "/job:ps/replica:0/task:1/device:CPU:0"
    assert tf.train.replica_device_setter(cluster={"worker": 1}) is None


def test_replica_device_setter_greedy_by_byte_size():
    strategy = tf.contrib.training.GreedyLoadBalancingStrategy(
        2, tf.contrib.training.byte_size_load_fn)
    with tf.device(tf.train.replica_device_setter(ps_tasks=2, ps_strategy=strategy)):
        big = tf.get_variable("big", shape=(100, 10))
        small = [tf.get_variable(f"s{i}", shape=(10,)) for i in range(3)]
        medium = tf.get_variable("medium", shape=(50, 10))
    assert big.device == "/job:ps/task:0"
    assert [v.device for v in small] == ["/job:ps/task:1"] * 3
    assert medium.device == "/job:ps/task:1"  # 120 bytes < 4000 bytes
    assert strategy._ps_loads == [4000, 2120]


def test_one_program_launched_as_every_task_from_tf_config():
    """The TF1 launch pattern: the same main() runs as ps or worker, told by TF_CONFIG."""
    cluster = ClusterSpec({"ps": 1, "worker": 2})
    results = {}

    def main(config: TFConfig):
        server = tf.train.Server(config.cluster, config.task_type, config.task_id)
        if config.task_type == "ps":
            server.join()
            return
        graph = tf.Graph()
        with graph.as_default():
            with tf.device(tf.train.replica_device_setter(
                    cluster=config.cluster,
                    worker_device=f"/job:worker/task:{config.task_id}")):
                step = tf.train.get_or_create_global_step()
                w = tf.get_variable("w", initializer=np.zeros(2, np.float32))
                loss = tf.reduce_sum(tf.square(w - 1.0))
                train = tf.train.GradientDescentOptimizer(0.25).minimize(loss, global_step=step)
        sess = tf.Session(server.target, graph=graph)
        if config.is_chief:
            sess.run(tf.variables_initializer([step, w]) if False else
                     [step.initializer, w.initializer])
        sess.run(train)
        results[config.task.name] = (int(sess.run(step)), sess.run(w).tolist())

    for name in ("ps:0", "worker:0", "worker:1"):
        job, index = name.split(":")
        main(TFConfig.from_json(TFConfig(cluster, job, int(index)).to_json()))
    assert results == {"worker:0": (1, [0.5, 0.5]), "worker:1": (2, [0.75, 0.75])}
