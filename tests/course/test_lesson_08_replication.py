"""Lesson 08 (in-graph and between-graph replication): the wrong answers a learner is likely
to give with their hints, the in-graph program, and the notebook, which runs that program on
real TF beside simdist (test_lesson_checks.py runs its checks on the solution and the stubs;
test_lessons_format.py checks that the committed notebooks are fresh)."""

import os
import re
import subprocess
import types

import pytest

from course.lessons import CheckFailed, LESSONS_DIR, load_module

from tests.conftest import ROOT, run_notebook

FOLDER = ROOT / "lessons" / "08_replication"


@pytest.fixture(scope="module")
def checks():
    """One checks module for every wrong answer, so that its simulated runs are shared."""
    return load_module(LESSONS_DIR / "08_replication" / "checks.py", "_lesson08_checks")


def failure(check, source):
    """The CheckFailed that ``check`` raises on a module made of ``source``."""
    namespace = {}
    exec(source, namespace)  # noqa: S102 - the test's own wrong answers
    module = types.SimpleNamespace(**{k: v for k, v in namespace.items() if callable(v)})
    with pytest.raises(CheckFailed) as caught:
        check(module)
    return caught.value


# (wrong answer, the start of the message, the start of the hint)
WRONG_CLIENTS = [
    ("def clients_and_threads(r, m, n): return n, n",  # a client per tower
     "clients_and_threads('in-graph', 'sync', 2) returned (2, 2); the simulator has 1 client",
     "in-graph replication: ONE client"),
    ("def clients_and_threads(r, m, n): return 1, 1 if m == 'sync' else n",  # one client always
     "clients_and_threads('between-graph', 'sync', 2) returned (1, 1); the simulator has 2",
     "between-graph replication: every worker task runs its own client"),
    # issue 28: the answer the check used to hold right forgets the sync chief's queue runner
    ("def clients_and_threads(r, m, n): return (1, 1 if m == 'sync' else n) if r == 'in-graph' "
     "else (n, n)",
     "clients_and_threads('between-graph', 'sync', 2) returned (2, 2); the simulator has 2 "
     "client program(s) and 4 thread(s) calling Session.run (sync_token_q/QueueRunner 0, "
     "sync_token_q/close_on_stop, worker:0, worker:1)",
     "besides each worker's training loop, the sync chief starts the SyncReplicasOptimizer's "
     "queue runner"),
    ("def clients_and_threads(r, m, n): return (1, 1 if m == 'sync' else n) if r == 'in-graph' "
     "else (n, n + 2)",  # the queue runner's threads in async mode too
     "clients_and_threads('between-graph', 'async', 2) returned (2, 4)",
     "asynchronous between-graph: no queue runner"),
    ("def clients_and_threads(r, m, n): return (1, 1) if r == 'in-graph' else (n, n)",
     "clients_and_threads('in-graph', 'async', 2) returned (1, 1); the simulator has 1 client "
     "program(s) and 2 thread(s)", "asynchronous in-graph: each tower's train op"),
    ("def clients_and_threads(r, m, n): return (1, n) if r == 'in-graph' else (n, n)",
     "clients_and_threads('in-graph', 'sync', 2) returned (1, 2)",
     "synchronous in-graph: one Session.run runs every tower"),
    ("def clients_and_threads(r, m, n): return 1",
     "clients_and_threads('in-graph', 'sync', 2) returned 1, expected a pair",
     "return a tuple of two ints"),
]

PS, CHIEF = "'/job:ps/task:0'", "'/job:worker/task:0'"
WRONG_AVERAGING = [
    (f"def averaging_device(r, m): return {CHIEF} if r == 'between-graph' and m == 'sync' "
     f"else ({PS} if m == 'sync' else None)",  # the chief averages
     "averaging_device('between-graph', 'sync') returned '/job:worker/task:0'; in the "
     "simulated run it is /job:ps/task:0", "the chief's queue runner asks for the average"),
    (f"def averaging_device(r, m): return {CHIEF} if m == 'sync' else None",  # the client's task
     "averaging_device('in-graph', 'sync') returned '/job:worker/task:0'",
     "the average is an op of the one graph"),
    (f"def averaging_device(r, m): return {PS}",  # asynchronous updates averaged too
     "averaging_device('in-graph', 'async') returned '/job:ps/task:0'; in the simulated run it "
     "is nowhere (None)", "asynchronous updates: each gradient is applied alone"),
    ("def averaging_device(r, m): return None",
     "averaging_device('in-graph', 'sync') returned None",
     "synchronous updates: the replicas' gradients of a step are averaged once"),
]

WRONG_SPLITS = [
    ("def split_pays(a, n, c, t): return True",  # more GPUs, faster
     "split_pays('dense', 8,", "a dense stack is a chain"),
    ("def split_pays(a, n, c, t): return a == 'branches'",  # branches always pay
     "split_pays('branches', 2,", "the split saves half of the layers' time but pays for"),
    ("def split_pays(a, n, c, t): return a == 'branches' and t < n * c / 2",  # one transfer
     "split_pays('branches', 2, 45.362, 38.281) returned True",
     "count both crossings on GPU 1's path"),
    ("def split_pays(a, n, c, t): return False",
     "split_pays('branches', 8,", "the two branches run at the same time"),
    ("def split_pays(a, n, c, t): return 1",
     "split_pays('dense', 8,", "return a bool"),
]


@pytest.mark.parametrize("source,message,hint", WRONG_CLIENTS)
def test_wrong_clients_fail_with_their_hint(checks, source, message, hint):
    failed = failure(checks.check_clients, source)
    assert failed.message.startswith(message) and str(failed.hint).startswith(hint)
    if "expected a pair" not in message:  # the detail: where the simulator shows it
        assert "in_graph_training(...).threads" in str(failed.detail)


RIGHT_CLIENTS = ("def clients_and_threads(r, m, n):\n"
                 "    if r == 'in-graph':\n"
                 "        return {o}1, 1 if m == 'sync' else n{c}\n"
                 "    return {o}n, n + 2 if m == 'sync' else n{c}\n")


@pytest.mark.parametrize("o,c", ["()", "[]"])
def test_the_sync_chief_s_queue_runner_threads_count(checks, o, c):
    """Issue 28: the chief of synchronous between-graph training runs two more threads that
    call the session; the answer that counts them passes, as a tuple or as a list (the one
    rule of course/answers.py)."""
    namespace = {}
    exec(RIGHT_CLIENTS.format(o=o, c=c), namespace)  # noqa: S102
    assert checks.check_clients(types.SimpleNamespace(**namespace)).startswith("right for")
    assert checks.simulated("between-graph", "sync", 2)[1] == (
        "sync_token_q/QueueRunner 0", "sync_token_q/close_on_stop", "worker:0", "worker:1")
    assert checks.simulated("between-graph", "async", 4)[1] == (
        "worker:0", "worker:1", "worker:2", "worker:3")


REAL_THREADS = """
import os, socket, threading
import tensorflow as tf
from tensorflow.python.client import session
tf1 = tf.compat.v1
tf1.disable_eager_execution()


def port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


spec = tf1.train.ClusterSpec({"ps": [f"localhost:{port()}"],
                              "worker": [f"localhost:{port()}", f"localhost:{port()}"]})
servers = [tf1.train.Server(spec, "worker", k) for k in (0, 1)]
tf1.train.Server(spec, "ps", 0)
calling = set()
run, make_callable = session.BaseSession.run, session.BaseSession.make_callable


def recorded(method):
    def call(self, *args, **kwargs):
        calling.add(threading.current_thread().name)
        return method(self, *args, **kwargs)
    return call


session.BaseSession.run = recorded(run)
session.BaseSession.make_callable = recorded(make_callable)  # QueueRunner's enqueue thread


def worker(k):
    with tf1.Graph().as_default():
        setter = tf1.train.replica_device_setter(worker_device=f"/job:worker/task:{k}",
                                                 cluster=spec)
        with tf1.device(setter):
            step = tf1.train.get_or_create_global_step()
            w = tf1.get_variable("w", initializer=1.0)
            opt = tf1.train.SyncReplicasOptimizer(tf1.train.GradientDescentOptimizer(0.1), 2, 2)
            train = opt.minimize(tf1.square(w), global_step=step)
        hooks = [opt.make_session_run_hook(k == 0), tf1.train.StopAtStepHook(last_step=4)]
        with tf1.train.MonitoredTrainingSession(servers[k].target, is_chief=k == 0, hooks=hooks,
                                                stop_grace_period_secs=1) as sess:
            while not sess.should_stop():
                sess.run(train)


threads = [threading.Thread(target=worker, args=(k,), name=f"worker:{k}") for k in (0, 1)]
for t in threads:
    t.start()
for t in threads:
    t.join(90)
print(sorted(calling))
os._exit(0)
"""


@pytest.mark.realtf
@pytest.mark.timeout(200)
def test_real_tf_s_sync_chief_runs_the_same_threads(python):
    """On real TF 2.21 the threads that run ops through a session in synchronous between-graph
    training on 2 workers are the two loops and the chief's two queue-runner threads."""
    proc = subprocess.run([python, "-c", REAL_THREADS], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert proc.stdout.strip().splitlines()[-1] == str(sorted(
        ["QueueRunnerThread-sync_token_q-close_on_stop",
         "QueueRunnerThread-sync_token_q-sync_token_q_EnqueueMany", "worker:0", "worker:1"]))


@pytest.mark.parametrize("source,message,hint", WRONG_AVERAGING)
def test_wrong_averaging_devices_fail_with_their_hint(checks, source, message, hint):
    failed = failure(checks.check_averaging, source)
    assert failed.message.startswith(message) and str(failed.hint).startswith(hint)


@pytest.mark.parametrize("source,message,hint", WRONG_SPLITS)
def test_wrong_split_rules_fail_with_their_hint(checks, source, message, hint):
    failed = failure(checks.check_split, source)
    assert failed.message.startswith(message) and str(failed.hint).startswith(hint)


def test_the_split_cases_stand_clear_of_the_rule_s_boundary(checks):
    """Every case of exercise 3 agrees with the solution's rule by a margin, so that a small
    change of the cost model cannot flip a case silently."""
    for case in checks.SPLITS:
        layer_us, transfer_us, pays, speedup = checks.split_case(*case)
        assert abs(speedup - 1) > 0.1, case
        if case[0] == "branches":
            assert abs(transfer_us / (case[2] * layer_us) - 0.25) > 0.05, case


def test_hints_speak_chinese_too(checks):
    failed = failure(checks.check_averaging, "def averaging_device(r, m): return None")
    assert failed.hint.zh.startswith("同步更新")


def test_the_in_graph_program_in_simdist():
    """towers.py's simulated half (the notebook runs the real half beside it)."""
    towers = load_module(FOLDER / "towers.py", "_lesson08_towers")
    run = towers.sim_towers(towers=3, steps=3)
    assert run.losses == sorted(run.losses, reverse=True)  # it trains
    assert run.crossings == {("CPU:0", "CPU:1"): 1, ("CPU:0", "CPU:2"): 1,
                             ("CPU:1", "CPU:0"): 1, ("CPU:2", "CPU:0"): 1}
    assert run.devices["average/AddN"] == "CPU:0" and run.devices["tower_2/Mean"] == "CPU:2"
    assert run.averaging == {("in-graph", "sync"): ["/job:ps/task:0"],
                             ("in-graph", "async"): None,
                             ("between-graph", "sync"): ["/job:ps/task:0"],
                             ("between-graph", "async"): None}


# the notebook's real TF run is this file's check of simdist against real TF: the same losses,
# placement and transfers, and the averaging ops on the same devices
NOTEBOOK_TEXT = ["threads calling Session.run: ['client thread 0']",
                 "global step: 12 (3 towers x 4 runs",
                 "sync_token_q_Dequeue",
                 "ops in both graphs: 27, placed differently: []",
                 "real TF: tower 0's loss [2.43387",
                 "tensors crossing devices in a step {('CPU:0', 'CPU:1'): 1, ('CPU:0', "
                 "'CPU:2'): 1, ('CPU:0', 'CPU:3'): 1, ('CPU:1', 'CPU:0'): 1, ('CPU:2', "
                 "'CPU:0'): 1, ('CPU:3', 'CPU:0'): 1}\nops in both graphs",
                 "the average (average/AddN) ran on CPU:0 and CPU:0",
                 "between-graph sync   yours ?                real TF ['/job:ps/task:0']",
                 "in-graph async       yours ?                real TF None",
                 "bytes between devices: 0",
                 "dense   : one GPU 116 us, split 159 us (0.73x)",
                 "branches: one GPU 122 us, split 88 us (1.38x)",
                 "not done yet: exercise split_pays",
                 # section 8 and exercises 4-5: the in-graph script over MPI ranks
                 "4 tasks over 4 MPI ranks",
                 "the same trace on 1 and 4 MPI ranks, byte for byte: True",
                 "not done yet: exercise master_requests",
                 "in_graph_mpi: ✗ not done yet: exercise master_requests"]


@pytest.mark.notebook
@pytest.mark.realtf
@pytest.mark.timeout(300)
def test_notebook_runs_top_to_bottom(monkeypatch):
    text, images = run_notebook(ROOT / "notebooks" / "08_replication.ipynb", monkeypatch,
                                cell_timeout=200)
    missing = [line for line in NOTEBOOK_TEXT if line not in text]
    assert not missing, missing
    assert images >= 4  # the two replication timelines and the two model-parallel ones
    # simdist's and real TF's losses agree to float32 round-off (the printed last digit can
    # differ between numpy and BLAS builds)
    losses = {who: [float(v) for v in re.search(rf"{who}: tower 0's loss \[([^]]+)\]",
                                                  text).group(1).split(",")]
              for who in ("simdist", "real TF")}
    assert len(losses["simdist"]) == len(losses["real TF"]) == 3
    assert max(abs(a - b) for a, b in zip(losses["simdist"], losses["real TF"])) < 1e-5
