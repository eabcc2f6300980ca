"""realdist.graph.tf1: the same TF1 programs on real TensorFlow (subprocesses) and in simdist.graph:
identical placement, values, ps assignment and shared-counter sequence."""

import pytest

from realdist.graph import tf1 as real

pytestmark = pytest.mark.realtf


def placement_program(tf):
    """Variables on CPU:0, compute on CPU:1, an unplaced op, and a soft-placed GPU request."""
    def variables_on_cpu0(op):
        return "/cpu:0" if op.type in ("VariableV2", "VarHandleOp") else "/cpu:1"
    with tf.device(variables_on_cpu0):
        w = tf.Variable([[1.0, 2.0], [3.0, 4.0]], name="w")
        x = tf.constant([[1.0, 1.0]], name="x")
        y = tf.matmul(x, w, name="y")
    with tf.device("/job:localhost/task:0"):
        z = tf.add(y, 1.0, name="z")
    with tf.device("/gpu:0"):
        g = tf.multiply(z, 2.0, name="g")
    with tf.control_dependencies([g]):
        after = tf.identity(y, name="after")
    return [y, z, g, after]


def setter_program(tf):
    cluster = tf.train.ClusterSpec({"ps": ["h:1", "h:2", "h:3"], "worker": ["h:4", "h:5"]})
    with tf.device(tf.train.replica_device_setter(cluster=cluster,
                                                  worker_device="/job:worker/task:1")):
        weights = [tf.get_variable(f"layer{i}/w", shape=(i + 1, 2)) for i in range(4)]
        bias = tf.Variable(0.0, name="bias")
        with tf.device("/job:ps/task:2"):
            pinned = tf.Variable(0.0, name="pinned")
        after = tf.Variable(0.0, name="after")
    return weights + [bias, pinned, after]


@pytest.mark.timeout(120)
def test_placement_and_values_agree_with_real_tf():
    sim = real.sim_placement(placement_program, {"CPU": 2}, soft=True)
    tf = real.real_placement(placement_program, {"CPU": 2}, soft=True, timeout=100)
    names = ["w", "x", "y", "z", "g", "after", "w/Assign"]
    assert real.compare_placement(sim, tf, names) == {}
    cpu = "/job:localhost/replica:0/task:0/device:CPU:"
    assert [sim.devices[n] for n in ("w", "y", "z", "g")] == [cpu + "0", cpu + "1", cpu + "0",
                                                             cpu + "0"]
    assert sim.values == tf.values == [[[4.0, 6.0]], [[5.0, 7.0]], [[10.0, 14.0]],
                                       [[4.0, 6.0]]]
    assert real.compare_placement(sim, tf) == {}  # every op name both graphs have


@pytest.mark.timeout(120)
def test_replica_device_setter_assigns_the_same_ps_tasks():
    sim = real.sim_variable_devices(setter_program)
    tf = real.real_variable_devices(setter_program, timeout=100)
    assert sim == tf
    assert [sim[f"layer{i}/w"] for i in range(4)] == ["/job:ps/task:0", "/job:ps/task:1",
                                                       "/job:ps/task:2", "/job:ps/task:0"]
    # bias takes task 1; pinned keeps its task 2 but still uses up a round-robin turn
    assert [sim[n] for n in ("bias", "pinned", "after")] == ["/job:ps/task:1", "/job:ps/task:2",
                                                             "/job:ps/task:0"]


@pytest.mark.timeout(180)
def test_shared_counter_prints_the_same_sequence():
    sim = real.sim_shared_counter((3, 2))
    assert sim == {"client0": [1, 2, 3], "client1": [4, 5], "local": [1, 2, 3]}
    assert real.real_shared_counter((3, 2), timeout=100) == sim


def test_real_program_errors_are_reported_not_hung():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        real.run_python("1 / 0", timeout=30)
    with pytest.raises(real.DeadlineExceededError, match="past 1 s"):
        real.run_python("import time; time.sleep(30)", timeout=1)
