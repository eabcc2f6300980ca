"""TF's ``padding_fifo_queue_test.py`` (``tensorflow/python/kernel_tests/data_structures/``),
ported to simdist: each scenario drives ``simdist.graph`` with TF 2.21's expected values.

Ported: testConstructor, testMultiQueueConstructor, testConstructorWithShapes (node_defs),
testEnqueue, testEnqueueWithShape, testEnqueueManyWithShape, testDequeue,
testMultiEnqueueAndDequeue, testQueueSizeEmpty, testQueueSizeAfterEnqueueAndDequeue,
testEnqueueMany, testEmptyEnqueueMany, testEmptyDequeueMany, testEmptyDequeueManyWithDynamic
Shape, testEmptyDequeueUpToWithDynamicShape, testConstructPaddingFIFOQueueWithNoShape,
testMultiEnqueueMany, testMultiEnqueueManyWithPartiallyKnownShapes, testDequeueMany,
testDequeueUpToNoBlocking, testMultiDequeueMany, testMultiDequeueManyWithPartiallyKnownShapes
(the padding of unknown dimensions), and the closed-queue messages (TF's PaddingFIFOQueue
says "FIFOQueue" when an enqueue or a single dequeue meets it closed).

Left out: the threaded tests (testParallelEnqueue, testParallelDequeue,
testEnqueueAndBlockingDequeue and the other blocking ones: thread timing, which simdist's
simulated time replaces; blocking is covered by tests/tf1/test_graph_queues.py), string
components (simdist has numeric dtypes only).
"""

import numpy as np
import pytest

import simdist.graph as tf
from tests.tf1.ports.common import FLOATS, INTS, timed_session

pytestmark = pytest.mark.usefixtures("fresh_tf1")
errors = tf.errors

def test_constructors():
    q = tf.PaddingFIFOQueue(10, tf.float32, ((None,),), name="Q")
    op = q.queue_ref.op
    assert (op.type, op.device) == ("PaddingFIFOQueueV2", "")
    assert op.node_def.attr == {"component_types": [tf.float32], "shapes": [(None,)],
                                "capacity": 10, "container": "", "shared_name": ""}
    q = tf.PaddingFIFOQueue(5, (tf.int32, tf.float32), ((), ()), shared_name="foo", name="Q")
    assert q.queue_ref.op.node_def.attr["shapes"] == [(), ()]
    assert q.queue_ref.op.node_def.attr["shared_name"] == "foo"
    q = tf.PaddingFIFOQueue(5, (tf.int32, tf.float32), shapes=((1, 1, 2, 3), (5, 8)))
    assert q.queue_ref.op.node_def.attr["shapes"] == [(1, 1, 2, 3), (5, 8)]


def test_construct_with_no_shape():
    with pytest.raises(ValueError, match="When providing partial shapes, a list of shapes "
                       "must be provided."):
        tf.PaddingFIFOQueue(10, tf.float32, None)


def test_enqueue_with_shape_and_enqueue_many_with_shape():
    q = tf.PaddingFIFOQueue(10, tf.float32, shapes=((3, 2),))
    q2 = tf.PaddingFIFOQueue(10, [tf.int32, tf.int32], shapes=[(), (2,)])
    with timed_session() as sess:
        sess.run(q.enqueue((10.0 * np.ones((3, 2)),)))
        with pytest.raises(ValueError):
            q.enqueue(([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],))
        assert sess.run(q.size()) == 1
        sess.run(q2.enqueue_many([[1, 2, 3, 4], [[1, 1], [2, 2], [3, 3], [4, 4]]]))
        assert sess.run(q2.size()) == 4


def test_dequeue_multi_enqueue_and_sizes():
    q = tf.PaddingFIFOQueue(10, tf.float32, ((),))
    q2 = tf.PaddingFIFOQueue(10, (tf.int32, tf.float32), ((), ()))
    assert q.size().shape == ()
    with timed_session() as sess:
        assert sess.run(q.size()) == 0
        for x in [10.0, 20.0, 30.0]:
            sess.run(q.enqueue((x,)))
        assert [sess.run(q.dequeue()) for _ in range(3)] == [10.0, 20.0, 30.0]
        for x, y in [(5, 10.0), (10, 20.0), (15, 30.0)]:
            sess.run(q2.enqueue((x, y)))
        assert [tuple(sess.run(q2.dequeue())) for _ in range(3)] == [
            (5, 10.0), (10, 20.0), (15, 30.0)]


def test_enqueue_many_and_empty_ones():
    q = tf.PaddingFIFOQueue(10, tf.float32, ((None, None),))
    with timed_session() as sess:
        sess.run(q.enqueue_many((np.zeros((0, 2, 3), np.float32),)))
        assert sess.run(q.size()) == 0
    q = tf.PaddingFIFOQueue(10, tf.float32, ((),))
    with timed_session() as sess:
        sess.run(q.enqueue_many(([10.0, 20.0, 30.0, 40.0],)))
        sess.run(q.enqueue_many(([10.0, 20.0, 30.0, 40.0],)))
        assert [sess.run(q.dequeue()) for _ in range(8)] == [10.0, 20.0, 30.0, 40.0] * 2


@pytest.mark.parametrize("shape, value", [((), 10.0), ((None,), [10.0])])
def test_empty_dequeue_many_and_up_to(shape, value):
    q = tf.PaddingFIFOQueue(10, tf.float32, shapes=(shape,))
    with timed_session() as sess:
        for _ in range(2):
            assert sess.run(q.dequeue_many(0)).tolist() == []
            assert sess.run(q.dequeue_up_to(0)).tolist() == []
            sess.run(q.enqueue((value,)))


@pytest.mark.parametrize("shape", [(2,), (None,)])
def test_multi_enqueue_many_with_known_and_partial_shapes(shape):
    q = tf.PaddingFIFOQueue(10, (tf.float32, tf.int32), shapes=((), shape))
    with timed_session() as sess:
        sess.run(q.enqueue_many((FLOATS[:4], INTS[:4])))
        sess.run(q.enqueue_many((FLOATS[:4], INTS[:4])))
        for i in range(8):
            f, n = sess.run(q.dequeue())
            assert f == FLOATS[i % 4] and n.tolist() == INTS[i % 4]


def test_dequeue_many_and_up_to_no_blocking():
    for take in ("dequeue_many", "dequeue_up_to"):
        tf.reset_default_graph()
        q = tf.PaddingFIFOQueue(10, tf.float32, ((),))
        with timed_session() as sess:
            sess.run(q.enqueue_many((FLOATS,)))
            assert sess.run(getattr(q, take)(4)).tolist() == FLOATS[0:4]
            assert sess.run(getattr(q, take)(4)).tolist() == FLOATS[4:8]


@pytest.mark.parametrize("shape, many_shape", [((2,), (4, 2)), ((None,), (4, None))])
def test_multi_dequeue_many(shape, many_shape):
    q = tf.PaddingFIFOQueue(10, (tf.float32, tf.int32), shapes=((), shape))
    many, single = q.dequeue_many(4), q.dequeue()
    assert (many[0].shape, many[1].shape) == ((4,), many_shape)
    with timed_session() as sess:
        sess.run(q.enqueue_many((FLOATS, INTS)))
        for start in (0, 4):
            f, n = sess.run(many)
            assert f.tolist() == FLOATS[start:start + 4]
            assert n.tolist() == INTS[start:start + 4]
        f, n = sess.run(single)
        assert f == FLOATS[8] and n.tolist() == INTS[8]


def test_dequeue_many_pads_unknown_dimensions():
    q = tf.PaddingFIFOQueue(10, tf.float32, shapes=[[None, 2]])
    x = tf.placeholder(tf.float32)
    with timed_session() as sess:
        sess.run(q.enqueue([x]), {x: np.ones((3, 2))})
        sess.run(q.enqueue([x]), {x: np.ones((1, 2))})
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"Shape mismatch in tuple component 0. Expected \[\?,2\], "
                                 r"got \[3,3\]"):
            sess.run(q.enqueue([x]), {x: np.ones((3, 3))})
        assert sess.run(q.dequeue_many(2)).tolist() == [
            [[1, 1], [1, 1], [1, 1]], [[1, 1], [0, 0], [0, 0]]]


def test_closed_queue_messages():
    q = tf.PaddingFIFOQueue(2, tf.float32, shapes=[[None]], name="pq")
    with timed_session() as sess:
        sess.run(q.close())
        with pytest.raises(errors.CancelledError, match=r"^FIFOQueue 'pq' is closed\."):
            sess.run(q.enqueue([[1.0]]))
        with pytest.raises(errors.OutOfRangeError, match=r"^FIFOQueue 'pq' is closed and "):
            sess.run(q.dequeue())
        with pytest.raises(errors.OutOfRangeError,
                           match=r"^PaddingFIFOQueue 'pq' is closed and has insufficient "
                                 r"elements \(requested 2, current size 0\)"):
            sess.run(q.dequeue_many(2))
