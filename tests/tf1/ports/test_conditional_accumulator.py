"""TF's ``conditional_accumulator_test.py`` (``tensorflow/python/kernel_tests/
data_structures/``), ported to simdist: each scenario drives ``simdist.graph`` with TF
2.21's expected values.

Ported: testConstructorWithInvalidArg, testAccumulatorSizeEmpty, testAccumulatorSetGlobalStep,
testAccumulatorApplyGradFloat32, testDtypes (float32 and float64), testAccumulatorMultiple
Accumulators, testAccumulatorApplyAndTakeGradWithShape, testAccumulatorApplyGradWithWrongShape,
testAccumulatorDynamicShape, testAccumulatorWrongDynamicShape, testAccumulatorSizeAfterApplyGrad,
testAccumulatorSizeAfterApplyGradAndTakeGrad, testAccumulatorTakeGradMean, testAccumulatorTake
GradSum, testAccumulatorTakeGradInvalidReductionType, testAccumulatorInvalidTakeGrad,
testAccumulatorRepeatedTakeGradMean, testAccumulatorRepeatedTakeGradSum, testAccumulator
IncrementGlobalStep, testAccumulatorSetGlobalStepPreventsAccumulation, testAccumulatorCancel
(its two threads as simulated clients); and the node_def of the accumulator op, checked on TF
2.21.

Left out: the other threaded tests (testParallelApplyGrad, testParallelTakeGrad, testAccumulator
ApplyAndBlockingTake): their order comes from threads and sleeps that a simulation replaces by
simulated time; float16 in testDtypes (the same path as float32).
"""

import numpy as np
import pytest

import simdist.graph as tf
from tests.tf1.ports.common import timed_session

pytestmark = pytest.mark.usefixtures("fresh_tf1")
errors = tf.errors


def test_node_def_is_tfs():
    q = tf.ConditionalAccumulator(tf.float32, name="Q")
    op = q.accumulator_ref.op
    assert op.type == "ResourceConditionalAccumulator"
    assert op.node_def.attr == {"container": "", "dtype": tf.float32, "shape": None,
                                "shared_name": "", "reduction_type": "MEAN"}


def test_constructor_with_invalid_arg():
    with pytest.raises(ValueError, match="not in: \"MEAN\", \"SUM\""):
        tf.ConditionalAccumulator(tf.float32, name="Q", reduction_type="Invalid")


def test_size_empty_set_global_step_and_apply_float32():
    q = tf.ConditionalAccumulator(tf.float32, name="Q", shape=[1])
    with timed_session() as sess:
        assert sess.run(q.num_accumulated()) == 0
        sess.run(q.set_global_step(1))
        sess.run(q.apply_grad((10.0,), local_step=1))
        assert sess.run(q.num_accumulated()) == 1


def test_dtypes():
    for dtype in (tf.float32, tf.float64):
        q = tf.ConditionalAccumulator(dtype, shape=[1])
        elems = np.arange(10).astype(dtype.as_numpy_dtype)
        with timed_session() as sess:
            for e in elems:
                sess.run(q.apply_grad((e,)))
            assert sess.run(q.take_grad(1)) == sum(elems) / len(elems)


def test_multiple_accumulators():
    accums = [tf.ConditionalAccumulator(tf.float32, name="Q", shape=[1]) for _ in range(4)]
    with timed_session() as sess:
        for i, q in enumerate(accums):
            sess.run(q.apply_grad((i + 10.0,)))
        assert [sess.run(q.take_grad(1)).item() for q in accums] == [10.0, 11.0, 12.0, 13.0]


def test_apply_and_take_grad_with_shape():
    q = tf.ConditionalAccumulator(tf.float32, name="Q", shape=(3, 2))
    elems = [[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]]]
    with timed_session() as sess:
        for x in elems:
            sess.run(q.apply_grad(x))
        np.testing.assert_array_equal(sess.run(q.take_grad(1)), np.mean(elems, axis=0))


def test_apply_grad_with_wrong_shape():
    q = tf.ConditionalAccumulator(tf.float32, name="Q", shape=(3, 2))
    with pytest.raises(ValueError):
        q.apply_grad([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ValueError):
        q.apply_grad([[1.0], [2.0], [3.0]])


def test_dynamic_shape_and_wrong_dynamic_shape():
    q = tf.ConditionalAccumulator(tf.float32, name="Q", shape=None)
    x = tf.placeholder(tf.float32)
    accum = q.apply_grad(x)
    elems = [[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]]]
    with timed_session() as sess:
        for elem in elems:
            sess.run(accum, {x: elem})
        np.testing.assert_array_equal(sess.run(q.take_grad(1)), np.mean(elems, axis=0))
    q = tf.ConditionalAccumulator(tf.float32, name="Q", shape=None)
    accum = q.apply_grad(x)
    with timed_session() as sess:
        sess.run(accum, {x: elems[0]})  # the first gradient fixes the shape
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"^Shape mismatch: expected \[3,2\], got \[2,2\]"):
            sess.run(accum, {x: [[1.0, 2.0], [3.0, 4.0]]})
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"^Shape mismatch: expected \[3,2\], got \[3,1\]"):
            sess.run(accum, {x: [[1.0], [2.0], [3.0]]})


def test_size_after_apply_grad_and_take_grad():
    q = tf.ConditionalAccumulator(tf.float32, name="Q", shape=[1])
    accum, extract = q.apply_grad((10.0,)), q.take_grad(2)
    with timed_session() as sess:
        sizes = []
        for _ in range(2):
            sess.run(accum)
            sizes.append(sess.run(q.num_accumulated()))
        sess.run(extract.op)
        sizes.append(sess.run(q.num_accumulated()))
        accum = q.apply_grad((10.0,), local_step=1)
        for _ in range(4):
            sess.run(accum)
        sizes.append(sess.run(q.num_accumulated()))
        sess.run(extract.op)
        sizes.append(sess.run(q.num_accumulated()))
    assert sizes == [1, 2, 0, 4, 0]


@pytest.mark.parametrize("reduction, first, second", [("MEAN", 15.0, 25.0),
                                                      ("SUM", 30.0, 50.0)])
def test_take_grad_mean_sum_and_repeated(reduction, first, second):
    q = tf.ConditionalAccumulator(tf.float32, name="Q", shape=[1], reduction_type=reduction)
    with timed_session() as sess:
        for x in (10.0, 20.0):
            sess.run(q.apply_grad((x,), local_step=0))
        assert sess.run(q.take_grad(1)) == first
        for x in (20.0, 30.0):
            sess.run(q.apply_grad((x,), local_step=1))
        assert sess.run(q.take_grad(tf.constant(1))) == second


def test_invalid_take_grad():
    q = tf.ConditionalAccumulator(tf.float32, name="Q", shape=[1])
    with timed_session() as sess:
        for x in (10.0, 20.0):
            sess.run(q.apply_grad((x,)))
        with pytest.raises(errors.InvalidArgumentError,
                           match="Argument num_required must be positive, but was -1"):
            sess.run(q.take_grad(-1))


def test_increment_global_step():
    q = tf.ConditionalAccumulator(tf.float32, name="Q", shape=[1])
    global_step = tf.Variable(0, name="global_step")
    new_global_step = tf.add(global_step, 1)  # an int32: set_global_step casts to int64
    inc = tf.assign(global_step, new_global_step)
    set_step = q.set_global_step(new_global_step)
    with timed_session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(set_step)
            sess.run(inc)
        assert sess.run(global_step) == 3


def test_set_global_step_prevents_accumulation():
    q = tf.ConditionalAccumulator(tf.float32, name="Q", shape=[1])
    local_steps = range(1000, 1005)
    accums = [q.apply_grad((0.0 + x,), local_step=x) for x in local_steps]
    with timed_session() as sess:
        for ls in local_steps:
            sess.run(q.set_global_step(ls))
            for accum in accums:
                sess.run(accum)
            kept = [x for x in local_steps if x >= ls]
            assert sess.run(q.take_grad(1)) == sum(kept) / len(kept)


def _closed_while_blocked(build):
    """TF's testAccumulatorCancel (and its queue twin): one thread blocks in ``sess.run``
    on the op ``build()`` makes, another closes the session. Here the threads are simulated
    clients of a one-worker cluster's session; returns what the blocked one raised."""
    server = tf.train.Server(tf.train.ClusterSpec({"worker": ["localhost:2222"]}), "worker", 0)
    try:
        blocked_op = build()
        sess = tf.Session(server.target)
        seen = {}

        def blocked():
            with pytest.raises(errors.CancelledError) as error:
                sess.run(blocked_op)
            seen["error"] = str(error.value)

        tf.simulate_clients({"blocked": blocked, "closer": sess.close})
        with pytest.raises(RuntimeError, match="^Attempted to use a closed Session.$"):
            sess.run(blocked_op)
        return seen["error"]
    finally:
        tf.stop_all_servers()


def test_accumulator_cancel():
    """testAccumulatorCancel: Session.close() cancels a blocked take_grad, CancelledError
    (a session on a server: its master's message, as TF 2.21's MasterSession gives)."""
    def take():
        return tf.ConditionalAccumulator(tf.float32, name="Q", shape=[1]).take_grad(1)

    assert _closed_while_blocked(take) == \
        "Step was cancelled by an explicit call to `Session::Close()`."


def test_a_closed_session_cancels_blocked_queue_ops():
    def dequeue():
        return tf.FIFOQueue(10, tf.float32, shapes=[()], name="q").dequeue()

    assert _closed_while_blocked(dequeue) == \
        "Step was cancelled by an explicit call to `Session::Close()`."
