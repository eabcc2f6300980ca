"""TF behaviours simdist copies (issue 9), checked in the simulator alone; the same snippets
run against real TensorFlow in tests/tf1/test_differential.py."""

import numpy as np
import pytest

import simdist.graph as tf

from tests.differential import sim_uneven_workers

pytestmark = pytest.mark.usefixtures("fresh_tf1")


def test_second_default_and_given_names_count_from_one():
    assert [tf.Variable(1.0).op.name for _ in range(2)] == ["Variable", "Variable_1"]
    assert [tf.Variable(1.0, name="x").op.name for _ in range(2)] == ["x", "x_1"]
    assert tf.get_default_graph().get_tensor_by_name("x_1:0").op.name == "x_1"
    tf.constant(1.0, name="q/")
    with pytest.raises(tf.errors.InvalidArgumentError, match="Duplicate node name"):
        tf.constant(1.0, name="q")


def test_initializers_and_slots_live_with_their_variable_on_the_ps():
    cluster = tf.train.ClusterSpec({"ps": 1, "worker": 1})
    servers = [tf.train.Server(cluster, job, 0) for job in ("ps", "worker")]
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        w = tf.get_variable("w", shape=(256, 256), initializer=tf.zeros_initializer())
        with tf.colocate_with(w):
            near = tf.constant(1.0, name="near")
        train = tf.train.MomentumOptimizer(0.1, 0.9).minimize(tf.reduce_sum(w * w))
    graph = tf.get_default_graph()
    zeros = graph.get_operation_by_name("w/Initializer/zeros")
    assert zeros.device == "" and near.device == w.device == "/job:ps/task:0"
    slot = graph.get_operation_by_name("w/Momentum")
    assert slot.device == "/job:ps/task:0"
    with tf.Session(servers[1].target) as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        ps = "/job:ps/replica:0/task:0/device:CPU:0"
        for name in ("w/Initializer/zeros", "w/Momentum/Initializer/zeros", "w/Assign"):
            assert sess.last_placement[name] == ps
    sends = [s for s in sess.last_trace.spans if s.name.startswith("Send w/Initializer")]
    assert not sends  # the initial value is made on the ps, not shipped there


def test_gradients_flow_through_read_value():
    v = tf.Variable([1.0, 2.0], name="v")
    loss = tf.reduce_sum(v.read_value() * v.read_value())
    (grad,) = tf.gradients(loss, [v])
    train = tf.train.GradientDescentOptimizer(0.25).minimize(loss)
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(grad).tolist() == [2.0, 4.0]
        sess.run(train)
        assert sess.run(v).tolist() == [0.5, 1.0]


def test_tensor_hyper_parameters_and_nesterov():
    step = tf.train.get_or_create_global_step()
    lr = tf.divide(0.5, tf.add(1.0, tf.cast(step, tf.float32)))
    b = tf.Variable([0.5, 4.0], name="b")
    train = tf.train.MomentumOptimizer(lr, tf.constant(0.75), use_nesterov=True).minimize(
        tf.reduce_sum(b * b * b), global_step=step)
    value, accum = np.array([0.5, 4.0], np.float32), np.zeros(2, np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for k in range(3):
            sess.run(train)
            rate, grad = np.float32(0.5 / (1 + k)), 3 * value * value
            accum = accum * np.float32(0.75) + grad
            value = value - (grad * rate + accum * np.float32(0.75) * rate)
        assert np.allclose(sess.run(b), value, rtol=1e-6)


def test_adam_beta_powers_are_float32_on_the_first_variable_and_per_graph():
    b = tf.Variable(np.array([1.0, 2.0]), name="b")
    a = tf.Variable(np.array([0.5]), name="a")
    optimizer = tf.train.AdamOptimizer(0.1)
    with tf.device("/cpu:1"):
        optimizer.minimize(tf.reduce_sum(b * b) + tf.reduce_sum(a), var_list=[b, a])
    power = tf.get_default_graph().get_operation_by_name("beta1_power")
    assert power.outputs[0].dtype == tf.float32 and power.colocate is a.op
    with tf.Graph().as_default() as other:
        z = tf.Variable(np.float32(2.0), name="z")
        optimizer.minimize(z * z)
    assert other.get_operation_by_name("beta1_power").colocate is z.op


def test_replica_device_setter_edge_cases():
    setter = tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:1",
                                            merge_devices=False)
    with tf.device(setter), tf.device("/job:foo"):
        kept = tf.constant(1.0)
    assert kept.device == "/job:foo"
    cluster = {"ps": ["a:1"], "worker": ["b:1"]}
    assert tf.train.replica_device_setter(cluster=cluster, ps_device="/device:CPU:0") is None


def test_a_worker_whose_dataset_ends_first_gets_empty_batches_not_a_deadlock():
    assert sim_uneven_workers() == [[[[0, 1]], [[2, 3]], [[4]]], [[[100]], [[]], [[]]]]
