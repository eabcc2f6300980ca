"""Graph.as_graph_def and import_graph_def: a graph as data and back, as TF's GraphDef."""

import numpy as np
import pytest

import simdist.graph as tf
from simdist.base.errors import InvalidArgumentError

pytestmark = pytest.mark.usefixtures("fresh_tf1")


def _model():
    with tf.device("/cpu:0"):
        w = tf.Variable(np.array([1.0, 2.0], np.float32), name="w")
        x = tf.placeholder(tf.float32, [2], name="x")
        y = tf.reduce_sum(w * x, name="y")
        with tf.control_dependencies([y]):
            step = tf.assign_add(w, x, name="step")
    return w, x, y, step


def test_a_graph_def_lists_every_node_with_its_inputs_device_and_attributes():
    w, x, y, step = _model()
    graph_def = tf.get_default_graph().as_graph_def()
    nodes = {n.name: n for n in graph_def.node}
    assert [n.name for n in graph_def.node] == [op.name for op in
                                                tf.get_default_graph().get_operations()]
    assert nodes["w"].op == "VariableV2" and nodes["w"].device == "/device:CPU:0"
    assert nodes["mul"].input == ("w/read", "x") and nodes["y"].input == ("mul",)
    assert nodes["step"].input[:2] == ("w", "x") and "^y" in nodes["step"].input
    assert nodes["x"].attr["_output_types"] == [tf.float32]
    assert nodes["w/read"].attr["_class"] == ["loc:@w"]  # colocated with its variable


def test_an_imported_graph_runs_as_the_original():
    w, x, y, step = _model()
    graph_def = tf.get_default_graph().as_graph_def()
    copy = tf.Graph()
    with copy.as_default():
        ops = tf.import_graph_def(graph_def, name="copy")
    assert [op.name for op in ops] == ["copy/" + n.name for n in graph_def.node]
    fed = {"x:0": np.array([3.0, 4.0], np.float32)}
    with tf.Session() as sess:
        sess.run(w.initializer)
        expected = [sess.run(y, fed), sess.run(step, fed).tolist(), sess.run(y, fed)]
    with tf.Session(graph=copy) as sess:
        sess.run(copy.get_operation_by_name("copy/w/Assign"))
        fed = {"copy/x:0": fed["x:0"]}
        got = [sess.run("copy/y:0", fed), sess.run("copy/step:0", fed).tolist(),
               sess.run("copy/y:0", fed)]
    assert got == expected


def test_import_refuses_what_is_not_a_graph_def_and_duplicate_names():
    _model()
    graph_def = tf.get_default_graph().as_graph_def()
    with pytest.raises(InvalidArgumentError, match="expected a GraphDef"):
        tf.import_graph_def({"node": []})
    with pytest.raises(InvalidArgumentError, match="Duplicate node name in graph: 'w/initial_value'"):
        tf.import_graph_def(graph_def, name="")
    bad = tf.GraphDef([tf.NodeDef("z", "Identity", "", ("nowhere",))])
    with pytest.raises(InvalidArgumentError, match="input 'nowhere', which names no node"):
        tf.import_graph_def(bad)
    loop = tf.GraphDef([tf.NodeDef("a", "Identity", "", ("b",)),
                        tf.NodeDef("b", "Identity", "", ("a",))])
    with pytest.raises(InvalidArgumentError, match=r"\['a', 'b'\] form a cycle"):
        tf.import_graph_def(loop)


def test_a_partition_graph_imports_with_its_send_and_recv_nodes():
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})
    servers = [tf.train.Server(cluster, "ps", 0), tf.train.Server(cluster, "worker", 0)]
    with tf.device("/job:ps/task:0"):
        v = tf.Variable([1.0, 2.0], name="v")
    with tf.device("/job:worker/task:0"):
        z = tf.reduce_sum(v * 2.0, name="z")
    with tf.Session(servers[1].target) as sess:
        sess.run(v.initializer)
        meta = tf.RunMetadata()
        sess.run(z, options=tf.RunOptions(output_partition_graphs=True), run_metadata=meta)
    worker = tf.Graph()
    with worker.as_default():
        ops = tf.import_graph_def(meta.partition_graphs[1], name="")
    recv = next(op for op in ops if op.type == "_Recv")
    assert recv.attr["tensor_name"] == "edge_0_v/read"
    assert {c.name for c in recv.outputs[0].consumers()} == {"mul"}
