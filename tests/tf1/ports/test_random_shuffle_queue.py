"""TF's ``random_shuffle_queue_test.py`` (``tensorflow/python/kernel_tests/random/``), ported
to simdist: each scenario drives ``simdist.graph`` with TF 2.21's expected values.

Ported: testEnqueue, testEnqueueWithShape, testEnqueueManyWithShape, testScalarShapes,
testDequeue, testMultiEnqueueAndDequeue, testQueueSizeEmpty, testQueueSizeAfterEnqueueAnd
Dequeue, testEnqueueMany, testEmptyEnqueueMany, testEmptyDequeueMany, testEmptyDequeueUpTo,
testEmptyDequeueManyWithNoShape, testEmptyDequeueUpToWithNoShape, testMultiEnqueueMany,
testDequeueMany, testDequeueUpToNoBlocking, testMultiDequeueMany, testMultiDequeueUpTo
NoBlocking, testHighDimension; and the checks TF 2.21 makes when the queue op runs
(min_after_dequeue against 0 and the capacity, a shared queue's min_after_dequeue and seeds),
with TF's messages. As in TF's tests, values are compared as multisets: the order is random.

Left out: the threaded and blocking tests (testParallelEnqueue, testParallelDequeue,
testEnqueueAndBlockingDequeue, testParallelEnqueueMany and the blocking/close ones: thread
timing, replaced by simulated time in simdist), and the tests of TF's exact random order under
a seed (simdist's order is numpy's: docs/differences.md).
"""

import numpy as np
import pytest

import simdist.graph as tf
from tests.tf1.ports.common import FLOATS, INTS, timed_session

pytestmark = pytest.mark.usefixtures("fresh_tf1")
errors = tf.errors

def test_enqueue_and_enqueue_with_shape():
    q = tf.RandomShuffleQueue(10, 5, tf.float32)
    q2 = tf.RandomShuffleQueue(10, 5, tf.float32, shapes=(3, 2))
    with timed_session() as sess:
        assert sess.run(q.size()) == 0
        sess.run(q.enqueue((10.0,)))
        assert sess.run(q.size()) == 1
        sess.run(q2.enqueue(([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],)))
        with pytest.raises(ValueError):
            q2.enqueue(([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],))


def test_enqueue_many_with_shape():
    q = tf.RandomShuffleQueue(10, 5, [tf.int32, tf.int32], shapes=[(), (2,)])
    q2 = tf.RandomShuffleQueue(10, 5, tf.int32, shapes=(3,))
    with timed_session() as sess:
        sess.run(q.enqueue_many([[1, 2, 3, 4], [[1, 1], [2, 2], [3, 3], [4, 4]]]))
        assert sess.run(q.size()) == 4
        q2.enqueue(([1, 2, 3],))
        q2.enqueue_many(([[1, 2, 3]],))


def test_scalar_shapes():
    q = tf.RandomShuffleQueue(10, 0, [tf.int32, tf.int32], shapes=[(), (1,)])
    with timed_session() as sess:
        sess.run(q.enqueue_many([[1, 2, 3, 4], [[5], [6], [7], [8]]]))
        sess.run(q.enqueue([9, [10]]))
        results = [(int(a), b.tolist()) for a, b in (sess.run(q.dequeue()) for _ in range(2))]
        a, b = sess.run(q.dequeue_many(3))
        results += [(int(a[i]), b[i].tolist()) for i in range(3)]
    assert sorted(results) == [(1, [5]), (2, [6]), (3, [7]), (4, [8]), (9, [10])]


def test_dequeue_multi_enqueue_and_enqueue_many():
    q = tf.RandomShuffleQueue(10, 0, tf.float32)
    q2 = tf.RandomShuffleQueue(10, 0, (tf.int32, tf.float32))
    with timed_session() as sess:
        for x in [10.0, 20.0, 30.0]:
            sess.run(q.enqueue((x,)))
        assert sorted(sess.run(q.dequeue()) for _ in range(3)) == [10.0, 20.0, 30.0]
        for x, y in [(5, 10.0), (10, 20.0), (15, 30.0)]:
            sess.run(q2.enqueue((x, y)))
        assert sorted(tuple(sess.run(q2.dequeue())) for _ in range(3)) == [
            (5, 10.0), (10, 20.0), (15, 30.0)]
        sess.run(q.enqueue_many((FLOATS[:4],)))
        sess.run(q.enqueue_many((FLOATS[:4],)))
        assert sorted(sess.run(q.dequeue()) for _ in range(8)) == sorted(FLOATS[:4] * 2)


def test_sizes_and_empty_enqueue_many():
    q = tf.RandomShuffleQueue(10, 0, tf.float32)
    q2 = tf.RandomShuffleQueue(10, 5, tf.float32)
    assert q.size().shape == ()
    with timed_session() as sess:
        sess.run(q.enqueue((10.0,)))
        assert sess.run(q.size()) == 1
        sess.run(q.dequeue().op)
        assert sess.run(q.size()) == 0
        sess.run(q2.enqueue_many((np.zeros((0, 2, 3), np.float32),)))
        assert sess.run(q2.size()) == 0


def test_empty_dequeue_many_and_up_to():
    q = tf.RandomShuffleQueue(10, 0, tf.float32, shapes=())
    with timed_session() as sess:
        for _ in range(2):
            assert sess.run(q.dequeue_many(0)).tolist() == []
            assert sess.run(q.dequeue_up_to(0)).tolist() == []
            sess.run(q.enqueue((10.0,)))


def test_empty_dequeue_many_and_up_to_with_no_shape():
    q = tf.RandomShuffleQueue(10, 0, tf.float32)
    enqueue = q.enqueue((tf.constant([[10.0, 20.0]]),))
    with timed_session() as sess:
        for take in (q.dequeue_many(0), q.dequeue_up_to(0)):
            for _ in range(2):
                with pytest.raises(errors.InvalidArgumentError,
                                   match="require the components to have specified shapes"):
                    sess.run(take)
                sess.run(enqueue)


def test_multi_enqueue_many():
    q = tf.RandomShuffleQueue(10, 0, (tf.float32, tf.int32))
    with timed_session() as sess:
        sess.run(q.enqueue_many((FLOATS[:4], INTS[:4])))
        sess.run(q.enqueue_many((FLOATS[:4], INTS[:4])))
        got = sorted((float(f), n.tolist()) for f, n in (sess.run(q.dequeue())
                                                         for _ in range(8)))
    assert got == sorted(list(zip(FLOATS[:4], INTS[:4])) * 2)


def test_dequeue_many_and_up_to_no_blocking():
    for take in ("dequeue_many", "dequeue_up_to"):
        tf.reset_default_graph()
        q = tf.RandomShuffleQueue(10, 0, tf.float32, ((),))
        dequeued = getattr(q, take)(5)
        with timed_session() as sess:
            sess.run(q.enqueue_many((FLOATS,)))
            results = sess.run(dequeued).tolist() + sess.run(dequeued).tolist()
        assert sorted(results) == FLOATS


@pytest.mark.parametrize("take, shapes", [("dequeue_many", ((4,), (4, 2))),
                                          ("dequeue_up_to", ((None,), (None, 2)))])
def test_multi_dequeue_many_and_up_to(take, shapes):
    q = tf.RandomShuffleQueue(10, 0, (tf.float32, tf.int32), shapes=((), (2,)))
    dequeued, single = getattr(q, take)(4), q.dequeue()
    assert (dequeued[0].shape, dequeued[1].shape) == shapes
    assert (single[0].shape, single[1].shape) == ((), (2,))
    results = []
    with timed_session() as sess:
        sess.run(q.enqueue_many((FLOATS, INTS)))
        for _ in range(2):
            f, n = sess.run(dequeued)
            results += list(zip(f.tolist(), n.tolist()))
        for _ in range(2):
            f, n = sess.run(single)
            results.append((float(f), n.tolist()))
    assert sorted(results) == sorted(zip(FLOATS, INTS))


def test_high_dimension():
    q = tf.RandomShuffleQueue(10, 0, tf.int32, ((4, 4, 4, 4)))
    elems = np.array([[[[[x] * 4] * 4] * 4] * 4 for x in range(10)], np.int32)
    with timed_session() as sess:
        sess.run(q.enqueue_many((elems,)))
        got = sess.run(q.dequeue_many(10)).tolist()
    assert sorted(got) == sorted(elems.tolist())


@pytest.mark.parametrize("capacity, least, message", [
    (10, -1, "min_after_dequeue -1 must be >= 0"),
    (10, 10, "min_after_dequeue 10 must be < capacity 10"),
    (10, 11, "min_after_dequeue 11 must be < capacity 10")])
def test_min_after_dequeue_is_checked_when_the_queue_op_runs(capacity, least, message):
    q = tf.RandomShuffleQueue(capacity, least, tf.float32)
    with timed_session() as sess, pytest.raises(errors.InvalidArgumentError) as error:
        sess.run(q.size())
    assert str(error.value).split("\n")[0] == message


def test_shared_queue_min_after_dequeue_and_seeds():
    tf.RandomShuffleQueue(10, 1, tf.float32, shared_name="sr", name="r1", seed=1)
    r2 = tf.RandomShuffleQueue(10, 2, tf.float32, shared_name="sr", name="r2", seed=1)
    r3 = tf.RandomShuffleQueue(10, 1, tf.float32, shared_name="sr", name="r3", seed=2)
    r4 = tf.RandomShuffleQueue(10, 1, tf.float32, shared_name="sr", name="r4", seed=1)
    assert (r4.queue_ref.op.attrs["seed"], r4.queue_ref.op.attrs["seed2"]) == (87654321, 1)
    with timed_session() as sess:
        sess.run(tf.get_default_graph().get_operation_by_name("r1"))
        assert sess.run(r4.size()) == 0
        for q, message in (
                (r2, "Shared queue 'sr' has min_after_dequeue 1 but requested "
                     "min_after_dequeue was 2."),
                (r3, "Shared queue 'sr' has random seeds (87654321, 1) but requested seeds "
                     "are (87654321, 2).")):
            with pytest.raises(errors.InvalidArgumentError) as error:
                sess.run(q.size())
            assert str(error.value).split("\n")[0] == message
