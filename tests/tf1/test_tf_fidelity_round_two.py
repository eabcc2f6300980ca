"""The second fidelity round's leftovers (issue 27, items 7 and 9), each against what TF 2.21
does with the same snippet: RunOptions' deadline, ClusterSpec with an empty job, DeviceSpec
with a task given as a string, IndexedSlices without a dense shape, the dtype of a sparse
gradient's dense shape, tf.add's op name, Session.reset of an unknown target. The cases
where simdist differs on purpose are rows of docs/differences.md, checked here as they are."""

import numpy as np
import pytest

import simdist.graph as tf
from simdist.hardware.cluster import ClusterSpecError
from simdist.hardware.device_spec import DeviceSpecError

pytestmark = pytest.mark.usefixtures("fresh_tf1")


def test_run_options_timeout_on_a_blocked_dequeue_is_deadline_exceeded():
    q = tf.FIFOQueue(10, tf.float32)
    x = q.dequeue()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.DeadlineExceededError,
                           match="^Timed out waiting for notification$"):
            sess.run(x, options=tf.RunOptions(timeout_in_ms=300))
        sess.run(q.enqueue(2.0))  # the queue is still usable, as in TF
        assert float(sess.run(x, options=tf.RunOptions(timeout_in_ms=300))) == 2.0


def test_a_run_options_deadline_wins_over_the_sessions():
    q = tf.FIFOQueue(10, tf.float32)
    config = tf.ConfigProto(operation_timeout_in_ms=60_000)
    with tf.Session(config=config) as sess:
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(q.dequeue(), options=tf.RunOptions(timeout_in_ms=5))


def test_an_empty_job_as_tf():
    cluster = tf.train.ClusterSpec({"worker": [], "ps": ["a:1"]})
    assert cluster.jobs == ["worker", "ps"]
    assert cluster.as_dict() == {"worker": {}, "ps": ["a:1"]}
    assert cluster.num_tasks("worker") == 0 and cluster.task_indices("worker") == []
    # TF 2.21: job_tasks("worker") fails with "max() arg is an empty sequence" (a TF bug);
    # simdist answers [] (docs/differences.md, "ClusterSpec empty job")
    assert cluster.job_tasks("worker") == []


def test_clusterspec_refusals_documented_as_differences():
    with pytest.raises(ClusterSpecError, match="TensorFlow accepts this"):
        tf.train.ClusterSpec({"worker": [""]})
    with pytest.raises(ClusterSpecError, match="task index 1.5"):
        tf.train.ClusterSpec({"worker": {1.5: "a:1"}})  # TF: task 1, silently


def test_device_spec_task_as_a_string_as_tf():
    spec = tf.DeviceSpec(job="worker", task="1")
    assert spec.to_string() == "/job:worker/task:1" and spec.task == 1
    assert tf.DeviceSpec(task="1") == tf.DeviceSpec(task=1)
    assert tf.DeviceSpec(replica="2").to_string() == "/replica:2"
    with pytest.raises(DeviceSpecError, match="task 'x'"):
        tf.DeviceSpec(task="x")  # TF: ValueError, invalid literal for int()


def test_indexed_slices_without_dense_shape_as_tf():
    slices = tf.IndexedSlices(tf.constant([[1.0, 2.0]]), tf.constant([0]))
    assert slices.dense_shape is None
    with tf.Session() as sess:  # fetched, TF gives an IndexedSlicesValue without one too
        value = sess.run(slices)
    assert value.dense_shape is None and value.indices.tolist() == [0]
    np.testing.assert_array_equal(value.values, [[1.0, 2.0]])


def test_a_sparse_gradients_dense_shape_is_int32_as_tf():
    v = tf.get_variable("emb", shape=[5, 2])
    (g,) = tf.gradients(tf.reduce_sum(tf.gather(v, [1, 3])), [v])
    assert isinstance(g, tf.IndexedSlices)
    assert (g.dense_shape.dtype, g.indices.dtype, g.dense_shape.op.type) == (
        tf.int32, tf.int32, "Const")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        value = sess.run(g)
    assert value.dense_shape.dtype == np.int32 and value.dense_shape.tolist() == [5, 2]


def test_op_names_of_add_and_divide_as_tf():
    a, b = tf.constant(1.0), tf.constant(2.0)
    c, d, e = tf.add(a, b), tf.add(a, b), a + b
    assert [(t.op.name, t.op.type) for t in (c, d, e)] == [
        ("Add", "AddV2"), ("Add_1", "AddV2"), ("add_2", "AddV2")]  # TF's names
    assert tf.math.add(a, b).op.name == "Add_3"
    assert (tf.divide(a, b).op.name, tf.divide(a, b).op.type) == ("truediv", "RealDiv")


def test_session_reset_of_an_unknown_target_is_not_found_as_tf():
    with pytest.raises(tf.errors.NotFoundError,
                       match=r'^No session factory registered for the given session options: '
                             r'\{target: "nonexistent"\} Registered factories are '
                             r'\{GRPC_SESSION, DIRECT_SESSION\}\.$'):
        tf.Session.reset("nonexistent")
    with pytest.raises(tf.errors.NotFoundError):
        tf.Session.reset("nonexistent", ["c"])
