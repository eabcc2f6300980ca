"""What the ported queue and accumulator tests share: TF's test values and a session whose
blocking ops time out (TF's tests use ``operation_timeout_in_ms`` to see that an op waits)."""

import simdist.graph as tf

#: the float and int pairs TF's queue tests enqueue (``padding_fifo_queue_test``,
#: ``random_shuffle_queue_test``)
FLOATS = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]
INTS = [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [11, 12], [13, 14], [15, 16], [17, 18],
        [19, 20]]


def timed_session():
    """A session whose blocked ops fail with DeadlineExceededError after 50 ms (simulated)."""
    return tf.Session(config=tf.ConfigProto(operation_timeout_in_ms=50))
