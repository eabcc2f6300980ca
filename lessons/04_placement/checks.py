"""Lesson 04, Devices and placement: the checks that ``simdist check 04`` runs.

Each check builds a small graph with the learner's code in ``simdist.graph`` and compares
what the placer and the simulated run did with the rules of TF's placer. The real-TF half of
the lesson (tests/test_lessons_tf1.py and the notebook) runs the same programs on real
TensorFlow and finds the same devices.
"""

from types import SimpleNamespace

import numpy as np

import simdist.graph as sim
from simdist.lessons import Check, CheckFailed

LOCAL = "/job:localhost/replica:0/task:0/device:"
QUIZ_OPS = ("a", "b", "c", "v", "d", "e")


def placement_quiz(tf):
    """The graph of exercise 2 (two CPU devices, no GPU, allow_soft_placement=True)."""
    def variables_on_cpu1(op):
        return "/cpu:1" if op.type in ("VariableV2", "VarHandleOp") else "/cpu:0"
    with tf.device("/cpu:1"):
        a = tf.constant([1.0, 2.0], name="a")
        with tf.device("/job:localhost"):
            b = tf.add(a, a, name="b")
    c = tf.multiply(b, 2.0, name="c")
    with tf.device(variables_on_cpu1):
        v = tf.Variable([3.0, 4.0], name="v")
        d = tf.add(c, v, name="d")
    with tf.device("/gpu:0"):
        e = tf.identity(d, name="e")
    return [e]


def quiz_placement() -> dict:
    """{op name: device} the simulated placer gives the quiz."""
    graph = sim.Graph()
    with graph.as_default():
        fetches = placement_quiz(sim)
        init = sim.global_variables_initializer()
    config = sim.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=True)
    with sim.Session(graph=graph, config=config) as sess:
        sess.run(init)
        sess.run(fetches)
        return sess.last_placement


# -- exercise 1 ------------------------------------------------------------------------------


def _split_graph(module, variable_device, compute_device):
    fn = module.split_devices(variable_device, compute_device)
    if not callable(fn):
        raise CheckFailed(f"split_devices returned {fn!r}, not a function",
                          "return a function that takes an op and returns a device string")
    graph = sim.Graph()
    with graph.as_default(), sim.device(fn):
        w = sim.Variable(np.ones((4, 4), np.float32), name="w")
        x = sim.constant(np.ones((2, 4), np.float32), name="x")
        y = sim.matmul(x, w, name="y")
    sess = sim.Session(graph=graph, machine=sim.Machine(gpus=1))
    sess.run(w.initializer)
    value = sess.run(y)
    sess.close()
    return sess.last_placement, value


def check_variables_half(module):
    where, _ = _split_graph(module, "/cpu:0", "/gpu:0")
    if where["w"] != LOCAL + "CPU:0":
        raise CheckFailed(f"variable w was placed on {where['w']}, expected {LOCAL}CPU:0",
                          "return variable_device when op.type is 'VariableV2' or "
                          "'VarHandleOp'")
    fake = SimpleNamespace(type="VarHandleOp", name="r", device="")
    got = module.split_devices("/cpu:0", "/gpu:0")(fake)
    if got != "/cpu:0":
        raise CheckFailed(f"a resource variable (op type VarHandleOp) got {got!r}, expected "
                          "'/cpu:0'", "real TF 2 makes resource variables: VarHandleOp ops")
    return "variables go to the CPU (VariableV2 and VarHandleOp)"


def check_compute_half(module):
    where, value = _split_graph(module, "/cpu:0", "/gpu:0")
    wrong = {n: where[n] for n in ("x", "y") if where[n] != LOCAL + "GPU:0"}
    if wrong:
        raise CheckFailed(f"ops {wrong} should be on {LOCAL}GPU:0",
                          "every op that is not a variable goes to compute_device")
    if not np.allclose(value, 4.0):
        raise CheckFailed(f"y = x @ w gave {value.tolist()}, expected 4.0 everywhere")
    return "the other ops go to the GPU, and the values are right"


# -- exercise 2 ------------------------------------------------------------------------------


def check_prediction(module):
    predicted = module.predict_placement()
    if not isinstance(predicted, dict):
        raise CheckFailed(f"predict_placement returned {predicted!r}, expected a dict")
    actual = quiz_placement()
    missing = [n for n in QUIZ_OPS if n not in predicted]
    if missing:
        raise CheckFailed(f"no prediction for {missing}", "predict every op of QUIZ_OPS")
    wrong = {n: (predicted[n], actual[n]) for n in QUIZ_OPS if predicted[n] != actual[n]}
    if wrong:
        lines = [f"{n}: you said {p}, the placer chose {a}" for n, (p, a) in wrong.items()]
        raise CheckFailed("\n".join(lines),
                          "inner scopes win field by field; a device function sees every op; "
                          "a device that does not exist falls back with soft placement")
    return f"all {len(QUIZ_OPS)} predictions match the placer"


# -- exercise 3 ------------------------------------------------------------------------------


def check_ordering(module):
    xa = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
    graph = sim.Graph()
    with graph.as_default():
        x = sim.constant(xa, name="x")
        p, q, big = module.ordered_sum(sim, x)
    controls = {c.name for c in big.op.control_inputs}
    if not {p.op.name, q.op.name} <= controls:
        raise CheckFailed(f"big's control inputs are {sorted(controls)}: expected p and q",
                          "create big inside `with tf.control_dependencies([p, q]):`")
    if {t.op for t in big.op.inputs} & {p.op, q.op}:
        raise CheckFailed("big uses the value of p or q", "big must stay x @ x")
    with sim.Session(graph=graph) as sess:
        pv, qv, bv = sess.run([p, q, big])
        spans = {s.name: s for s in sess.last_trace.spans}
    if not (np.isclose(pv, xa.sum()) and np.isclose(qv, xa.mean()) and np.allclose(bv, xa @ xa)):
        raise CheckFailed("wrong values: expected p = sum(x), q = mean(x), big = x @ x")
    first = max(spans[p.op.name].end, spans[q.op.name].end)
    if spans[big.op.name].start < first:
        raise CheckFailed(f"big started at {spans[big.op.name].start} ns, before p and q "
                          f"finished ({first} ns)")
    return f"big starts at {spans[big.op.name].start} ns, after p and q"


# -- exercise 4 ------------------------------------------------------------------------------


def check_sharing(module):
    config = module.sharing_config(sim)
    if not isinstance(config, sim.ConfigProto):
        raise CheckFailed(f"sharing_config returned {config!r}, expected a tf.ConfigProto")
    machine = sim.Machine(gpus=1)
    total = machine.gpu_profile.memory
    try:
        first = sim.Session(config=config, machine=machine)
        taken = total - machine.gpu_free[0]
        second = sim.Session(config=config, machine=machine)
    except sim.errors.ResourceExhaustedError as error:
        raise CheckFailed(f"the second process could not start: {str(error)[:160]}",
                          "by default a process takes all of the GPU: set "
                          "gpu_options.per_process_gpu_memory_fraction") from None
    first.close(), second.close()
    if taken > 0.4 * total:
        raise CheckFailed(f"one process took {taken / total:.0%} of the GPU up front, expected "
                          "at most 40%")
    return f"two processes share the GPU, each took {taken / total:.0%} up front"


CHECKS = [
    Check("split_variables", "split_devices", "split_devices: variables on the CPU",
          check_variables_half),
    Check("split_compute", "split_devices", "split_devices: the other ops on the GPU",
          check_compute_half),
    Check("predict", "predict_placement", "predict_placement: the placer's choices",
          check_prediction),
    Check("ordering", "ordered_sum", "ordered_sum: big waits for p and q", check_ordering),
    Check("sharing", "sharing_config", "sharing_config: two processes on one GPU",
          check_sharing),
]
