"""Lessons 04 (devices and placement) and 05 (clusters, servers, sessions, containers): wrong
answers, notebooks, and the exercises on real TF (test_lesson_checks.py runs the checks on the
solutions and the stubs)."""

import importlib.util

import pytest

from realdist.graph import tf1 as real
from course import lessons

from tests.conftest import ROOT, run_notebook

LESSONS = {"04": "04_placement", "05": "05_clusters_sessions"}


def load(lesson, name):
    folder = ROOT / "lessons" / LESSONS[lesson]
    path = lessons.solution_path(folder) if name == "solution" else folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_tf1_{lesson}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WRONG_04 = '''
def split_devices(variable_device="/cpu:0", compute_device="/gpu:0"):
    return lambda op: variable_device if op.type == "VariableV2" else compute_device

def predict_placement():
    cpu = "/job:localhost/replica:0/task:0/device:CPU:"
    return {"a": cpu + "1", "b": cpu + "1", "c": cpu + "0", "v": cpu + "1", "d": cpu + "1",
            "e": cpu + "0"}

def ordered_sum(tf, x):
    p, q = tf.reduce_sum(x, name="p"), tf.reduce_mean(x, name="q")
    return p, q, tf.matmul(x, x, name="big")

def gpu_plan(tf):
    return {name: tf.ConfigProto() for name in ("trainer0", "trainer1", "evaluator")}
'''

# memory options that do not meet the stated cap: growth without a cap, caps that do not fit
GROWTH_04 = '''
def gpu_plan(tf):
    def grow(gpu):
        return tf.ConfigProto(gpu_options=tf.GPUOptions(visible_device_list=str(gpu),
                                                        allow_growth=True))
    return {"trainer0": grow(0), "trainer1": grow(1), "evaluator": grow(0)}
'''

SMALL_04 = '''
def gpu_plan(tf):
    def cap(gpu, f):
        return tf.ConfigProto(gpu_options=tf.GPUOptions(visible_device_list=str(gpu),
                                                        per_process_gpu_memory_fraction=f))
    return {"trainer0": cap(0, 0.5), "trainer1": cap(1, 0.6), "evaluator": cap(0, 0.25)}
'''

BOTH_GPUS_04 = '''
def gpu_plan(tf):
    def cap(f):
        return tf.ConfigProto(gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=f))
    return {"trainer0": cap(0.6), "trainer1": cap(0.6), "evaluator": cap(0.25)}
'''

WRONG_05 = '''
def predict_counters():
    # every client sees its own counter from 0: as if nothing were shared
    return {"A": [1, 2], "B": [1, 2, 3], "C": [1, 2], "D": [1], "E": [1, 2], "F": [1],
            "G": [1], "H": [1, 2]}

def predict_ps_tasks(sizes, num_ps, strategy="round_robin"):
    return [i % num_ps for i in range(len(sizes))]

def server_from_tf_config(tf, tf_config):
    import json
    config = json.loads(tf_config)
    return tf.train.Server(tf.train.ClusterSpec(config["cluster"]), "worker", 0)

def fresh_experiment(tf, target, build, steps):
    graph = tf.Graph()
    with graph.as_default():  # the default container: nothing to free but everybody's
        init, train, value = build(tf)
    with tf.Session(target, graph=graph) as sess:
        sess.run(init)
        for _ in range(steps):
            sess.run(train)
        result = int(sess.run(value))
    tf.Session.reset(target)
    return result
'''

LEFT_OVER_05 = '''
def fresh_experiment(tf, target, build, steps):
    graph = tf.Graph()
    with graph.as_default(), tf.container("mine"):
        init, train, value = build(tf)
    with tf.Session(target, graph=graph) as sess:
        sess.run(init)
        for _ in range(steps):
            sess.run(train)
        return int(sess.run(value))  # never freed
'''


def _run(lesson, source, tmp_path):
    mine = tmp_path / f"mine{lesson}.py"
    mine.write_text(source)
    return {c.name: c for c in lessons.run_checks(lesson, file=mine)}


def test_wrong_answers_get_what_is_wrong_and_a_hint(tmp_path):
    r = _run("04", WRONG_04, tmp_path)
    assert r["split_compute"].passed and not r["split_variables"].passed
    assert "VarHandleOp" in r["split_variables"].message
    assert not r["predict"].passed and r["predict"].message == (
        "d: you said /job:localhost/replica:0/task:0/device:CPU:1, the placer chose "
        "/job:localhost/replica:0/task:0/device:CPU:0")
    assert "sees every op" in r["predict"].hint and "Add" in r["predict"].detail
    assert "control inputs are []" in r["ordering"].message
    assert r["gpu_plan"].message == "trainer0 sees 2 GPUs; each process needs one"
    r = _run("05", WRONG_05, tmp_path)
    assert r["counters"].message == ("client B: you predicted [1, 2, 3], the simulated cluster "
                                     "gives [3, 4, 5]")
    assert r["counters"].hint.startswith("a client that does not initialize goes on")
    assert "greedy over 2 ps" in r["ps_tasks"].message
    assert "for task worker:1 you started the server of worker:0" in r["tf_config"].message
    assert "\"keeper\" of the default container is gone" in r["fresh"].message
    assert "tf.container" in r["fresh"].detail


@pytest.mark.parametrize("source, message, hint", [
    (GROWTH_04, "trainer0 can grow to the whole GPU 0", "not capped"),
    (SMALL_04, "trainer0 needs 60% of a GPU but is capped at 50%", "hold what the process"),
    (BOTH_GPUS_04, "trainer0 sees 2 GPUs; each process needs one", "every GPU it sees"),
])
def test_a_memory_plan_that_misses_the_cap_fails(tmp_path, source, message, hint):
    result = _run("04", source, tmp_path)["gpu_plan"]
    assert not result.passed and result.message.startswith(message) and hint in result.hint


def _threads(old="", new=""):
    """The solution's inter_op_threads with one line changed (a typical wrong model)."""
    source = lessons.solution_path(ROOT / "lessons" / "04_placement").read_text()
    assert old in source, old
    return source.replace(old, new)


@pytest.mark.parametrize("source, message, hint", [
    # every session's own setting, as if nothing were shared
    (_threads('pools = [process.setdefault("", default)]', "pools = [default]"),
     "process 1 (8 cores), session 1 (inter_op_parallelism_threads=6; run on pool 0): you "
     "predicted 6 ops at once, simdist runs 3", "shares one global inter-op pool"),
    # use_per_session_threads taken for the global pool
    (_threads("pools = [default]", 'pools = [process.setdefault("", default)]'),
     "process 2 (2 cores), session 1", "a pool of its own"),
    # -1 read as the last pool (Python's index)
    (_threads("1 if run_pool == -1 else pools[run_pool]", "pools[run_pool]"),
     "process 3 (4 cores), session 0", "the caller's thread"),
    # a global_name taken for a private pool
    (_threads("size = process.setdefault(option.global_name, size)", "pass"),
     "process 4 (4 cores), session 2", "shared by every session that names it"),
    # num_threads 0 taken literally
    (_threads("size = option.num_threads or default", "size = option.num_threads"),
     "process 4 (4 cores), session 0", "RunOptions.inter_op_thread_pool picks"),
    ("def inter_op_threads(sessions, cores):\n    return 4\n",
     "inter_op_threads returned 4; expected a list of 3 ints", "one number per session"),
])
def test_a_wrong_thread_pool_model_names_the_session_and_the_rule(tmp_path, source, message,
                                                                  hint):
    result = _run("04", source, tmp_path)["inter_op_threads"]
    assert not result.passed and result.message.startswith(message), result.message
    assert hint in result.hint, result.hint


def test_the_thread_pool_prediction_passes_and_leaves_the_process_pools_alone(tmp_path):
    from simdist.graph._sim import runtime

    before = dict(runtime._PROCESS_POOLS)
    assert _run("04", _threads(), tmp_path)["inter_op_threads"].passed
    assert runtime._PROCESS_POOLS == before


def test_an_experiment_that_leaves_its_variables_fails(tmp_path):
    fresh = _run("05", LEFT_OVER_05, tmp_path)["fresh"]
    assert not fresh.passed and "still hold its variables" in fresh.message
    assert "Session.reset" in fresh.detail


def _partitions(run=None, **fields):
    """predict_partitions returning the solution's counts, ``fields`` of ``run`` changed."""
    counts = load("05", "solution").predict_partitions()
    if run:
        counts[run] = {**counts[run], **fields}
    return f"def predict_partitions():\n    return {counts!r}\n"


@pytest.mark.parametrize("source, message, hint, detail", [
    # one partition per task: worker:0's CPU:0 and GPU:0 taken as one
    (_partitions("loss", partitions=3), "run loss, partitions: you predicted 3, the master "
     "made 4", "one partition per device", "CPU:0 and GPU:0 are two devices"),
    # the feed's _Recv and the fetch's _Send counted among the pairs
    (_partitions("loss", pairs=6), "run loss, pairs: you predicted 6, the master made 4",
     "counted apart", "client_terminated"),
    # every pair taken for a message, the copies between CPU:0 and GPU:0 too
    (_partitions("loss", across_tasks=4), "run loss, across_tasks: you predicted 4, the "
     "master made 2", "not a message", "PCIe"),
    # no pruning: every device of the graph
    (_partitions("scaled", partitions=4), "run scaled, partitions: you predicted 4, the "
     "master made 2", "prunes", "fed tensor replaces"),
    # the fetch taken out at worker:0, whatever the session's target
    (_partitions("scaled_via_ps", pairs=1), "run scaled_via_ps, pairs: you predicted 1, the "
     "master made 2", "client device", "travels back to ps:0"),
    ('def predict_partitions():\n    return {"loss": 4}\n', "predict_partitions returned "
     "{'loss': 4}; expected a dict with the runs", "five counts per run", ""),
])
def test_a_wrong_partition_prediction_says_which_count_and_why(tmp_path, source, message,
                                                               hint, detail):
    result = _run("05", source, tmp_path)["partitions"]
    assert not result.passed and result.message.startswith(message), result.message
    assert hint in result.hint and detail in result.detail, (result.hint, result.detail)


def test_the_right_partition_prediction_passes(tmp_path):
    result = _run("05", _partitions(), tmp_path)["partitions"]
    assert result.passed, result.message


# -- the exercises on real TF ------------------------------------------------------------------


split_devices = load("04", "solution").split_devices  # real TF gets solution.py's source


def split_program(tf):
    with tf.device(split_devices("/cpu:0", "/cpu:1")):
        w = tf.Variable([[1.0, 2.0], [3.0, 4.0]], name="w")
        y = tf.matmul(tf.constant([[1.0, 1.0]], name="x"), w, name="y")
    return [y]


@pytest.mark.realtf
@pytest.mark.timeout(150)
def test_placement_exercises_agree_with_real_tf():
    checks = load("04", "checks")
    solution_source = lessons.solution_path(ROOT / "lessons" / "04_placement").read_text()
    solution = load("04", "solution")
    split_sim = real.sim_placement(split_program, {"CPU": 2})
    split_real = real.real_placement(split_program, {"CPU": 2}, extra_source=solution_source,
                                     timeout=120)
    assert real.compare_placement(split_sim, split_real, ["w", "x", "y"]) == {}
    assert split_real.devices["w"].endswith("CPU:0") and split_real.devices["y"].endswith(
        "CPU:1")
    quiz_real = real.real_placement(checks.placement_quiz, {"CPU": 2}, soft=True, timeout=120)
    predicted = solution.predict_placement()
    assert {n: quiz_real.devices[n] for n in checks.QUIZ_OPS} == predicted
    assert checks.quiz_placement()["e"] == predicted["e"]


def ps_program(tf):
    with tf.device(tf.train.replica_device_setter(ps_tasks=3)):
        return [tf.get_variable(f"v{i}", shape=(n,)) for i, n in enumerate((10, 1, 1, 100, 2))]


@pytest.mark.realtf
@pytest.mark.timeout(200)
def test_ps_task_exercise_agrees_with_real_tf():
    """(The counter and partition stories run on real TF in the notebook's test below.)"""
    solution = load("05", "solution")
    predicted = solution.predict_ps_tasks([40, 4, 4, 400, 8], 3)
    devices = real.real_variable_devices(ps_program, timeout=120)
    assert [devices[f"v{i}"] for i in range(5)] == [f"/job:ps/task:{t}" for t in predicted]
    assert real.sim_variable_devices(ps_program) == devices


# -- notebooks -----------------------------------------------------------------------------------


NOTEBOOK_TEXT = {
    "04": ["ops placed differently: {}",
           "y: (MatMul): /job:localhost/replica:0/task:0/device:GPU:0",
           "InvalidArgumentError: Cannot assign a device for operation steps",
           "not done yet: exercise split_devices", "not done yet: exercise gpu_plan",
           "e: yours ?, real TF /job:localhost/replica:0/task:0/device:CPU:0",
           # issue 28: shared, per-session and named inter-op pools, simulated and on real TF
           "shared global pool, asking for 1 thread: 4",
           "a pool of its own, 1 thread:            1",
           "another session naming 'background', 6: 2",
           "not done yet: exercise inter_op_threads",
           "ops at once, real TF: [3, 3, 1, 1, 1]", "'later'] (a and b in either order"],
    "05": ["client 0: [1, 2, 3]  client 1: [4, 5]  local session: [1, 2, 3]",
           "real TF: {'client0': [1, 2, 3], 'client1': [4, 5], 'local': [1, 2, 3]}",
           "kept is still 1.0",
           "('worker:1', 2, [0.75, 0.75])",
           "[('worker:0', 1, [0.5, 0.5]), ('worker:1', 2, [0.75, 0.75])]",  # from flags
           "not done yet: exercise predict_counters",
           "client F: yours ?, real TF [6]",
           # section 3: the master's partitions, pairs, RegisterGraph (the plan's first run)
           # and RunGraph messages; the traced run's response carries ps:0's node times
           "partition of ps:0/CPU:0\n    v            VariableV2 <- -",
           "pair   _Send v/read_S0  ps:0/CPU:0 -> worker:0/CPU:0  edge_0_v/read",
           "client _Recv _recv_x_0  worker:0/CPU:0 -> worker:0/CPU:0  x:0",
           "RegisterGraph (worker:0 graph 2)           worker:0 -> ps:0  755 bytes",
           "RegisterGraph response (worker:0 graph 2)  ps:0 -> worker:0   64 bytes",
           "RunGraph response (worker:0 step 2)        ps:0 -> worker:0  234 bytes",
           "the same in simdist: {'value': True, 'partitions': True, 'pairs': True, "
           "'traced_devices': True, 'timeline': True, 'timeline_processes': True}",
           "not done yet: exercise predict_partitions",
           "run scaled_via_ps: yours ?, real TF {'partitions': 2, 'pairs': 2, "
           "'across_tasks': 2, 'feeds': 0, 'fetches': 1}"],
}


@pytest.mark.notebook
@pytest.mark.timeout(240)
@pytest.mark.parametrize("lesson", sorted(LESSONS))
def test_notebook_runs_top_to_bottom(lesson, monkeypatch):
    notebook = ROOT / "notebooks" / f"{LESSONS[lesson]}.ipynb"
    text, images = run_notebook(notebook, monkeypatch, cell_timeout=150)
    assert images >= 1
    for expected in NOTEBOOK_TEXT[lesson]:
        assert expected in text, expected
    if lesson == "05":  # the notebook runs both stories on real TF: every value is simdist's
        solution, checks = load("05", "solution"), load("05", "checks")
        counters, partitions = checks.sim_counter_story(), checks.sim_partition_story()
        assert counters == solution.predict_counters() and counters["F"] == [6]
        assert partitions == solution.predict_partitions()
        assert partitions["scaled_via_ps"]["across_tasks"] == 2  # the fetch goes back to ps:0
        for name, values in counters.items():
            assert f"client {name}: yours ?, real TF {values}" in text, name
        for name, counts in partitions.items():
            assert f"run {name}: yours ?, real TF {counts}" in text, name
