"""simdist.graph: TF1 graphs, ops, variables, gradients and optimizers checked against numpy."""

import numpy as np
import pytest

import simdist.graph as tf


pytestmark = pytest.mark.usefixtures("fresh_tf1")


def run(fetches, feed=None, init=True):
    with tf.Session() as sess:
        if init:
            sess.run(tf.global_variables_initializer())
        return sess.run(fetches, feed)


# -- graph building -------------------------------------------------------------------------------

def test_unique_names_and_scopes():
    a = tf.constant(1.0)
    b = tf.constant(2.0)
    with tf.name_scope("layer"):
        c = tf.add(a, b)
        d = tf.add(a, b, name="sum")
    assert [a.op.name, b.op.name, c.op.name, d.op.name] == ["Const", "Const_1", "layer/Add",
                                                             "layer/sum"]  # TF's names
    assert c.op.type == "AddV2" and c.name == "layer/Add:0"
    assert c.consumers() == [] and a.consumers() == [c.op, d.op]
    g = tf.get_default_graph()
    assert g.get_tensor_by_name("layer/sum:0") is d
    with pytest.raises(tf.errors.NotFoundError, match="no operation named 'nope'"):
        g.get_operation_by_name("nope")


def test_variable_scope_reuse_and_names():
    with tf.variable_scope("net"):
        w = tf.get_variable("w", shape=(2, 3))
    with tf.variable_scope("net", reuse=True):
        assert tf.get_variable("w") is w
    assert w.op.name == "net/w" and w.name == "net/w:0" and w.shape == (2, 3)
    assert w.initializer.name == "net/w/Assign" and w.value().op.name == "net/w/read"
    with pytest.raises(tf.errors.InvalidArgumentError, match="Variable net/w already exists"):
        with tf.variable_scope("net"):
            tf.get_variable("w", shape=(2, 3))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Variable net/v does not exist"):
        with tf.variable_scope("net", reuse=True):
            tf.get_variable("v", shape=(1,))
    assert tf.trainable_variables() == [w]


# -- values ---------------------------------------------------------------------------------------

def test_ops_match_numpy():
    rng = np.random.default_rng(0)
    xa, wa = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(3, 5)).astype(
        np.float32)
    x = tf.placeholder(tf.float32, (None, 3), name="x")
    w = tf.constant(wa)
    h = tf.matmul(x, w)
    fetches = {"relu": tf.nn.relu(h), "sig": tf.sigmoid(h), "sum": tf.reduce_sum(h, axis=1),
               "mean": tf.reduce_mean(h), "argmax": tf.argmax(h, axis=1),
               "sub": tf.subtract(h, 1.0), "gather": tf.gather(w, [2, 0, 2])}
    got = run(fetches, {x: xa}, init=False)
    ha = xa @ wa
    assert np.allclose(got["relu"], np.maximum(ha, 0))
    assert np.allclose(got["sig"], 1 / (1 + np.exp(-ha)), atol=1e-6)
    assert np.allclose(got["sum"], ha.sum(1)) and np.isclose(got["mean"], ha.mean())
    assert (got["argmax"] == ha.argmax(1)).all() and np.allclose(got["sub"], ha - 1)
    assert np.array_equal(got["gather"], wa[[2, 0, 2]])


def test_softmax_cross_entropy_matches_numpy():
    logits = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]], np.float32)
    labels = np.array([[0, 1, 0], [1, 0, 0]], np.float32)
    loss = tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=tf.constant(logits))
    sparse = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[1, 0],
                                                            logits=tf.constant(logits))
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    expected = -np.log(p[[0, 1], [1, 0]])
    got = run([loss, sparse], init=False)
    assert np.allclose(got[0], expected) and np.allclose(got[1], expected)


def test_variables_assign_and_control_dependencies():
    v = tf.Variable(1.0, name="v")
    double = tf.assign(v, v * 2.0)
    with tf.control_dependencies([double]):
        after = tf.identity(v.read_value() + 0.0, name="after")
    stale = v.value() * 1.0  # reads v/read, which has no control edge: TF1's classic race
    add = v.assign_add(10.0)
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(after) == 2.0  # the control edge ran the assign first
        order = [s.name for s in sess.last_trace.spans if s.lane == "CPU:0"]
        assert order.index("Assign") < order.index("read") < order.index("after")
        assert sess.run(add) == 12.0 and sess.run(v) == 12.0 and sess.run(stale) == 12.0


def test_group_runs_every_input_and_returns_none():
    a, b = tf.Variable(0, name="a"), tf.Variable(0, name="b")
    both = tf.group(a.assign_add(1), b.assign_add(2), name="both")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(both) is None
        assert sess.run([a, b]) == [1, 2]


# -- gradients and optimizers ---------------------------------------------------------------------

def test_gradients_of_a_small_network_match_finite_differences():
    rng = np.random.default_rng(1)
    xa = rng.normal(size=(5, 3)).astype(np.float64)
    w0 = rng.normal(size=(3, 4))
    b0 = rng.normal(size=(4,))
    x = tf.constant(xa)
    w, b = tf.Variable(w0, name="w"), tf.Variable(b0, name="b")
    loss = tf.reduce_mean(tf.sigmoid(tf.nn.relu(tf.matmul(x, w) + b)) * 3.0 - 1.0)
    gw, gb = tf.gradients(loss, [w, b])

    def f(wv, bv):
        return np.mean(3 / (1 + np.exp(-np.maximum(xa @ wv + bv, 0))) - 1)
    got_w, got_b = run([gw, gb])
    eps = 1e-6
    num_b = [(f(w0, b0 + eps * e) - f(w0, b0 - eps * e)) / (2 * eps) for e in np.eye(4)]
    assert np.allclose(got_b, num_b, atol=1e-6)
    k = np.zeros_like(w0)
    k[1, 2] = eps
    assert np.isclose(got_w[1, 2], (f(w0 + k, b0) - f(w0 - k, b0)) / (2 * eps), atol=1e-6)


def test_gather_gradient_is_indexed_slices_with_duplicates_summed():
    emb = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2), name="emb")
    ids = tf.constant([1, 1, 3])
    loss = tf.reduce_sum(tf.gather(emb, ids) * 2.0)
    (grad,) = tf.gradients(loss, [emb])
    assert isinstance(grad, tf.IndexedSlices)
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        value = sess.run(grad)
        assert isinstance(value, tf.IndexedSlicesValue)
        assert value.indices.tolist() == [1, 1, 3] and np.allclose(value.values, 2.0)
        assert np.allclose(value.to_dense(), [[0, 0], [4, 4], [0, 0], [2, 2]])
        sess.run(train)
        assert "ScatterSub" in [s.args["type"] for s in sess.last_trace.spans
                                if "type" in s.args]
        expected = np.arange(8, dtype=np.float32).reshape(4, 2) - 0.5 * value.to_dense()
        assert np.allclose(sess.run(emb), expected)  # row 1 moved twice as far as row 3


def _linear_problem():
    rng = np.random.default_rng(2)
    xa, ya = rng.normal(size=(8, 3)).astype(np.float32), rng.normal(size=(8, 1)).astype(
        np.float32)
    w = tf.Variable(np.zeros((3, 1), np.float32), name="w")
    loss = tf.reduce_mean(tf.square(tf.matmul(tf.constant(xa), w) - ya))
    return xa, ya, w, loss


def _numpy_grad(xa, ya, w):
    return 2 * xa.T @ (xa @ w - ya) / len(ya)


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam"])
def test_optimizers_match_their_update_rules(name):
    xa, ya, w, loss = _linear_problem()
    opt = {"sgd": tf.train.GradientDescentOptimizer(0.1),
           "momentum": tf.train.MomentumOptimizer(0.1, momentum=0.9),
           "adam": tf.train.AdamOptimizer(0.1)}[name]
    step = tf.train.get_or_create_global_step()
    train = opt.minimize(loss, global_step=step)
    wn, acc, m, v = np.zeros((3, 1), np.float32), 0, 0, 0
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for t in range(1, 4):
            sess.run(train)
            g = _numpy_grad(xa, ya, wn)
            if name == "sgd":
                wn = wn - 0.1 * g
            elif name == "momentum":
                acc = 0.9 * acc + g
                wn = wn - 0.1 * acc
            else:
                m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
                lr = 0.1 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
                wn = wn - lr * m / (np.sqrt(v) + 1e-8)
            assert np.allclose(sess.run(w), wn, atol=1e-5), (name, t)
        assert sess.run(step) == 3


# -- bad input ------------------------------------------------------------------------------------

def test_uninitialized_variable_is_a_failed_precondition_naming_it():
    v = tf.Variable([1.0, 2.0], name="weights")
    y = v * 2.0
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError,
                           match=r"uninitialized value weights\n\t \[\[\{\{node weights/read"):
            sess.run(y)


def test_placeholder_not_fed_and_bad_feeds():
    x = tf.placeholder(tf.float32, (None, 2), name="x")
    y = x * 2.0
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"must feed a value for placeholder tensor 'x' with dtype "
                                 r"float32 and shape \[\?,2\]"):
            sess.run(y)
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"Cannot feed value of shape \(3,\) for Tensor 'x:0', which "
                                 r"has shape '\(\?, 2\)'"):
            sess.run(y, {x: [1.0, 2.0, 3.0]})
        assert sess.run(y, {x: [[1.0, 2.0]]}).tolist() == [[2.0, 4.0]]


def test_shape_mismatches_name_the_op_and_shapes():
    a = tf.constant(np.ones((2, 3), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Dimensions must be equal, but are 3 and 4 for 'mm' \(op: "
                             r"MatMul\) with input shapes: \(2, 3\), \(4, 5\)"):
        tf.matmul(a, tf.constant(np.ones((4, 5), np.float32)), name="mm")
    with pytest.raises(tf.errors.InvalidArgumentError, match="Dimensions must be equal"):
        tf.add(a, tf.constant(np.ones((4,), np.float32)))
    v = tf.Variable(np.zeros(3, np.float32), name="v")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"shapes of v \(3,\)"):
        v.assign(np.zeros(4, np.float32))
    x = tf.placeholder(tf.float32, None, name="x")
    y = tf.add(x, a, name="late")  # unknown shape: checked when it runs
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Incompatible shapes: \[4\] vs. \[2, 3\] \[\[\{\{node late"):
        run(y, {x: np.zeros(4)}, init=False)


def test_fetching_something_else_is_an_error():
    with pytest.raises(tf.errors.InvalidArgumentError, match="Fetch argument 3 has invalid type"):
        run(3, init=False)
    other = tf.Graph()
    with other.as_default():
        c = tf.constant(1.0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not an element of this session"):
        run(c, init=False)


def test_same_program_same_trace():
    def program():
        tf.reset_default_graph()
        _, _, w, loss = _linear_problem()
        train = tf.train.AdamOptimizer(0.1).minimize(loss)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train)
            return sess.last_trace.to_json(), sess.run(w)
    first, second = program(), program()
    assert first[0] == second[0] and np.array_equal(first[1], second[1])
