"""simdist.graph's op registry: every op type declared with a gradient decision, every builder's
op type registered, and what each gradient decision does in tf.gradients."""

import numpy as np
import pytest

import simdist.graph as tf
from simdist.graph import array_ops, control_flow_ops, math_ops, nn_ops
from simdist.graph.registry import NO_GRADIENT, NOT_DIFFERENTIABLE, OP_DEFS, register

LOCAL = "/job:localhost/replica:0/task:0"


pytestmark = pytest.mark.usefixtures("fresh_tf1")


def test_every_op_type_has_a_gradient_decision():
    undecided = [name for name, d in OP_DEFS.items()
                 if not callable(d.grad) and d.grad not in (NOT_DIFFERENTIABLE, NO_GRADIENT)]
    assert undecided == []


def test_register_refuses_an_op_type_without_a_gradient_decision():
    with pytest.raises(TypeError, match="grad"):
        register("Undecided", lambda op, args, rt: [])
    with pytest.raises(TypeError, match="grad must be a gradient function"):
        register("Undecided", lambda op, args, rt: [], grad=None)
    assert "Undecided" not in OP_DEFS


def _build_every_op():
    """One call of every public builder of the op families, plus the variable, gradient and
    optimizer ops; returns the names of the builders called."""
    x = tf.placeholder(tf.float32, (2, 3), name="x")
    w = tf.Variable(np.ones((3, 2), np.float32), name="w")
    emb = tf.Variable(np.ones((4, 3), np.float32), name="emb")
    h = tf.matmul(x, w)
    ids = tf.constant([0, 1])
    calls = {
        "convert_to_tensor": lambda: tf.convert_to_tensor(1.0),
        "unary_op": lambda: array_ops.unary_op("Identity", h, None),
        "constant": lambda: tf.constant(1.0),
        "placeholder": lambda: tf.placeholder(tf.int32),
        "placeholder_not_fed": lambda: array_ops.placeholder_not_fed(x.op),
        "identity": lambda: tf.identity(h),
        "zeros": lambda: tf.zeros((2,)),
        "ones": lambda: tf.ones((2,)),
        "zeros_like": lambda: tf.zeros_like(h),
        "ones_like": lambda: tf.ones_like(h),
        "gather": lambda: tf.gather(emb, ids),
        "embedding_lookup": lambda: tf.nn.embedding_lookup(emb, ids),
        "expand_last_dim": lambda: array_ops.expand_last_dim(h),
        "concat_rows": lambda: array_ops.concat_rows([h, h]),
        "no_op": lambda: tf.no_op(),
        "group": lambda: tf.group(h),
        "broadcast_shape": lambda: math_ops.broadcast_shape("AddV2", None, h, h),
        "add": lambda: tf.add(h, 1.0),
        "subtract": lambda: tf.subtract(h, 1.0),
        "multiply": lambda: tf.multiply(h, 2.0),
        "divide": lambda: tf.divide(h, 2.0),
        "add_n": lambda: tf.add_n([h, h]),
        "negative": lambda: tf.negative(h),
        "square": lambda: tf.square(h),
        "sqrt": lambda: tf.sqrt(h),
        "sigmoid": lambda: tf.sigmoid(h),
        "matmul": lambda: tf.matmul(h, w, transpose_b=True),
        "reduce_sum": lambda: tf.reduce_sum(h),
        "reduce_mean": lambda: tf.reduce_mean(h),
        "argmax": lambda: tf.argmax(h, axis=1),
        "fill": lambda: tf.fill([3], tf.reduce_sum(h)),
        "cast": lambda: tf.cast(h, tf.float64),
        "relu": lambda: tf.nn.relu(h),
        "softmax_cross_entropy_with_logits": lambda: tf.nn.softmax_cross_entropy_with_logits(
            labels=tf.ones((2, 2)), logits=h),
        "softmax_cross_entropy_with_logits_v2": (
            lambda: tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.ones((2, 2)),
                                                               logits=h)),
        "sparse_softmax_cross_entropy_with_logits": (
            lambda: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=h)),
    }
    results = {name: build() for name, build in calls.items()}
    tf.assign(w, w * 2.0)
    tf.assign_add(w, w)
    tf.assign_sub(w, w)
    tf.is_variable_initialized(w)
    loss = tf.reduce_mean(results["sparse_softmax_cross_entropy_with_logits"]) \
        + tf.reduce_sum(tf.nn.relu(h) + tf.sigmoid(h) + tf.sqrt(tf.square(h)) / 2.0) \
        + tf.reduce_sum(results["gather"]) + tf.reduce_sum(results["embedding_lookup"])
    tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    tf.train.AdamOptimizer(0.1).minimize(loss)
    _build_every_data_flow_op()
    return set(calls)


def _build_every_data_flow_op():
    """Every queue kind and every queue op, and the accumulator's ops."""
    queues = [tf.FIFOQueue(2, tf.float32, shapes=[()]),
              tf.PaddingFIFOQueue(2, tf.float32, shapes=[(None,)]),
              tf.RandomShuffleQueue(2, 0, tf.float32, shapes=[()]),
              tf.PriorityQueue(2, [tf.float32], shapes=[()])]
    q = queues[0]
    q.enqueue(1.0), q.enqueue_many([[1.0]]), q.dequeue(), q.dequeue_many(1)
    q.dequeue_up_to(1), q.close(), q.size(), q.is_closed()
    acc_var = tf.Variable(1.0, name="saved")
    acc = tf.ConditionalAccumulator(tf.float32, shape=())
    acc.apply_grad(1.0), acc.take_grad(1), acc.num_accumulated(), acc.set_global_step(1)
    sparse = tf.SparseConditionalAccumulator(tf.float32, shape=())
    sparse.apply_grad([0], [[1.0]]), sparse.take_indexed_slices_grad(1)
    sparse.num_accumulated(), sparse.set_global_step(1)
    tf.read_record(4, read_us=1.0, seed=0)
    tf.timed_py_func([], 1.0)
    tf.train.Saver([acc_var])  # SaveV2, RestoreV2
    tf.data.make_one_shot_iterator(tf.data.Dataset.from_tensor_slices([1.0, 2.0])).get_next()


def test_every_public_builder_is_covered_here():
    public = {name for module in (array_ops, control_flow_ops, math_ops, nn_ops)
              for name, value in vars(module).items()
              if callable(value) and not name.startswith("_")
              and getattr(value, "__module__", None) == module.__name__}
    assert _build_every_op() == public


def test_every_built_op_type_is_registered_and_every_registered_type_is_built():
    _build_every_op()
    built = {op.type for op in tf.get_default_graph().get_operations()}
    assert built == set(OP_DEFS)


def test_gradient_stops_at_a_not_differentiable_op():
    x = tf.constant([[1.0, 3.0, 2.0]])
    index = tf.cast(tf.argmax(x, axis=1), tf.float32)
    assert tf.gradients(tf.reduce_sum(index), [x]) == [None]


def test_gradient_through_an_op_without_one_is_an_error_naming_it():
    x = tf.constant([[1.0, -2.0]])
    (g,) = tf.gradients(tf.reduce_sum(tf.nn.relu(x)), [x])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="no gradient is defined for op 'gradients/ReluGrad' of type "
                             "ReluGrad"):
        tf.gradients(tf.reduce_sum(g), [x])


def test_placeholder_goes_to_the_gpu_like_tf():
    x = tf.placeholder(tf.float32, (None, 3), name="x")
    y = tf.reduce_sum(x, name="y")
    with tf.Session(machine=tf.Machine(gpus=1)) as sess:
        assert sess.run(y, {x: np.ones((2, 3), np.float32)}) == 6.0
        assert sess.last_placement["x"] == f"{LOCAL}/device:GPU:0"


def test_running_a_fed_placeholder_as_a_target_is_tfs_error():
    x = tf.placeholder(tf.float32, (None, 3), name="x")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"You must feed a value for placeholder tensor 'x' with dtype "
                                 r"float32 and shape \[\?,3\]"):
            sess.run(x.op, {x: np.ones((1, 3), np.float32)})
