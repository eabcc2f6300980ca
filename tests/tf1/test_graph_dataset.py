"""simdist.graph's tf.data: the values TF gives for each transformation, the end of the data
as TF's OutOfRangeError, and prefetching that overlaps input with training in simulated
time."""

import numpy as np
import pytest

import simdist.graph as tf

pytestmark = pytest.mark.usefixtures("fresh_tf1")
errors = tf.errors


def _read_all(dataset, training=None):
    """Every element of ``dataset``, read in a session (with ``training(element)``'s op run
    beside, when given), and the duration of each run."""
    next_element = tf.data.make_one_shot_iterator(dataset).get_next()
    extra = None if training is None else training(next_element)
    out, durations = [], []
    with tf.Session() as sess:
        try:
            while True:
                fetched = sess.run([next_element] + ([extra] if extra is not None else []))
                out.append(fetched[0])
                durations.append(sess.last_run.duration)
        except errors.OutOfRangeError as error:
            assert str(error).startswith("End of sequence\n\t [[{{node IteratorGetNext")
    return out, durations


def test_slices_map_batch_repeat_as_tf():
    ds = tf.data.Dataset.from_tensor_slices(np.arange(5, dtype=np.int32))
    out, _ = _read_all(ds.map(lambda x: x * 10).batch(2).repeat(2))
    assert [b.tolist() for b in out] == [[0, 10], [20, 30], [40], [0, 10], [20, 30], [40]]
    out, _ = _read_all(tf.data.Dataset.from_tensor_slices(np.arange(5)).batch(
        2, drop_remainder=True))
    assert [b.tolist() for b in out] == [[0, 1], [2, 3]]


def test_tuples_shapes_and_dtypes_of_the_iterator():
    x = np.zeros((6, 3), np.float32)
    y = np.arange(6, dtype=np.int64)
    it = tf.data.make_one_shot_iterator(tf.data.Dataset.from_tensor_slices((x, y)).batch(4))
    features, labels = it.get_next()
    assert (features.shape, labels.shape) == ((None, 3), (None,))
    assert (features.dtype, labels.dtype) == (tf.float32, tf.int64)
    assert features.op.type == "IteratorGetNext"


def test_shuffle_is_a_seeded_permutation_reshuffled_each_epoch():
    ds = tf.data.Dataset.from_tensor_slices(np.arange(8)).shuffle(8, seed=3).repeat(2)
    out, _ = _read_all(ds)
    first, second = [int(v) for v in out[:8]], [int(v) for v in out[8:]]
    assert sorted(first) == sorted(second) == list(range(8))
    assert first != list(range(8)) and first != second


def test_interleave_takes_block_length_from_each_of_cycle_length():
    ds = tf.data.Dataset.from_tensor_slices(np.array([1, 2], np.int32)).interleave(
        lambda x: tf.data.Dataset.from_tensor_slices(np.full(3, x, np.int32)),
        cycle_length=2, block_length=2)
    out, _ = _read_all(ds)
    assert [int(v) for v in out] == [1, 1, 2, 2, 1, 2]


def test_prefetch_overlaps_input_with_training():
    def steps(prefetch):
        tf.reset_default_graph()
        ds = tf.data.Dataset.from_tensor_slices(np.ones((12, 4), np.float32)).map(
            lambda x: x, cost_us=40).batch(2)
        if prefetch:
            ds = ds.prefetch(2)
        def training(batch):  # a step that needs its batch before its matmul can start
            scale = tf.reduce_sum(batch)
            return tf.reduce_sum(tf.matmul(tf.ones([320, 320]) * scale, tf.ones([320, 320])))
        return _read_all(ds, training)[1]

    plain, ahead = steps(False), steps(True)
    assert len(plain) == len(ahead) == 6
    # without prefetch every step waits for its two 40 us map calls before training; with
    # it the next batch is read while this one trains (only the first step waits)
    assert max(ahead[1:]) + 40_000 < min(plain)
    assert ahead[0] == plain[0]


def test_parallel_map_calls_overlap():
    def total(calls):
        tf.reset_default_graph()
        ds = tf.data.Dataset.from_tensor_slices(np.ones(8, np.float32)).map(
            lambda x: x, num_parallel_calls=calls, cost_us=100).batch(8)
        return _read_all(ds)[1][0]

    assert total(4) < total(1) / 3


def test_bad_arguments_are_clear_errors():
    ds = tf.data.Dataset.from_tensor_slices(np.arange(3))
    for call, text in ((lambda: ds.batch(0), "batch_size=0"),
                       (lambda: ds.shuffle(0), "buffer_size=0"),
                       (lambda: ds.prefetch(0), "buffer_size=0"),
                       (lambda: ds.map(abs, num_parallel_calls=0), "num_parallel_calls=0"),
                       (lambda: tf.data.Dataset.from_tensor_slices((np.ones(2), np.ones(3))),
                        "the same first dimension")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=text):
            call()
