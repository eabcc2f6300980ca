"""TF's own partitioner tests, ported to simdist: ``partitioned_variables_test.py``
(``tensorflow/python/kernel_tests/variables/``) and the partitioner parts of
``sharded_variable_test.py`` (``tensorflow/python/distribute/``), each scenario driving
simdist with TF 2.21's expected values. Beside them: placement of the parts over ps tasks,
save and restore through the Saver, training through a PartitionedVariable and
``embedding_lookup``'s "mod" and "div" strategies, each checked against TF 2.21.

Left out, as TF-only machinery: resource variables (``use_resource=True``), ``cond`` in
``initialized_value`` (a constant initial value stands in), meta graphs
(``import_meta_graph``), SavedModel and ``tf.function`` tracing of ShardedVariable.
"""

import re

import numpy as np
import pytest

import simdist.distribute as tf2
import simdist.graph as tf
from simdist.distribute.sharded_variable import shard_offsets
from simdist.graph import partitioned_variables
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("fresh_tf1")


# -- PartitionerCreatorsTest -----------------------------------------------------------------------


def _parts(partitioner, name, shape, dtype=tf.float32, **kwargs):
    with tf.variable_scope("root", partitioner=partitioner):
        v = tf.get_variable(name, dtype=dtype, shape=shape, **kwargs)
    return len(v._get_variable_list()), tuple(v._get_partitions())


def test_fixed_size_partitioner():
    assert _parts(tf.fixed_size_partitioner(5, axis=0), "v0", (10, 10)) == (5, (5, 1))


def test_fixed_size_partitioner_int64():
    assert _parts(tf.fixed_size_partitioner(4, axis=0), "v0", [20], tf.int64)[0] == 4


@pytest.mark.parametrize("name, axis, max_shard_bytes, shards, partitions, max_shards", [
    ("v0", 0, 131072, 1, (1, 1, 1, 1), None),   # 65536 bytes: no need to slice
    ("v1", 1, 65536, 1, (1, 1, 1, 1), None),    # exactly one slice
    ("v2", 2, 32768, 2, (1, 1, 2, 1), None),    # 4096 bytes a slice, 8 a shard
    ("v3a", 3, 2048, 32, (1, 1, 1, 32), None),  # one slice a shard
    ("v3b", 3, 1024, 32, (1, 1, 1, 32), None),  # a slice above max_shard_bytes: one a shard
    ("v3c", 3, 1024, 32, (1, 1, 1, 32), 33),    # max_shards that does not bind
    ("v3d", 3, 1024, 2, (1, 1, 1, 2), 2),       # max_shards that does
])
def test_variable_axis_size_partitioner(name, axis, max_shard_bytes, shards, partitions,
                                        max_shards):
    partitioner = tf.variable_axis_size_partitioner(axis=axis, max_shard_bytes=max_shard_bytes,
                                                    max_shards=max_shards)
    assert _parts(partitioner, name, (4, 8, 16, 32)) == (shards, partitions)


def test_variable_axis_size_partitioner_with_strings():
    partitioner = tf.variable_axis_size_partitioner(axis=3, max_shard_bytes=32768,
                                                    bytes_per_string_element=8)
    assert partitioner(shape=(4, 8, 16, 32), dtype="string") == [1, 1, 1, 4]


@pytest.mark.parametrize("max_partitions, axis, min_slice_size, name, shape, shards, parts", [
    (100, 0, 2 << 10, "v0_0", [2048], 4, [4]),
    (100, 0, 256 << 10, "v0", [2048, 1024], 32, [32, 1]),
    (16, 0, 256 << 10, "v1_max", [2048, 1024], 16, [16, 1]),
    (1, 0, 256 << 10, "v2_max", [2048, 1024], 1, [1, 1]),
    (100, 0, 128 << 10, "v3_slice", [2048, 1024], 64, [64, 1]),
    (100, 0, 512 << 10, "v4_slice", [2048, 1024], 16, [16, 1]),
    (100, 1, 256 << 10, "v5_axis", [64, 1024, 1, 3], 3, [1, 3, 1, 1]),
    (100, 3, 256 << 10, "v6_axis", [64, 1024, 1, 3], 3, [1, 1, 1, 3]),
    (100, 0, 256 << 10, "v7_shape", [16, 128, 1024], 16, [16, 1, 1]),
    (100, 0, 256 << 10, "v8_shape", [4, 512, 1024], 4, [4, 1, 1]),
])
def test_min_max_variable_partitioner(max_partitions, axis, min_slice_size, name, shape, shards,
                                      parts):
    partitioner = tf.min_max_variable_partitioner(max_partitions=max_partitions, axis=axis,
                                                  min_slice_size=min_slice_size)
    assert _parts(partitioner, name, shape) == (shards, tuple(parts))


# -- PartitionedVariablesTestCase ------------------------------------------------------------------


def _specs(parts):
    return [v._save_slice_info.spec for v in parts]


def _value(parts, axis):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return np.concatenate(sess.run(list(parts)), axis)


def test_vec_constant_init():
    vs = tf.create_partitioned_variables([4], [4], tf.constant([1, 2, 3, 4]))
    np.testing.assert_array_equal(_value(vs, 0), [1, 2, 3, 4])
    assert [v.dtype for v in vs] == [tf.int32] * 4
    assert _specs(vs) == ["4 0,1", "4 1,1", "4 2,1", "4 3,1"]


def test_constant_init():
    vs = tf.create_partitioned_variables([2, 4], [1, 2], tf.constant([[1, 2, 3, 4],
                                                                     [5, 6, 7, 8]]))
    np.testing.assert_array_equal(_value(vs, 1), [[1, 2, 3, 4], [5, 6, 7, 8]])
    assert [v.dtype for v in vs] == [tf.int32] * 2
    assert _specs(vs) == ["2 4 0,2:0,2", "2 4 0,2:2,2"]


def _names(vs1, vs2):
    full = [vs[0]._save_slice_info.full_name for vs in (vs1, vs2)]
    assert [v.name for v in vs1 + vs2] == [f"{n}/part_{i}:0" for n in full for i in (0, 1)]
    return full


def test_name():
    value = [[1, 2, 3, 4], [5, 6, 7, 8]]
    with tf.variable_scope("hi"):
        vs1 = tf.create_partitioned_variables([2, 4], [1, 2], tf.constant(value))
        vs2 = tf.create_partitioned_variables([2, 4], [1, 2], tf.constant(value))
    assert _names(vs1, vs2) == ["hi/PartitionedVariable", "hi/PartitionedVariable_1"]
    # the same variable, reused
    with tf.variable_scope("hola") as vs:
        vs1 = tf.create_partitioned_variables([2, 4], [1, 2], tf.constant(value),
                                              dtype=tf.int32)
    with tf.variable_scope(vs, reuse=True):
        vs2 = tf.create_partitioned_variables([2, 4], [1, 2], tf.constant(value),
                                              dtype=tf.int32)
    assert _names(vs1, vs2) == ["hola/PartitionedVariable"] * 2
    assert vs1 == vs2
    # a name scope has no effect on the names
    with tf.name_scope("ola"):
        vs1 = tf.create_partitioned_variables([2, 4], [1, 2], tf.constant(value))
        vs2 = tf.create_partitioned_variables([2, 4], [1, 2], tf.constant(value))
    assert _names(vs1, vs2) == ["PartitionedVariable", "PartitionedVariable_1"]


def test_random_init_value():
    rnd = np.random.default_rng(0).uniform(size=(200, 40)).astype(np.float32)
    vs = tf.create_partitioned_variables(rnd.shape, [1, 10], tf.constant(rnd))
    np.testing.assert_allclose(_value(vs, 1), rnd)
    assert [v.dtype for v in vs] == [tf.float32] * 10
    assert _specs(vs) == [f"200 40 0,200:{4 * i},4" for i in range(10)]


def test_random_init_uneven_partitions():
    rnd = np.random.default_rng(1).uniform(size=(20, 43))  # float64
    var_lists = [tf.create_partitioned_variables(rnd.shape, [1, i], tf.constant(rnd))
                 for i in range(1, 10)]
    save_specs = [
        ["20 43 0,20:0,43"],
        ["20 43 0,20:0,22", "20 43 0,20:22,21"],
        ["20 43 0,20:0,15", "20 43 0,20:15,14", "20 43 0,20:29,14"],
        ["20 43 0,20:0,11", "20 43 0,20:11,11", "20 43 0,20:22,11", "20 43 0,20:33,10"],
        ["20 43 0,20:0,9", "20 43 0,20:9,9", "20 43 0,20:18,9", "20 43 0,20:27,8",
         "20 43 0,20:35,8"],
    ]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i, vs in enumerate(var_lists):
            np.testing.assert_allclose(np.concatenate(sess.run(vs), 1), rnd)
            assert [v.dtype for v in vs] == [tf.float64] * len(vs)
            if i < len(save_specs):
                assert _specs(vs) == save_specs[i]


def test_degenerate():
    rnd = np.random.default_rng(2).uniform(size=(10, 43)).astype(np.float32)
    vs = tf.create_partitioned_variables(rnd.shape, [1, 1], tf.constant(rnd))
    np.testing.assert_allclose(_value(vs, 0), rnd)
    assert _specs(vs) == ["10 43 0,10:0,43"]


def test_slice_size_one():
    rnd = np.random.default_rng(3).uniform(size=(10, 43)).astype(np.float32)
    vs = tf.create_partitioned_variables(rnd.shape, [10, 1], tf.constant(rnd))
    np.testing.assert_allclose(_value(vs, 0), rnd)
    assert _specs(vs) == [f"10 43 {i},1:0,43" for i in range(10)]


def _iota_initializer(shape, dtype=tf.float32, partition_info=None):
    assert dtype == tf.float32
    if len(shape) == 1:
        return range(shape[0])
    val = _iota_initializer(shape[1:], dtype)
    return [[(10 ** i) * v for v in val] for i in range(shape[0])]


def test_iota_initializer():
    np.testing.assert_allclose(_iota_initializer([4]), [0., 1., 2., 3.])
    np.testing.assert_allclose(_iota_initializer([4, 2]),
                               [[0., 1.], [0., 10.], [0., 100.], [0., 1000.]])
    vs = tf.create_partitioned_variables([13, 5], [3, 1], _iota_initializer)
    slices = _iota_initializer([5, 5]) + _iota_initializer([4, 5]) + _iota_initializer([4, 5])
    np.testing.assert_allclose(_value(vs, 0), slices)
    assert _specs(vs) == ["13 5 0,5:0,5", "13 5 5,4:0,5", "13 5 9,4:0,5"]


def test_random_initializer():
    var0, var1 = tf.create_partitioned_variables([20, 12], [1, 2],
                                                 tf.random_uniform_initializer())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        val0, val1 = (x.flatten() for x in sess.run([var0, var1]))
    assert np.linalg.norm(val0 - val1) > 1e-6  # each part draws its own values
    var0, var1 = tf.create_partitioned_variables([20, 12], [1, 2],
                                                 tf.random_uniform_initializer(seed=201))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        val0, val1 = (x.flatten() for x in sess.run([var0, var1]))
    np.testing.assert_allclose(val0, val1)  # a seeded initializer: the same values


@pytest.mark.parametrize("shape, slicing", [
    ([10], [1, 1]), ([10, 20], [1]), ([10, 43], [1]), ([10, 43], [1, 2, 3]),
    ([10, 43], [11, 1]), ([10, 43], [20, 1]), ([10, 43], [1, 50]),
])
def test_some_errors(shape, slicing):
    rnd = np.zeros((10, 43), np.float32)
    with pytest.raises(ValueError):
        tf.create_partitioned_variables(shape, slicing, tf.constant(rnd))


def test_some_errors_say_what_tf_says():
    rnd = tf.constant(np.zeros((10, 43), np.float32))
    with pytest.raises(ValueError, match=r"^Expected 0 <= offset < shape but found offset=10, "
                                         r"shape=10 for var_offset=\[10, 0\], "
                                         r"full_shape=\[10, 43\]$"):
        tf.create_partitioned_variables([10, 43], [11, 1], rnd)
    with pytest.raises(ValueError, match=r"^Can only slice a variable along one dimension: "):
        tf.create_partitioned_variables([10, 43], [2, 2], rnd)


def test_control_deps_none():
    c = tf.constant(1.0)
    with tf.control_dependencies([c]):
        d = tf.constant(2.0)  # d gets the control dependency, the partitioned variable not
        var_x = tf.get_variable("x", shape=[2], initializer=tf.ones_initializer(),
                                partitioner=tf.variable_axis_size_partitioner(4))
        before = set(tf.get_default_graph().get_operations())
        var_x.as_tensor()
        reading = [op for op in tf.get_default_graph().get_operations() if op not in before]
    assert d.op.control_inputs == [c.op]
    assert reading and all(op.control_inputs == [] for op in reading)


def test_concat():
    var_x = tf.get_variable("x", initializer=tf.constant([1., 2.]),
                            partitioner=tf.variable_axis_size_partitioner(4))
    c = tf.constant(1.0)
    with tf.control_dependencies([c]):
        before = set(tf.get_default_graph().get_operations())
        value = var_x._concat()
        concat_ops = [op for op in tf.get_default_graph().get_operations() if op not in before]
    assert c.op in [ci for op in concat_ops for ci in op.control_inputs]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(value), sess.run(var_x.as_tensor()))


def _root_v0():
    with tf.variable_scope("root", partitioner=tf.fixed_size_partitioner(5, axis=0)):
        return tf.get_variable("v0", dtype=tf.float32, shape=(10, 10))


def test_save_and_restore_through_the_saver(tmp_path):
    """testMetaGraphSaveLoad without the meta graph: the same partitioning in a new graph."""
    v0 = _root_v0()
    assert len(v0._get_variable_list()) == 5 and v0._get_partitions() == [5, 1]
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "ckpt"))
        previous = sess.run(v0.as_tensor())
    with tf.Graph().as_default():
        v0 = _root_v0()
        assert isinstance(v0, partitioned_variables.PartitionedVariable)
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, path)
            np.testing.assert_array_equal(sess.run(v0.as_tensor()), previous)


def test_restore_into_a_different_partitioning(tmp_path):
    v0 = _root_v0()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "ckpt"))
        previous = sess.run(v0.as_tensor())
    with tf.Graph().as_default():
        with tf.variable_scope("root", partitioner=tf.fixed_size_partitioner(2, axis=0)):
            v0 = tf.get_variable("v0", dtype=tf.float32, shape=(10, 10))
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, path)
            np.testing.assert_array_equal(sess.run(v0.as_tensor()), previous)


def _restore_root_v0(path, partitions=None, shape=(10, 10), part=None):
    """root/v0 in a new graph (partitioned in ``partitions`` along axis 0, or not), restored
    from ``path`` (only its part ``part`` when given); returns its restored value."""
    with tf.Graph().as_default():
        partitioner = tf.fixed_size_partitioner(partitions, axis=0) if partitions else None
        with tf.variable_scope("root", partitioner=partitioner):
            v = tf.get_variable("v0", dtype=tf.float32, shape=shape)
        with tf.Session() as sess:
            if part is None:
                tf.train.Saver().restore(sess, path)
                return sess.run(v.as_tensor() if partitions else v)
            tf.train.Saver([list(v)[part]]).restore(sess, path)
            return sess.run(list(v)[part])


def test_a_partitioned_checkpoint_restores_as_tf_s_tensor_slices_do(tmp_path):
    """What TF 2.21 gives (checked on it): the parts are slices of one key, root/v0, so they
    restore into a plain variable; a checkpoint of part_0 alone restores that part, and
    refuses a partitioning it does not cover or a variable of another shape."""
    v0 = _root_v0()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        whole = tf.train.Saver().save(sess, str(tmp_path / "whole"))
        only_part_0 = tf.train.Saver([list(v0)[0]]).save(sess, str(tmp_path / "part0"))
        previous = sess.run(v0.as_tensor())
    np.testing.assert_array_equal(_restore_root_v0(whole), previous)
    np.testing.assert_array_equal(_restore_root_v0(only_part_0, 5, part=0), previous[:2])
    with pytest.raises(tf.errors.InvalidArgumentError, match="^Does not have sufficient slices "
                       "for partitioned tensor root/v0 to restore in slice_spec: 0,5:0,10$"):
        _restore_root_v0(only_part_0, 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
            "tensor_name = root/v0; shape in shape_and_slice spec [12,10] does not match the "
            "shape stored in checkpoint: [10,10]")):
        _restore_root_v0(whole, 5, shape=(12, 10))
    with tf.Graph().as_default():
        with tf.variable_scope("root"):
            tf.get_variable("other", shape=(1,))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            other = tf.train.Saver().save(sess, str(tmp_path / "other"))
    with pytest.raises(tf.errors.NotFoundError, match="^Key root/v0 not found in checkpoint"):
        _restore_root_v0(other, 5)


# -- beyond TF's test file: what TF 2.21 gives for the same programs ------------------------------


def test_names_and_placement_over_ps_tasks_as_tf():
    with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
        with tf.variable_scope("emb", partitioner=tf.fixed_size_partitioner(3)):
            w = tf.get_variable("w", shape=[10, 4])
    assert (w.name, w.shape, w._get_partitions()) == ("emb/w", (10, 4), [3, 1])
    assert [(v.name, v.shape, v.device, v._save_slice_info.spec) for v in w] == [
        ("emb/w/part_0:0", (4, 4), "/job:ps/task:0", "10 4 0,4:0,4"),
        ("emb/w/part_1:0", (3, 4), "/job:ps/task:1", "10 4 4,3:0,4"),
        ("emb/w/part_2:0", (3, 4), "/job:ps/task:0", "10 4 7,3:0,4")]
    assert [v.name for v in tf.global_variables()] == [v.name for v in w]
    t = tf.convert_to_tensor(w)
    assert (t.name, t.op.type, [i.name for i in t.op.inputs]) == (
        "emb/w:0", "Identity", ["emb/w/ConcatPartitions/concat:0"])


def test_reuse_and_its_errors_as_tf():
    with tf.variable_scope("emb", partitioner=tf.fixed_size_partitioner(3)):
        w = tf.get_variable("w", shape=[10, 4])
    with pytest.raises(ValueError, match="^Partitioned variable with name emb/w already exists"):
        tf.get_variable("emb/w", shape=[10, 4], partitioner=tf.fixed_size_partitioner(3))
    with tf.variable_scope("emb", reuse=True):
        assert tf.get_variable("w", shape=[10, 4],
                               partitioner=tf.fixed_size_partitioner(3)) is w
        with pytest.raises(ValueError, match=r"specified partitions \[2, 1\] and found "
                                             r"partitions \[3, 1\]\.$"):
            tf.get_variable("w", shape=[10, 4], partitioner=tf.fixed_size_partitioner(2))
    tf.get_variable("u", shape=[10, 4])
    with pytest.raises(ValueError, match="^A partitioner was provided, but an unpartitioned "
                                         "version of the variable was found: u."):
        tf.get_variable("u", shape=[10, 4], partitioner=tf.fixed_size_partitioner(3))
    scalar = tf.get_variable("sc", shape=[], partitioner=tf.fixed_size_partitioner(3))
    assert isinstance(scalar, tf.Variable)  # TF: a scalar is never partitioned


def test_training_through_a_partitioned_variable_as_tf():
    """A matmul with the whole value and an embedding lookup ("mod": id i is row i // 4 of
    part i % 4), one step of gradient descent: TF 2.21's values."""
    w = tf.get_variable("w", shape=[6, 2], partitioner=tf.fixed_size_partitioner(4),
                        initializer=np.arange(12, dtype=np.float32).reshape(6, 2))
    x = tf.constant(np.ones((3, 6), np.float32))
    loss = tf.reduce_sum(tf.square(tf.matmul(x, tf.convert_to_tensor(w))))
    looked_up = tf.nn.embedding_lookup(w, [0, 5, 5])
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss + tf.reduce_sum(looked_up))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(looked_up), [[0, 1], [6, 7], [6, 7]])
        sess.run(train)
        np.testing.assert_allclose(sess.run(w.as_tensor()), [
            [-1.81, -1.17], [0.2, 0.84], [2.2, 2.84], [4.18, 4.82], [6.2, 6.84], [8.2, 8.84]],
            rtol=1e-6)
    assert [v.shape for v in w] == [(2, 2), (2, 2), (1, 2), (1, 2)]


def test_embedding_lookup_div_reads_rows_in_order():
    w = tf.get_variable("w", shape=[7, 1], partitioner=tf.fixed_size_partitioner(3),
                        initializer=np.arange(7, dtype=np.float32).reshape(7, 1))
    rows = tf.nn.embedding_lookup(w, [6, 0, 3], partition_strategy="div")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(rows).ravel().tolist() == [6.0, 0.0, 3.0]


# -- sharded_variable_test.py's PartitionerTest, and TF 2.21's answers beside it ----------------


P = tf2.experimental.partitioners


def test_fixed_shards_partitioner():
    assert P.FixedShardsPartitioner(num_shards=2)((10, 3), np.float32) == [2, 1]


def test_min_size_partitioner():
    assert P.MinSizePartitioner(min_shard_bytes=4, max_shards=2)((6, 1), np.float32) == [2, 1]
    assert P.MinSizePartitioner(min_shard_bytes=4, max_shards=10)((6, 1), np.float32) == [6, 1]


def test_max_size_partitioner():
    assert P.MaxSizePartitioner(max_shard_bytes=4)((6, 1), np.float32) == [6, 1]
    assert P.MaxSizePartitioner(max_shard_bytes=4, max_shards=2)((6, 1), np.float32) == [2, 1]
    assert P.MaxSizePartitioner(max_shard_bytes=1024)((6, 1), np.float32) == [1, 1]


def test_tf2_partitioners_edge_cases_as_tf():
    assert P.FixedShardsPartitioner(0)((10, 3), np.float32) == [0, 1]
    assert P.FixedShardsPartitioner(3)((10, 3), np.float32, axis=1) == [1, 3]
    with pytest.raises(IndexError, match="^list index out of range$"):
        P.FixedShardsPartitioner(3)((10, 3), np.float32, axis=5)
    with pytest.raises(IndexError, match="^list index out of range$"):
        P.MaxSizePartitioner(4, 3)((10, 3), np.float32, axis=5)
    with pytest.raises(ValueError, match=r"^Cannot partition variable along axis 5 when shape "
                                         r"is only \(10, 3\)$"):
        P.MinSizePartitioner(4, 3)((10, 3), np.float32, axis=5)


@pytest.mark.parametrize("tf1_partitioner, tf2_partitioner", [
    (tf.fixed_size_partitioner(3), P.FixedShardsPartitioner(3)),
    (tf.min_max_variable_partitioner(4, min_slice_size=64), P.MinSizePartitioner(64, 4)),
    (tf.variable_axis_size_partitioner(100), P.MaxSizePartitioner(100)),
])
def test_tf1_and_tf2_partitioners_cut_a_variable_alike(tf1_partitioner, tf2_partitioner):
    """The same variable, the same parts: TF1's PartitionedVariable and the shards
    ParameterServerStrategy makes with the TF2 partitioner (first rows % parts one longer)."""
    shape = (10, 4)
    w = tf.get_variable("w", shape=shape, partitioner=tf1_partitioner)
    shards = tf2_partitioner(shape, np.float32)[0]
    offsets = shard_offsets(shape[0], shards)
    assert [v.shape[0] for v in w] == [b - a for a, b in zip(offsets, offsets[1:])]


def test_the_guides_example_runs():
    """The example of docs/guides/tf1-core.md's section on partitioned variables."""
    text = (ROOT / "docs" / "guides" / "tf1-core.md").read_text(encoding="utf-8")
    section = text.split("## Partitioned variables", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "tf1-core.md", "exec"), {})
