"""TF's ``sparse_conditional_accumulator_test.py`` (``tensorflow/python/kernel_tests/
data_structures/``), ported to simdist: each scenario drives ``simdist.graph`` with TF
2.21's expected values.

Ported: testConstructor, testConstructorWithShape (node_defs), testConstructorWithInvalidArg,
testAccumulatorSizeEmpty, testAccumulatorSetGlobalStep, testAccumulatorApplyGradFloat32,
testDtypes (float32, float64), testAccumulatorMultipleAccumulators, testAccumulatorTakeGradMean,
testAccumulatorTakeGradSum, testAccumulatorTakeGradInvalidReductionType,
testAccumulatorRepeatedTakeGrad, testNonVectorIndices, testZeroDimensionValues,
testWrongNonEmptyInputValues, testDynamicNonVectorIndices, testDynamicWrongNonEmptyInputValues,
testEmptyShapeApply, testValidateShape, testReturnShape, testApplyGradtInt32IndicesAndShape.

Left out: the threaded tests (testParallelApplyGradMean/Sum, testParallelTakeGrad,
testAccumulatorApplyAndBlockingTake: thread timing, replaced by simulated time in simdist);
testAccumulatorCancel, the dense one's (``test_conditional_accumulator.py``: the same
cancellation); float16 in testDtypes. TF's IndexedSlices without a dense_shape are
applied with ``apply_grad(indices, values)``, the same op.
"""

import numpy as np
import pytest

import simdist.graph as tf
from tests.tf1.ports.common import timed_session

pytestmark = pytest.mark.usefixtures("fresh_tf1")
errors = tf.errors
F32 = np.float32


def _slices(x):
    """TF's test helper ``_indexedslice``: the non-zero rows of ``x``."""
    x = np.array(x)
    indices = np.where(np.sum(x, tuple(range(1, x.ndim))))[0]
    return indices.tolist(), x[indices], list(x.shape)


def _run_error(q, pattern, sess=None, **kwargs):
    own = sess is None
    sess = sess or timed_session()
    with pytest.raises(errors.InvalidArgumentError, match=pattern):
        sess.run(q.apply_grad(**kwargs))
    if own:
        sess.close()


def test_constructor_node_defs():
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q")
    assert q.accumulator_ref.op.type == "SparseConditionalAccumulator"
    assert q.accumulator_ref.op.node_def.attr == {
        "container": "", "dtype": tf.float32, "shape": None, "shared_name": "",
        "reduction_type": "MEAN"}
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=[1, 5, 2, 8])
    assert q.accumulator_ref.op.node_def.attr["shape"] == (1, 5, 2, 8)


def test_constructor_with_invalid_arg():
    with pytest.raises(ValueError):
        tf.SparseConditionalAccumulator(tf.float32, name="Q", reduction_type="Invalid")


def test_size_empty_set_global_step_and_apply_float32():
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=[3, 3])
    with timed_session() as sess:
        assert sess.run(q.num_accumulated()) == 0
        sess.run(q.set_global_step(1))
        sess.run(q.apply_grad([0, 2], np.array([[0, 0, 1], [3, 0, 4]], F32), local_step=1))
        assert sess.run(q.num_accumulated()) == 1


def test_dtypes():
    for i, dtype in enumerate((tf.float32, tf.float64)):
        q = tf.SparseConditionalAccumulator(dtype, shape=[3, 3, 3])
        total = np.zeros([3, 3, 3], dtype.as_numpy_dtype)
        with timed_session() as sess:
            for e in range(2):
                add = np.zeros([3, 3, 3], dtype.as_numpy_dtype)
                add[i, i, i] = e + 1
                total += add
                indices, values, shape = _slices(add)
                sess.run(q.apply_grad(indices, values, shape))
            got = sess.run(q.take_indexed_slices_grad(1))
        indices, values, _ = _slices(total / 2)
        assert np.asarray(got.indices).tolist() == indices
        np.testing.assert_array_equal(got.values, values)


def test_multiple_accumulators():
    elems = [[[1, 0], [0, 0]], [[0, 1], [0, 0]], [[0, 0], [1, 0]], [[0, 0], [0, 1]]]
    accums = [tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=[2, 2])
              for _ in elems]
    with timed_session() as sess:
        for q, elem in zip(accums, elems):
            indices, values, shape = _slices(np.array(elem, F32))
            sess.run(q.apply_grad(indices, values, shape))
        for q, elem in zip(accums, elems):
            got = sess.run(q.take_indexed_slices_grad(1))
            indices, values, shape = _slices(np.array(elem, F32))
            assert np.asarray(got.indices).tolist() == indices
            np.testing.assert_array_equal(got.values, values)
            assert np.asarray(got.dense_shape).tolist() == shape


@pytest.mark.parametrize("reduction, first, second", [
    ("MEAN", [[0.5, 0.5], [0, 2], [3, 0]], [[5, 5], [0, 20], [30, 0]]),
    ("SUM", [[1, 1], [0, 2], [3, 0]], [[10, 10], [0, 20], [30, 0]])])
def test_take_grad_mean_sum_and_repeated(reduction, first, second):
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=(),
                                        reduction_type=reduction)
    with timed_session() as sess:
        for step, scale in ((0, 1), (1, 10)):
            sess.run(q.apply_grad([0, 1], np.array([[1, 0], [0, 2]], F32) * scale,
                                  local_step=step))
            sess.run(q.apply_grad([0, 2], np.array([[0, 1], [3, 0]], F32) * scale, [3, 2],
                                  local_step=step))
            got = sess.run(q.take_indexed_slices_grad(1))
            assert np.asarray(got.indices).tolist() == [0, 1, 2]
            np.testing.assert_array_equal(got.values, first if step == 0 else second)
            assert np.asarray(got.dense_shape).tolist() == [-1, 2]


def test_non_vector_indices_zero_dimension_values_and_wrong_count():
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=[3, 3])
    _run_error(q, "Input indices should be vector but received shape:",
               grad_indices=[[0, 1], [1, 0]], grad_values=np.array([1, 2], F32))
    _run_error(q, "Values cannot be 0-dimensional.", grad_indices=[0],
               grad_values=np.array(1, F32))
    _run_error(q, " non-empty input values, got ", grad_indices=[0, 1],
               grad_values=np.array([[0, 1, 1]], F32))


def test_dynamic_non_vector_indices_and_wrong_count():
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=[3, 3])
    x_indices, x_values = tf.placeholder(tf.int64), tf.placeholder(tf.float32)
    accum = q.apply_grad(grad_indices=x_indices, grad_values=x_values)
    with timed_session() as sess:
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"Input indices should be vector but received shape: \[2,2\]"):
            sess.run(accum, {x_indices: [[0, 1], [1, 0]], x_values: np.array([1, 2], F32)})
        with pytest.raises(errors.InvalidArgumentError,
                           match="Expected 2 non-empty input values, got 1"):
            sess.run(accum, {x_indices: [0, 1], x_values: np.array([[0, 1, 1]], F32)})


def test_empty_shape_apply():
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=[])
    _run_error(q, "Input indices should be vector", grad_indices=0, grad_values=[1.0],
               grad_shape=[])
    _run_error(q, "Input indices should be vector", grad_indices=0, grad_values=[1.0])
    _run_error(q, "Values cannot be 0-dimensional.", grad_indices=[0], grad_values=1.0,
               grad_shape=[])
    _run_error(q, "Values cannot be 0-dimensional.", grad_indices=[0], grad_values=1.0)
    with timed_session() as sess:
        sess.run(q.apply_grad(grad_indices=[0], grad_values=[1.0], grad_shape=[]))
        sess.run(q.apply_grad(grad_indices=[0], grad_values=[1.0]))


def test_validate_shape():
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=[2, 2, None])
    square = np.array([[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]], F32)
    wide = np.array([[[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]], F32)
    sess = timed_session()

    def bad(pattern, **kwargs):
        _run_error(q, pattern, sess, **kwargs)
    bad("Shape mismatch: expected shape rank at least 3, got 2", grad_indices=[0],
        grad_values=np.array([[1, 2]], F32), grad_shape=[2, 2])
    bad("Shape mismatch: expected shape dim 1 to be 2, got 3", grad_indices=[0],
        grad_values=np.array([[[1, 2], [3, 4], [5, 6]]], F32), grad_shape=[2, 3, 2])
    bad("Shape mismatch: index of slice 0 exceeded limits of shape; index is 3 "
        "exceeded 2", grad_indices=[3], grad_values=np.array([[[1, 2], [3, 4]]], F32))
    bad("Shape mismatch: expected values rank at least 3, got 2",
        grad_indices=[0, 1], grad_values=np.array([[1, 2], [3, 4]], F32))
    bad("Shape mismatch: expected values dim 1 to be 2, got 3", grad_indices=[0],
        grad_values=np.array([[[1, 2], [3, 4], [5, 6]]], F32))
    sess.run(q.apply_grad(grad_indices=[0], grad_values=square))
    bad("Shape mismatch: expected values rank 4, got 3", grad_indices=[0],
        grad_values=np.array([[[1, 2], [3, 4]]], F32))
    bad("Shape mismatch: expected values dim 3 to be 2, got 3", grad_indices=[0],
        grad_values=wide)
    sess.run(q.take_grad(1))
    sess.run(q.apply_grad(grad_indices=[0], grad_values=wide, local_step=1))
    bad("Shape mismatch: expected values dim 3 to be 3, got 2", grad_indices=[0],
        grad_values=square, local_step=1)
    sess.close()


def test_return_shape():
    values = np.array([[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]], F32)
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=[2, None])
    with timed_session() as sess:
        sess.run(q.apply_grad(grad_indices=[0], grad_values=values))
        assert sess.run(q.take_indexed_slices_grad(1)).dense_shape.tolist() == [2, 2, 2, 2]
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=[None, 2])
    wide = np.array([[[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]], F32)
    with timed_session() as sess:
        sess.run(q.apply_grad(grad_indices=[0], grad_values=wide))
        assert sess.run(q.take_indexed_slices_grad(1)).dense_shape.tolist() == [-1, 2, 2, 3]


def test_apply_grad_int32_indices_and_shape():
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=[3, 3])
    indices = tf.constant([0, 2], dtype=tf.int32)
    values = tf.constant([[0, 0, 1], [3, 0, 4]], dtype=tf.float32)
    shape = tf.constant([3, 3], dtype=tf.int32)
    with timed_session() as sess:
        sess.run(q.apply_grad(grad_indices=indices, grad_values=values, grad_shape=shape))
        sess.run(q.apply_indexed_slices_grad(tf.IndexedSlices(values, indices, shape)))
        assert sess.run(q.num_accumulated()) == 2
        got = sess.run(q.take_indexed_slices_grad(1))
        assert np.asarray(got.indices).tolist() == [0, 2]
        np.testing.assert_array_equal(got.values, [[0, 0, 1], [3, 0, 4]])
        assert np.asarray(got.dense_shape).tolist() == [3, 3]
