"""TF's ``priority_queue_test.py`` (``tensorflow/python/kernel_tests/data_structures/``),
ported to simdist: each scenario drives ``simdist.graph`` with TF 2.21's expected values.

Ported: testRoundTripInsertReadOnceSorts, testRoundTripInsertOnceReadOnceSorts,
testRoundTripInsertOnceReadManySorts, testRoundTripInsertOnceReadOnceLotsSorts,
testInsertingNonInt64Fails, testInsertingNonScalarFails; the side values are float32 and
int32 where TF's are strings (simdist has numeric dtypes only), checked the same way (each
side value belongs to its priority). Beside them, TF 2.21 behaviours checked on the real TF:
construction rules, a timed-out dequeue_many keeps the elements, and a dequeue_up_to on a
closed queue with too few elements takes them, loses them and asks for the rest.

Left out: the multi-threaded tests (testRoundTripInsertMultiThreadedReadOnceSorts,
testRoundTripFillsCapacityMultiThreadedEnqueueAndDequeue, testRoundTripInsertManyMulti
ThreadedReadManyMultithreadedSorts, testRoundTripInsertManyMultiThreadedReadOnceSorts): their
interleaving is the threads'; simdist's sessions run in simulated time (concurrent clients
are covered by tests/tf1/test_graph_queues.py).
"""

import numpy as np
import pytest

import simdist.graph as tf
from tests.tf1.ports.common import timed_session

pytestmark = pytest.mark.usefixtures("fresh_tf1")
errors = tf.errors


def _check_sorted(elem, side_0, side_1, deq_elem, deq_0, deq_1):
    allowed = {}
    for e, v0, v1 in zip(elem, side_0, side_1):
        allowed.setdefault(int(e), []).append((float(v0), int(v1)))
    assert deq_elem.tolist() == sorted(elem.tolist())
    for e, v0, v1 in zip(deq_elem, deq_0, deq_1):
        allowed[int(e)].remove((float(v0), int(v1)))
    assert all(not left for left in allowed.values())


def _elements(n, low, high, seed):
    rng = np.random.default_rng(seed)
    return (rng.integers(low, high, size=n).astype(np.int64),
            rng.random(n).astype(np.float32), rng.integers(0, 1000, size=n).astype(np.int32))


def test_round_trip_insert_read_once_sorts():
    q = tf.PriorityQueue(2000, (tf.float32, tf.int32), ((), ()))
    elem, side_0, side_1 = _elements(100, -5, 5, 0)
    with timed_session() as sess:
        for e, v0, v1 in zip(elem, side_0, side_1):
            sess.run(q.enqueue((e, v0, v1)))
        _check_sorted(elem, side_0, side_1, *sess.run(q.dequeue_many(100)))


def test_round_trip_insert_once_read_once_sorts():
    q = tf.PriorityQueue(2000, (tf.float32, tf.int32), ((), ()))
    elem, side_0, side_1 = _elements(1000, -100, 100, 1)
    with timed_session() as sess:
        sess.run(q.enqueue_many((elem, side_0, side_1)))
        _check_sorted(elem, side_0, side_1, *sess.run(q.dequeue_many(1000)))


def test_round_trip_insert_once_read_many_and_lots_sorts():
    for read in ("many", "lots"):
        tf.reset_default_graph()
        q = tf.PriorityQueue(2000, (tf.int64), (()))
        elem = np.random.default_rng(2).integers(-100, 100, size=1000).astype(np.int64)
        with timed_session() as sess:
            sess.run(q.enqueue_many((elem, elem)))
            if read == "many":
                values = np.hstack([sess.run(q.dequeue_many(100)[0]) for _ in range(10)])
            else:
                dequeue = q.dequeue()
                values = np.hstack([sess.run(dequeue[0]) for _ in range(1000)])
        assert values.tolist() == sorted(elem.tolist())


def test_inserting_non_int64_fails():
    q = tf.PriorityQueue(2000, (tf.float32), (()))
    with pytest.raises(TypeError):
        q.enqueue_many(([1.5, 2.5, 3.5], [1.0, 2.0, 3.0]))


def test_inserting_non_scalar_fails():
    priority, other = tf.placeholder(tf.int64), tf.placeholder(tf.float32)
    q = tf.PriorityQueue(2000, (tf.float32,), (()))
    with timed_session() as sess:
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"Shape mismatch in tuple component 0. Expected \[\], "
                                 r"got \[2\]"):
            sess.run([q.enqueue((priority, other))],
                     {priority: np.array([0, 2], np.int64), other: np.ones((3, 5))})
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"Shape mismatch in tuple component 0. Expected \[2\], "
                                 r"got \[2,2\]"):
            sess.run([q.enqueue_many((priority, other))],
                     {priority: np.array([[0, 2], [3, 4]], np.int64), other: np.ones((2, 3))})


def test_construction_as_tf():
    with pytest.raises(TypeError, match="Expected list for 'shapes' argument to "
                                        "'priority_queue_v2' Op, not None."):
        tf.PriorityQueue(10, [tf.float32])
    with pytest.raises(ValueError, match="All shapes must be fully defined"):
        tf.PriorityQueue(10, [tf.float32], shapes=[[None]])
    with pytest.raises(ValueError, match="Queue names must have the same length as dtypes"):
        tf.PriorityQueue(10, [tf.float32], shapes=[[]], names=["x"])
    q = tf.PriorityQueue(10, [tf.float32], shapes=[[]], names=["p", "x"])
    assert q.names == ["p", "x"]
    assert tf.PriorityQueue(10, [tf.float32], shapes=(())).shapes == [(), ()]


def test_timed_out_dequeue_many_keeps_the_elements():
    q = tf.PriorityQueue(10, [tf.float32], shapes=[[]])
    with timed_session() as sess:
        sess.run(q.enqueue_many([[3, 1, 2], [30.0, 10.0, 20.0]]))
        for take in (q.dequeue_many(5), q.dequeue_up_to(5)):
            with pytest.raises(errors.DeadlineExceededError):
                sess.run(take)
            assert sess.run(q.size()) == 3
        prios, values = sess.run(q.dequeue_many(3))
        assert prios.tolist() == [1, 2, 3] and values.tolist() == [10.0, 20.0, 30.0]


def test_dequeue_up_to_on_a_closed_queue_with_too_few_loses_them():
    q = tf.PriorityQueue(10, [tf.float32], shapes=[[]])
    with timed_session() as sess:
        sess.run(q.enqueue_many([[0, 1], [1.0, 1.0]]))
        sess.run(q.close())
        with pytest.raises(errors.OutOfRangeError,
                           match=r"requested 1, current size 0"):
            sess.run(q.dequeue_up_to(3))
        assert sess.run(q.size()) == 0
