"""Blocking graph kernels and several clients' sessions in one simulation (simulate_clients).

A mailbox made for this test (a Store in the ps task's resource container, a blocking "take"
kernel and a "put" kernel) stands in for TF's queues: the consumer's Session.run blocks in
simulated time until the producer's run puts a value, as a dequeue on an empty FIFOQueue does.
"""

import threading

import numpy as np
import pytest

import simdist.graph as tf
from simdist.sim.core import SimulationDeadlock
from simdist.graph.registry import NOT_DIFFERENTIABLE, OP_DEFS, register
from simdist.sim.resources import Store


def _mailbox(op, rt):
    resources, key = rt.resources(op), (op.container, "mailbox")
    store = resources.lookup(key)
    if store is None:
        store = Store(name=f"mailbox on {resources.task}")
        resources.store(key, store)
    return store


def _take_kernel(op, args, rt):
    items = yield _mailbox(op, rt).get(rt.env)
    return [items[0]]


def _put_kernel(op, args, rt):
    yield _mailbox(op, rt).put(rt.env, [args[0]])
    return []


@pytest.fixture(autouse=True, scope="module")
def mailbox_ops():
    """The two op types exist while this module's tests run (the op registry is global)."""
    register("TestMailboxTake", _take_kernel, grad=NOT_DIFFERENTIABLE, flops=lambda *a: 0,
             stateful=True)
    register("TestMailboxPut", _put_kernel, grad=NOT_DIFFERENTIABLE, flops=lambda *a: 0,
             stateful=True)
    yield
    del OP_DEFS["TestMailboxTake"], OP_DEFS["TestMailboxPut"]


@pytest.fixture
def cluster():
    spec = tf.train.ClusterSpec({"ps": ["localhost:2222"],
                                 "worker": ["localhost:2223", "localhost:2224"]})
    servers = [tf.train.Server(spec, "ps", 0), tf.train.Server(spec, "worker", 0),
               tf.train.Server(spec, "worker", 1)]
    yield servers
    tf.stop_all_servers()


def _mailbox_graph():
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:worker/task:1"):
            a = tf.ones([256, 256])
            product = tf.reduce_sum(tf.matmul(a, a), name="product")
        with tf.device("/job:ps/task:0"):
            take = graph.create_op("TestMailboxTake", [], [(tf.float32, ())], name="take")
            put = graph.create_op("TestMailboxPut", [product], [], name="put")
    return graph, take.outputs[0], put


def test_a_blocked_take_waits_for_another_clients_put(cluster):
    ps, worker0, worker1 = cluster
    graph, take, put = _mailbox_graph()
    runs = {}

    def consumer():
        with tf.Session(worker0.target, graph=graph) as sess:
            value = sess.run(take)
            runs["consumer"] = sess.last_run
            return float(value)

    def producer():
        with tf.Session(worker1.target, graph=graph) as sess:
            sess.run(put)
            runs["producer"] = sess.last_run
            return "put"

    def parameter_server():
        ps.join()  # blocks for good, as on TF; the run ends around it
        return "never here"

    threads = threading.active_count()
    result = tf.simulate_clients({"consumer": consumer, "producer": producer,
                                  "ps": parameter_server})
    assert result.returns == {"consumer": 256.0 * 256 * 256, "producer": "put", "ps": None}
    consumer_run, producer_run = runs["consumer"], runs["producer"]
    assert consumer_run.start_time == producer_run.start_time == 0  # both began at once
    assert consumer_run.end_time >= producer_run.end_time > 0  # ... the take waited the put
    wait = [s for s in result.trace.spans if s.cat == "wait"]
    assert [(s.pid, s.lane, s.name) for s in wait] == [("ps:0", "CPU:0 waits", "take")]
    # the take starts when the consumer's RunGraph request reaches ps:0, one network hop in
    graph_runs = [s for s in result.trace.spans if s.pid == "ps:0" and s.lane == "RunGraph"]
    assert 0 < wait[0].start == min(s.start for s in graph_runs) < 100_000
    assert wait[0].end >= producer_run.end_time - 1_000_000
    assert threading.active_count() == threads  # every client thread has ended


def test_a_take_nobody_serves_is_a_deadlock_report_not_a_hang(cluster):
    _, worker0, _ = cluster
    graph, take, _ = _mailbox_graph()

    def consumer():
        with tf.Session(worker0.target, graph=graph) as sess:
            sess.run(take)

    threads = threading.active_count()
    with pytest.raises(SimulationDeadlock) as error:
        tf.simulate_clients({"consumer": consumer})
    text = str(error.value)
    assert "client consumer waits on process worker:0/RunGraph (worker:0 step 1)" in text
    assert "ps:0/take (TestMailboxTake) waits on get 1 from mailbox on /job:ps" in text
    assert threading.active_count() == threads


def test_an_error_in_one_client_ends_the_run_with_that_error(cluster):
    _, worker0, _ = cluster

    def broken():
        raise ValueError("client bug")

    def waiting():
        cluster[0].join()

    with pytest.raises(ValueError, match="client bug"):
        tf.simulate_clients({"waiting": waiting, "broken": broken})


def test_sessions_of_two_clients_share_variables_and_devices(cluster):
    _, worker0, worker1 = cluster
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            counter = tf.Variable(0, name="counter")
            increment = tf.assign_add(counter, 1)
    with tf.Session(worker0.target, graph=graph) as sess:
        sess.run(counter.initializer)

    def client(server):
        def run():
            with tf.Session(server.target, graph=graph) as sess:
                return [int(sess.run(increment)) for _ in range(3)]
        return run

    result = tf.simulate_clients({"a": client(worker0), "b": client(worker1)})
    seen = result.returns["a"] + result.returns["b"]
    assert sorted(seen) == [1, 2, 3, 4, 5, 6]  # no increment lost, none repeated
    again = tf.simulate_clients({"a": client(worker0), "b": client(worker1)})
    assert again.returns == result.returns | {"a": [x + 6 for x in result.returns["a"]],
                                              "b": [x + 6 for x in result.returns["b"]]}


def test_simulate_clients_rejects_what_is_not_a_dict_of_functions(cluster):
    with pytest.raises(tf.errors.InvalidArgumentError, match="dict {name: function}"):
        tf.simulate_clients([lambda: None])


def test_a_local_session_inside_a_client_is_a_clear_error(cluster):
    def client():
        with tf.Session() as sess:
            sess.run(tf.constant(1.0))

    with pytest.raises(tf.errors.InvalidArgumentError, match="not a local Session"):
        tf.simulate_clients({"c": client})


def test_clients_run_deterministically(tmp_path):
    def once(path):
        spec = tf.train.ClusterSpec({"ps": ["localhost:2222"],
                                     "worker": ["localhost:2223", "localhost:2224"]})
        servers = [tf.train.Server(spec, "ps", 0), tf.train.Server(spec, "worker", 0),
                   tf.train.Server(spec, "worker", 1)]
        graph, take, put = _mailbox_graph()

        def client(server, fetch):
            def run():
                with tf.Session(server.target, graph=graph) as sess:
                    return [np.asarray(sess.run(fetch)).tolist() for _ in range(2)]
            return run
        try:
            result = tf.simulate_clients({"consumer": client(servers[1], take),
                                          "producer": client(servers[2], put)})
        finally:
            tf.stop_all_servers()
        result.trace.save(path)
        return result.returns

    first, second = once(tmp_path / "a.json"), once(tmp_path / "b.json")
    assert first == second == {"consumer": [16777216.0] * 2, "producer": [None, None]}
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
