"""TF's master in simdist: partitions with _Send/_Recv pairs, RunGraph round trips, RunOptions,
RunMetadata and the timeline; the partitions of a two-task graph against real TF's."""

import json

import numpy as np
import pytest

import simdist.graph as tf
from simdist.base.errors import InvalidArgumentError
from simdist.graph import timeline

pytestmark = pytest.mark.usefixtures("fresh_tf1")


def _two_tasks():
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})
    servers = [tf.train.Server(cluster, "ps", 0), tf.train.Server(cluster, "worker", 0)]
    with tf.device("/job:ps/task:0"):
        v = tf.Variable([1.0, 2.0], name="v")
    with tf.device("/job:worker/task:0"):
        x = tf.placeholder(tf.float32, [2], name="x")
        z = tf.reduce_sum(tf.multiply(v, x, name="y"), name="z")
    return servers, v, x, z


FULL = dict(trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True)


def test_a_run_is_partitioned_by_device_with_send_recv_pairs_on_rendezvous_keys():
    servers, v, x, z = _two_tasks()
    with tf.Session(servers[1].target) as sess:
        sess.run(v.initializer)
        meta = tf.RunMetadata()
        assert sess.run(z, {x: [3.0, 4.0]}, options=tf.RunOptions(**FULL),
                        run_metadata=meta) == 11.0
    ps, worker = meta.partition_graphs
    assert [n.op for n in ps.node] == ["VariableV2", "Identity", "_Send"]
    assert {n.device for n in ps.node} == {"/job:ps/replica:0/task:0/device:CPU:0"}
    send = ps.node[-1]
    recv = next(n for n in worker.node if n.op == "_Recv" and not n.attr["client_terminated"])
    assert send.attr["tensor_name"] == recv.attr["tensor_name"] == "edge_0_v/read"
    assert (send.attr["send_device"], send.attr["recv_device"]) == (
        "/job:ps/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0")
    assert send.name == "v/read_S0" and recv.name == "v/read_S1"  # TF's new-name scheme
    y = next(n for n in worker.node if n.name == "y")
    assert y.input == ("v/read_S1", "_recv_x_0")
    feeds_and_fetches = [(n.name, n.op) for n in worker.node if n.attr.get("client_terminated")]
    assert feeds_and_fetches == [("_recv_x_0", "_Recv"), ("_send_z_0", "_Send")]


def test_tensors_that_cross_tasks_travel_as_messages_after_a_run_graph_request():
    servers, v, x, z = _two_tasks()
    with tf.Session(servers[1].target) as sess:
        sess.run(v.initializer)
        sess.run(z, {x: [3.0, 4.0]})
        first = [f.name for f in sess.last_trace.flows]
        sess.run(z, {x: [3.0, 4.0]})
        trace = sess.last_trace
    # the first run of a plan registers its partition with the other task's worker
    assert first == ["RegisterGraph (worker:0 graph 2)",
                     "RegisterGraph response (worker:0 graph 2)",
                     "RunGraph (worker:0 step 2)", "edge_0_v/read (worker:0 step 2)",
                     "RunGraph response (worker:0 step 2)"]
    flows = [f.name for f in trace.flows]
    assert flows == ["RunGraph (worker:0 step 3)", "edge_0_v/read (worker:0 step 3)",
                     "RunGraph response (worker:0 step 3)"]
    request, value, response = trace.flows
    runs = {s.pid: s for s in trace.spans if s.lane == "RunGraph"}
    assert runs["ps:0"].start >= request.t_recv - 100 and value.t_send >= runs["ps:0"].start
    assert runs["worker:0"].end >= response.t_recv  # the master waits for every answer


def test_the_master_caches_one_plan_per_fetches_feeds_and_targets():
    servers, v, x, z = _two_tasks()
    with tf.Session(servers[1].target) as sess:
        sess.run(v.initializer)
        first, second = tf.RunMetadata(), tf.RunMetadata()
        sess.run(z, {x: [1.0, 1.0]}, options=tf.RunOptions(**FULL), run_metadata=first)
        sess.run(z, {x: [2.0, 2.0]}, options=tf.RunOptions(**FULL), run_metadata=second)
        assert first.partition_graphs == second.partition_graphs  # the same plan, reused
        assert len(sess.master._cache) == 2  # the initializer's and z's
        assert sess.run_count == 3


def test_a_variable_read_after_control_dependencies_sees_the_update():
    # the read waits beside the variable for the update, as TF's resource read does
    servers = _two_tasks()[0]
    with tf.device("/job:ps/task:0"):
        step = tf.Variable(0, name="step")
    with tf.device("/job:worker/task:0"):
        bump = tf.assign_add(step, 1)
        with tf.control_dependencies([bump]):
            after = step.read_value()  # a fresh read of the ref (TF1 docs: not tf.identity)
    with tf.Session(servers[1].target) as sess:
        sess.run(step.initializer)
        assert sess.run(after) == 1 and sess.run(after) == 2


def test_step_stats_and_the_timeline_show_every_node_on_its_device():
    servers, v, x, z = _two_tasks()
    with tf.Session(servers[1].target) as sess:
        sess.run(v.initializer)
        meta = tf.RunMetadata()
        sess.run(z, {x: [3.0, 4.0]}, options=tf.RunOptions(trace_level=3), run_metadata=meta)
    nodes = {(d.device.split("/")[1], n.node_name) for d in meta.step_stats.dev_stats
             for n in d.node_stats}
    assert nodes >= {("job:ps", "v"), ("job:ps", "v/read_S0"), ("job:worker", "v/read_S1"),
                     ("job:worker", "y"), ("job:worker", "z")}
    assert meta.partition_graphs == []  # not asked for
    events = json.loads(timeline.Timeline(meta.step_stats).generate_chrome_trace_format())
    ops = [e for e in events["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in ops} >= {"VariableV2", "Mul", "Sum", "_Send", "_Recv"}
    mul = next(e for e in ops if e["args"]["name"] == "y")
    recv = next(e for e in ops if e["args"]["name"] == "v/read_S1")
    assert mul["ts"] >= recv["ts"] + recv["dur"]  # y ran once v's value had arrived


def test_run_options_are_checked_and_timeout_in_ms_ends_a_blocked_run():
    q = tf.FIFOQueue(2, tf.float32)
    take = q.dequeue()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(take, options=tf.RunOptions(timeout_in_ms=5))
        with pytest.raises(InvalidArgumentError, match="trace_level=7"):
            tf.RunOptions(trace_level=7)
        with pytest.raises(InvalidArgumentError, match="expected a tf.RunOptions"):
            sess.run(take, options={"timeout_in_ms": 5})
    with pytest.raises(InvalidArgumentError, match="FULL_TRACE"):
        timeline.Timeline(None)


def test_a_fed_gpu_input_is_copied_from_the_client_device():
    with tf.device("/gpu:0"):
        x = tf.placeholder(tf.float32, [64], name="x")
        y = tf.multiply(x, 2.0, name="y")
    with tf.Session(machine=tf.Machine(gpus=1)) as sess:
        meta = tf.RunMetadata()
        out = sess.run(y, {x: np.ones(64, np.float32)},
                       options=tf.RunOptions(output_partition_graphs=True), run_metadata=meta)
    assert np.allclose(out, 2.0)
    devices = [g.node[0].device.rsplit("/", 1)[-1] for g in meta.partition_graphs]
    assert devices == ["device:CPU:0", "device:GPU:0"]
    cpu = [(n.name, n.op) for n in meta.partition_graphs[0].node]
    assert ("_recv_x_0", "_Recv") in cpu and ("_send_y_0", "_Send") in cpu


@pytest.mark.realtf
@pytest.mark.timeout(180)
def test_partition_graphs_of_a_two_task_graph_match_real_tf():
    from realdist.graph.partitions import real_partitions, sim_partitions

    sim, real = sim_partitions(), real_partitions(timeout=150)
    assert sim["value"] == real["value"] == 11.0
    assert sim["partitions"] == real["partitions"]  # one per task's device
    assert sim["pairs"] == real["pairs"]  # the same _Send/_Recv pairs, feeds and fetches
    assert sim["traced_devices"] == real["traced_devices"]
    assert sim["timeline"] == real["timeline"] and \
        sim["timeline_processes"] == real["timeline_processes"]


def test_device_filters_hide_the_tasks_they_do_not_match():
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"],
                                    "worker": ["localhost:2223", "localhost:2224"]})
    servers = [tf.train.Server(cluster, "ps", 0), tf.train.Server(cluster, "worker", 0),
               tf.train.Server(cluster, "worker", 1)]
    only = tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:1"])
    with tf.Session(servers[2].target, config=only) as sess:
        tasks = {d.split("/device")[0] for d in sess.list_devices()}
    assert tasks == {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:1"}
    with pytest.raises(InvalidArgumentError, match="device_filters entry 'ps'"):
        tf.ConfigProto(device_filters=["ps"])
