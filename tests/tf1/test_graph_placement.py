"""simdist.graph placement and execution: device scopes and functions, the placer's priorities,
kernels and soft placement, log_device_placement, GPU memory options, thread pools, Send/Recv."""

import numpy as np
import pytest

import simdist.graph as tf
from simdist.graph.placement import parse_placement_log

LOCAL = "/job:localhost/replica:0/task:0"


pytestmark = pytest.mark.usefixtures("fresh_tf1")


def placed(graph=None, machine=None, **config):
    """Run nothing, just place: {op name: device}."""
    sess = tf.Session(graph=graph, config=tf.ConfigProto(**config), machine=machine)
    sess._placer.place(sess.graph.get_operations())
    return sess.last_placement


# -- scopes ---------------------------------------------------------------------------------------

def test_nested_scopes_merge_partial_specs():
    with tf.device("/job:ps"):
        with tf.device("/task:1"):
            with tf.device("/gpu:0"):
                a = tf.constant(1.0, name="a")
            b = tf.constant(2.0, name="b")
        with tf.device("/job:worker/cpu:0"):
            c = tf.constant(3.0, name="c")
        with tf.device(None):
            d = tf.constant(4.0, name="d")
    assert a.device == "/job:ps/task:1/device:GPU:0"
    assert b.device == "/job:ps/task:1"
    assert c.device == "/job:worker/device:CPU:0"
    assert d.device == ""


def test_device_function_sees_the_op_and_inner_scopes_fill_it():
    seen = []

    def vars_on_cpu(op):
        seen.append(op.type)
        return "/cpu:0" if op.type == "VariableV2" else "/gpu:0"
    with tf.device("/job:worker/task:0"), tf.device(vars_on_cpu):
        v = tf.Variable(1.0, name="v")
        y = tf.multiply(v, 2.0, name="y")
    assert v.device == "/job:worker/task:0/device:CPU:0"
    assert y.device == "/job:worker/task:0/device:GPU:0"
    assert "VariableV2" in seen and "Mul" in seen
    # an outer string fills only the fields the function left open
    with tf.device("/job:ps/task:1"), tf.device(lambda op: "/gpu:1"):
        z = tf.constant(0.0, name="z")
    assert z.device == "/job:ps/task:1/device:GPU:1"
    with pytest.raises(tf.errors.InvalidArgumentError, match="returned 42"):
        with tf.device(lambda op: 42):
            tf.constant(1.0)


def test_placer_priorities():
    with tf.device("/gpu:1"):
        explicit = tf.constant(1.0, name="explicit")
    free = tf.constant(2.0, name="free")
    v = tf.Variable(3.0, name="v")
    with tf.device("/gpu:1"):
        tf.identity(v.value(), name="read_on_gpu1")
    machine = tf.Machine(gpus=2)
    sess = tf.Session(machine=machine)
    sess.run([explicit, free])
    where = sess.last_placement
    assert where["explicit"] == f"{LOCAL}/device:GPU:1"  # the scope
    assert where["free"] == f"{LOCAL}/device:GPU:0"  # the default: GPU:0 when there is one
    assert where["v/read"] == where["v"] == where["v/Assign"]  # colocated with the variable
    assert where["read_on_gpu1"] == f"{LOCAL}/device:GPU:1"
    # a node placed in an earlier run keeps its device, even if its request changes
    explicit.op._set_device("/gpu:0")
    sess.run(explicit)
    assert sess.last_placement["explicit"] == f"{LOCAL}/device:GPU:1"
    assert tf.Session(machine=tf.Machine(gpus=0)).list_devices() == [f"{LOCAL}/device:CPU:0"]


# -- kernels, soft placement, unknown devices -----------------------------------------------------

def test_int32_variable_has_no_gpu_kernel_unless_soft_placement():
    with tf.device("/gpu:0"):
        tf.Variable(0, name="counter")
        tf.Variable(1.0, name="x")
    machine = tf.Machine(gpus=1)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"(?s)Cannot assign a device for operation counter: Could not satisfy "
                             r"explicit device specification '/device:GPU:0' because no "
                             r"supported kernel for GPU devices is available.*int32.*"
                             r"allow_soft_placement"):
        placed(machine=machine)
    where = placed(machine=tf.Machine(gpus=1), allow_soft_placement=True)
    assert where["counter"] == where["counter/Assign"] == f"{LOCAL}/device:CPU:0"
    assert where["x"] == f"{LOCAL}/device:GPU:0"


def test_unknown_or_out_of_range_devices():
    with tf.device("/gpu:3"):
        tf.constant(1.0, name="c")
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"operation c: \{\{node c\}\} was explicitly assigned to "
                             r"/device:GPU:3 but available devices are \[ "
                             r"/job:localhost/replica:0/task:0/device:CPU:0, "
                             r"/job:localhost/replica:0/task:0/device:GPU:0 \]"):
        placed(machine=tf.Machine(gpus=1))
    assert placed(machine=tf.Machine(gpus=1), allow_soft_placement=True)["c"] == \
        f"{LOCAL}/device:GPU:0"
    assert placed(allow_soft_placement=True)["c"] == f"{LOCAL}/device:CPU:0"
    tf.reset_default_graph()
    with tf.device("/job:ps/task:0"):
        tf.constant(1.0, name="remote")
    with pytest.raises(tf.errors.InvalidArgumentError, match="assigned to /job:ps/task:0"):
        placed(allow_soft_placement=True)
    tf.reset_default_graph()
    with tf.device("/device:TPUX:0"):  # any device type is a valid name, as in TF ...
        tf.constant(1.0, name="odd")
    with pytest.raises(tf.errors.InvalidArgumentError,  # ... that no device has
                       match="explicitly assigned to /device:TPUX:0 but available devices"):
        placed()
    with pytest.raises(tf.errors.InvalidArgumentError, match="'tpux:0'"):
        tf.device("/tpux:0")


def test_log_device_placement_prints_tf_format(capsys):
    with tf.device("/cpu:1"):
        a = tf.constant([1.0, 2.0], name="a")
    b = tf.add(a, a, name="b")
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2},
                                          log_device_placement=True)) as sess:
        sess.run(b)
        log = sess.placement_log
    err = capsys.readouterr().err
    assert err.splitlines() == [f"a: (Const): {LOCAL}/device:CPU:1",
                                f"b: (AddV2): {LOCAL}/device:CPU:0"]
    assert log == err.splitlines()
    real = ("I0000 00:00:1795417797.121671    3765 placer.cc:162] b: (AddV2): "
            "/job:localhost/replica:0/task:0/device:CPU:1\nnoise\n")
    assert parse_placement_log(real) == {"b": f"{LOCAL}/device:CPU:1"}
    assert parse_placement_log(err) == {"a": f"{LOCAL}/device:CPU:1",
                                        "b": f"{LOCAL}/device:CPU:0"}


# -- execution: Send/Recv, streams, thread pools --------------------------------------------------

def test_two_device_graph_shows_send_recv_with_the_link_time():
    with tf.device("/cpu:0"):
        x = tf.constant(np.ones((256, 256), np.float32), name="x")
    with tf.device("/gpu:0"):
        y = tf.matmul(x, x, name="y")
    machine = tf.Machine(gpus=1)
    with tf.Session(machine=machine) as sess:
        out = sess.run(y)
        trace = sess.last_trace
    assert np.allclose(out, 256.0)
    send = next(s for s in trace.spans if s.name == "Send x:0")
    recv = next(s for s in trace.spans if s.name == "Recv x:0")
    mm = next(s for s in trace.spans if s.name == "y")
    link = machine.gpu_link
    assert (send.lane, recv.lane, mm.lane) == ("CPU:0 send", "GPU:0 recv", "GPU:0")
    assert send.dur == link.serialization_ns(256 * 256 * 4)
    assert recv.start + recv.dur == send.start + link.latency_ns + send.dur == mm.start
    assert [f.name for f in trace.flows] == ["x:0", "y:0"]  # y is fetched to the client CPU


def _two_branch_graph():
    a = np.ones((128, 128), np.float32)
    with tf.device("/cpu:0"):
        p = tf.matmul(tf.constant(a), tf.constant(a), name="p")
    with tf.device("/cpu:1"):
        q = tf.matmul(tf.constant(a), tf.constant(a), name="q")
    return p, q


@pytest.mark.parametrize("threads", [1, 2])
def test_inter_op_pool_bounds_concurrency(threads):
    p, q = _two_branch_graph()
    config = tf.ConfigProto(device_count={"CPU": 2}, inter_op_parallelism_threads=threads,
                            use_per_session_threads=True)  # else the process's global pool
    with tf.Session(config=config) as sess:
        sess.run([p, q])
        spans = {s.name: s for s in sess.last_trace.spans}
    overlap = min(spans["p"].end, spans["q"].end) > max(spans["p"].start, spans["q"].start)
    assert overlap == (threads == 2)


def test_ops_on_one_device_run_one_at_a_time_and_intra_op_threads_speed_them_up():
    a = np.ones((128, 128), np.float32)
    x = tf.constant(a, name="x")
    p, q = tf.matmul(x, x, name="p"), tf.matmul(x, x, name="q")
    times = {}
    for intra in (1, 4):
        with tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=intra)) as sess:
            sess.run([p, q])
            spans = {s.name: s for s in sess.last_trace.spans}
        assert spans["q"].start >= spans["p"].end or spans["p"].start >= spans["q"].end
        times[intra] = spans["p"].dur
    cpu = tf.Machine().cpu_profile
    assert times[1] == cpu.compute_time_ns(2 * 128 ** 3, 3 * a.nbytes)
    assert times[4] == cpu.compute_time_ns(2 * 128 ** 3 / 4, 3 * a.nbytes // 4)


def test_control_dependency_delays_an_op_without_a_data_edge():
    p, q = _two_branch_graph()
    with tf.control_dependencies([p, q]):
        with tf.device("/cpu:0"):
            late = tf.constant(1.0, name="late")
    config = tf.ConfigProto(device_count={"CPU": 2})
    with tf.Session(config=config) as sess:
        sess.run(late)
        spans = {s.name: s for s in sess.last_trace.spans}
    assert spans["late"].start >= max(spans["p"].end, spans["q"].end)


# -- GPU memory -----------------------------------------------------------------------------------

def test_a_second_process_on_the_same_gpu_fails_by_default():
    machine = tf.Machine(gpus=1)
    first = tf.Session(machine=machine)
    with pytest.raises(tf.errors.ResourceExhaustedError,
                       match="CUDA_ERROR_OUT_OF_MEMORY.*allow_growth"):
        tf.Session(machine=machine)
    first.close()
    tf.Session(machine=machine).close()  # the memory came back


def test_memory_fraction_growth_and_visible_devices():
    machine = tf.Machine(gpus=2)
    total = machine.gpu_profile.memory
    half = tf.ConfigProto(gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=0.5))
    a, b = tf.Session(config=half, machine=machine), tf.Session(config=half, machine=machine)
    assert machine.gpu_free == [total - 2 * (total // 2)] * 2
    a.close(), b.close()
    only_1 = tf.ConfigProto(gpu_options=tf.GPUOptions(visible_device_list="1"))
    sess = tf.Session(config=only_1, machine=machine)
    assert machine.gpu_free == [total, 0]
    assert sess.list_devices() == [f"{LOCAL}/device:CPU:0", f"{LOCAL}/device:GPU:0"]
    sess.close()
    grow = tf.ConfigProto(gpu_options=tf.GPUOptions(allow_growth=True))
    with tf.device("/gpu:0"):
        big = tf.constant(np.ones((512, 512), np.float32), name="big")
        y = tf.matmul(big, big, name="y")
    sess = tf.Session(config=grow, machine=machine)
    assert machine.gpu_free == [total, total]
    sess.run(y)
    assert sess.last_run.peak_memory[f"{LOCAL}/device:GPU:0"] == 2 * 512 * 512 * 4
    assert machine.gpu_free[0] == total - 2 * 512 * 512 * 4
    with pytest.raises(tf.errors.InvalidArgumentError, match="invalid GPU id '2'"):
        tf.Session(config=tf.ConfigProto(gpu_options=tf.GPUOptions(visible_device_list="2")),
                   machine=machine)


def test_out_of_memory_names_the_tensor_and_device():
    machine = tf.Machine(gpus=1)
    tiny = tf.ConfigProto(gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=1e-6))
    with tf.device("/gpu:0"):
        y = tf.matmul(tf.constant(np.ones((256, 256), np.float32)),
                      tf.constant(np.ones((256, 256), np.float32)), name="y")
    with pytest.raises(tf.errors.ResourceExhaustedError,
                       match=r"OOM when allocating tensor with shape\[256, 256\] and type "
                             r"float32 on /job:localhost/replica:0/task:0/device:GPU:0"):
        tf.Session(config=tiny, machine=machine).run(y)


def test_config_rejects_bad_values():
    with pytest.raises(tf.errors.InvalidArgumentError, match="device_count"):
        tf.ConfigProto(device_count={"XPU": 1})
    with pytest.raises(tf.errors.InvalidArgumentError, match="inter_op_parallelism_threads -1"):
        tf.ConfigProto(inter_op_parallelism_threads=-1)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"fraction 1.5 must be"):
        tf.GPUOptions(per_process_gpu_memory_fraction=1.5)
