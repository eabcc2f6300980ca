"""TF's ``fifo_queue_test.py`` (``tensorflow/python/kernel_tests/data_structures/``), ported to
simdist: each scenario drives ``simdist.graph`` with TF 2.21's expected values.

Ported: testConstructor, testMultiQueueConstructor, testConstructorWithShapes (node_defs),
testEnqueue, testEnqueueWithShape, testEnqueueManyWithShape, testMultipleDequeues,
testQueuesDontShare, testEnqueueDictWithoutNames, testDequeue, testMultiEnqueueAndDequeue,
testQueueSizeEmpty, testQueueSizeAfterEnqueueAndDequeue, testEnqueueMany, testEmptyEnqueueMany,
testEmptyDequeueMany, testEmptyDequeueUpTo, testEmptyDequeueManyWithNoShape,
testMultiEnqueueMany, testDequeueMany, testDequeueUpToNoBlocking, testMultiDequeueMany,
testMultiDequeueUpToNoBlocking, testHighDimension, testEnqueueWrongShape, and the closed-queue,
timeout and shared-queue scenarios (testDequeueManyWithTensorParameter's single-thread part,
testClosedQueue..., testSharedQueueSameSession's mismatch checks) with TF's messages.

Left out: testEnqueueHalf and testDequeueHalf (the float32 scenarios in float16), the
eager-only tests (testQueueInFunction's tf.function and resource deletion), the threaded
blocking tests (testParallelEnqueue..., testBlockingDequeue...: their timing is the
threads', which a simulation replaces by simulated time; the blocking itself is covered by
tests/tf1/test_graph_queues.py), and string components (simdist has numeric dtypes only).
"""

import numpy as np
import pytest

import simdist.graph as tf
from tests.tf1.ports.common import timed_session

pytestmark = pytest.mark.usefixtures("fresh_tf1")
errors = tf.errors


def test_constructor():
    q = tf.FIFOQueue(10, tf.float32, name="Q")
    op = q.queue_ref.op
    assert (op.name, op.device, op.type) == ("Q", "/device:CPU:*", "FIFOQueueV2")
    assert op.node_def.attr == {"component_types": [tf.float32], "shapes": [],
                                "capacity": 10, "container": "", "shared_name": ""}


def test_multi_queue_constructor():
    q = tf.FIFOQueue(5, (tf.int32, tf.float32), shared_name="foo", name="Q")
    attr = q.queue_ref.op.node_def.attr
    assert attr["component_types"] == [tf.int32, tf.float32]
    assert (attr["shapes"], attr["capacity"], attr["shared_name"]) == ([], 5, "foo")


def test_constructor_with_shapes():
    q = tf.FIFOQueue(5, (tf.int32, tf.float32), shapes=((1, 1, 2, 3), (5, 8)), name="Q")
    assert q.queue_ref.op.node_def.attr["shapes"] == [(1, 1, 2, 3), (5, 8)]


def test_enqueue_and_enqueue_with_shape():
    q = tf.FIFOQueue(10, tf.float32, shapes=(3, 2))
    with timed_session() as sess:
        sess.run(q.enqueue(([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],)))
        with pytest.raises(ValueError):
            q.enqueue(([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],))
        assert sess.run(q.size()) == 1


def test_enqueue_many_with_shape():
    q = tf.FIFOQueue(10, [tf.int32, tf.int32], shapes=[(), (2,)])
    with timed_session() as sess:
        sess.run(q.enqueue_many([[1, 2, 3, 4], [[1, 1], [2, 2], [3, 3], [4, 4]]]))
        assert sess.run(q.size()) == 4


def test_multiple_dequeues_and_queues_dont_share():
    q = tf.FIFOQueue(10, [tf.int32], shapes=[()])
    q2 = tf.FIFOQueue(10, [tf.int32], shapes=[()])
    with timed_session() as sess:
        sess.run(q.enqueue_many([[1, 2, 3]]))
        assert {int(sess.run(q.dequeue())) for _ in range(3)} == {1, 2, 3}
        sess.run(q.enqueue(1))
        sess.run(q2.enqueue(2))
        assert sess.run(q2.dequeue()) == 2 and sess.run(q.dequeue()) == 1


def test_enqueue_dict_without_names():
    q = tf.FIFOQueue(10, tf.float32)
    with pytest.raises(ValueError, match="must have names"):
        q.enqueue({"a": 12.0})
    with pytest.raises(ValueError, match="must have names"):
        q.enqueue_many({"a": [12.0, 13.0]})


def test_dequeue_and_multi_enqueue_and_dequeue():
    q = tf.FIFOQueue(10, tf.float32)
    q2 = tf.FIFOQueue(10, (tf.int32, tf.float32))
    with timed_session() as sess:
        for x in [10.0, 20.0, 30.0]:
            sess.run(q.enqueue((x,)))
        assert [sess.run(q.dequeue()) for _ in range(3)] == [10.0, 20.0, 30.0]
        for x in [(5, 10.0), (10, 20.0), (15, 30.0)]:
            sess.run(q2.enqueue(x))
        assert [tuple(sess.run(q2.dequeue())) for _ in range(3)] == [
            (5, 10.0), (10, 20.0), (15, 30.0)]


def test_queue_size():
    q = tf.FIFOQueue(10, tf.float32)
    assert q.size().shape == ()
    with timed_session() as sess:
        assert sess.run(q.size()) == 0
        sess.run(q.enqueue((10.0,)))
        assert sess.run(q.size()) == 1
        sess.run(q.dequeue())
        assert sess.run(q.size()) == 0


def test_enqueue_many_and_empty_enqueue_many():
    q = tf.FIFOQueue(10, tf.float32)
    elems = [10.0, 20.0, 30.0, 40.0]
    with timed_session() as sess:
        sess.run(q.enqueue_many((elems,)))
        sess.run(q.enqueue_many((elems,)))
        assert [sess.run(q.dequeue()) for _ in range(8)] == elems * 2
        sess.run(q.enqueue_many((np.zeros((0, 2, 3), np.float32),)))
        assert sess.run(q.size()) == 0


def test_empty_dequeue_many_and_up_to():
    q = tf.FIFOQueue(10, tf.float32, shapes=())
    with timed_session() as sess:
        assert sess.run(q.dequeue_many(0)).tolist() == []
        assert sess.run(q.dequeue_up_to(0)).tolist() == []
        sess.run(q.enqueue((10.0,)))
        assert sess.run(q.dequeue_many(0)).tolist() == []
        assert sess.run(q.dequeue_up_to(0)).tolist() == []


def test_empty_dequeue_many_with_no_shape():
    q = tf.FIFOQueue(10, tf.float32)
    with timed_session() as sess, pytest.raises(errors.InvalidArgumentError,
                                           match="specified shapes"):
        sess.run(q.dequeue_many(0))


def test_multi_enqueue_many():
    q = tf.FIFOQueue(10, (tf.float32, tf.int32))
    floats, ints = [10.0, 20.0, 30.0, 40.0], [[1, 2], [3, 4], [5, 6], [7, 8]]
    with timed_session() as sess:
        sess.run(q.enqueue_many((floats, ints)))
        sess.run(q.enqueue_many((floats, ints)))
        for i in range(8):
            f, n = sess.run(q.dequeue())
            assert f == floats[i % 4] and n.tolist() == ints[i % 4]


def test_dequeue_many_and_up_to_no_blocking():
    elems = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]
    for take in ("dequeue_many", "dequeue_up_to"):
        tf.reset_default_graph()
        q = tf.FIFOQueue(10, tf.float32, ())
        with timed_session() as sess:
            sess.run(q.enqueue_many((elems,)))
            assert sess.run(getattr(q, take)(4)).tolist() == elems[0:4]
            assert sess.run(getattr(q, take)(4)).tolist() == elems[4:8]


def test_multi_dequeue_many_and_up_to():
    q = tf.FIFOQueue(10, (tf.float32, tf.int32), shapes=((), (2,)))
    floats = [float(10 * i) for i in range(1, 11)]
    ints = [[2 * i + 1, 2 * i + 2] for i in range(10)]
    with timed_session() as sess:
        sess.run(q.enqueue_many((floats, ints)))
        many = q.dequeue_many(4)
        f, n = sess.run(many)
        assert f.tolist() == floats[0:4] and n.tolist() == ints[0:4]
        assert (many[0].shape, many[1].shape) == (f.shape, n.shape)
        up_to = q.dequeue_up_to(4)
        assert (up_to[0].shape, up_to[1].shape) == ((None,), (None, 2))
        f, n = sess.run(up_to)
        assert f.tolist() == floats[4:8] and n.tolist() == ints[4:8]
        single = q.dequeue()
        f, n = sess.run(single)
        assert f == floats[8] and n.tolist() == ints[8]
        assert (single[0].shape, single[1].shape) == ((), (2,))


def test_high_dimension():
    q = tf.FIFOQueue(10, tf.int32, (4, 4, 4, 4))
    elems = np.array([[[[[x] * 4] * 4] * 4] * 4 for x in range(10)], np.int32)
    with timed_session() as sess:
        sess.run(q.enqueue_many((elems,)))
        np.testing.assert_array_equal(sess.run(q.dequeue_many(10)), elems)


def test_enqueue_wrong_shape():
    q = tf.FIFOQueue(10, (tf.int32, tf.int32), ((), (2)))
    with pytest.raises(ValueError):
        q.enqueue(([1, 2], [2, 2]))
    with pytest.raises(ValueError):
        q.enqueue_many((7, [[1, 2], [3, 4], [5, 6]]))


def test_enqueue_wrong_shape_at_runtime():
    q = tf.FIFOQueue(10, (tf.int32, tf.int32), ((2, 2), (3, 3)))
    a, b = tf.placeholder(tf.int32), tf.placeholder(tf.int32)
    with timed_session() as sess, pytest.raises(
            errors.InvalidArgumentError, match=r"Expected \[3,3\], got \[3,4\]"):
        sess.run(q.enqueue((a, b)), {a: np.zeros((2, 2)), b: np.zeros((3, 4))})


def test_closed_queue_errors_and_close_twice():
    q = tf.FIFOQueue(10, tf.float32, shapes=())
    with timed_session() as sess:
        sess.run(q.enqueue_many(([10.0, 20.0],)))
        sess.run(q.close())
        with pytest.raises(errors.CancelledError, match="is closed"):
            sess.run(q.enqueue((1.0,)))
        with pytest.raises(errors.OutOfRangeError, match=r"requested 3, current size 2"):
            sess.run(q.dequeue_many(3))
        assert sess.run(q.dequeue_up_to(3)).tolist() == [10.0, 20.0]
        sess.run(q.close(cancel_pending_enqueues=True))  # TF allows it on a closed queue
        with pytest.raises(errors.CancelledError, match="already closed"):
            sess.run(q.close())


def test_dequeue_negative_counts():
    q = tf.FIFOQueue(10, tf.float32, shapes=())
    n = tf.placeholder(tf.int32)
    with pytest.raises(ValueError, match=r"Input 'n' must be >= 0, but is -1"):
        q.dequeue_many(-1)
    with timed_session() as sess:
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"DequeueManyOp requested -1 < 0 elements"):
            sess.run(q.dequeue_many(n), {n: -1})
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"DequeueUpToOp requested -1 < 0 elements"):
            sess.run(q.dequeue_up_to(n), {n: -1})


def test_shared_queue_mismatches():
    tf.FIFOQueue(10, tf.float32, shared_name="q", name="a")
    checks = [
        (tf.FIFOQueue(-1, tf.float32, shared_name="q", name="b"),
         "Shared queue 'q' has capacity 10 but requested capacity was 2147483647"),
        (tf.FIFOQueue(10, tf.int32, shared_name="q", name="c"),
         "Shared queue 'q' has component types float but requested component types were "
         "int32"),
        (tf.FIFOQueue(10, tf.float32, shapes=[[2]], shared_name="q", name="d"),
         "Shared queue 'q' has component shapes [] but requested component shapes were "
         "[[2]]"),
        (tf.PaddingFIFOQueue(10, tf.float32, shapes=[[2]], shared_name="q", name="e"),
         "Expected FIFOQueue, found PaddingFIFOQueueV2")]
    with timed_session() as sess:
        sess.run(tf.get_default_graph().get_operation_by_name("a").outputs[0].op)
        for q, message in checks:
            with pytest.raises(errors.InvalidArgumentError) as error:
                sess.run(q.size())
            assert str(error.value).split("\n")[0] == message
