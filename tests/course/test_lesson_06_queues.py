"""Lesson 06 (queues and input pipelines): wrong answers, the notebook, and the padded batches
on real TF (test_lesson_checks.py runs its checks on the solution and the stubs)."""

import importlib.util

import pytest

from course import lessons

from tests.course.expect import assert_outcome
from tests.conftest import ROOT, LessonChecks, run_notebook

FOLDER = ROOT / "lessons" / "06_queues"
LESSON = LessonChecks(FOLDER)


def load(name):
    path = lessons.solution_path(FOLDER) if name == "solution" else FOLDER / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_queues_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WRONG = '''
def choose_pipeline():
    return 32, 2  # one thread short: no queue makes up for it

def padded_batch_shape(queue_shape, element_shapes):
    return (len(element_shapes),) + tuple(element_shapes[0])  # the first element's shape

def aggregator(tf, target, prediction_queue, num_predictors, num_inputs, timeout_ms):
    graph = tf.Graph()
    with graph.as_default():
        dequeues = [prediction_queue(tf, k).dequeue() for k in range(num_predictors)]
    with tf.Session(target, graph=graph) as sess:  # no timeout: waits for the slow one
        return [sum(float(sess.run(d)[1]) for d in dequeues) / num_predictors
                for _ in range(num_inputs)]
'''

LATE = '''
def aggregator(tf, target, prediction_queue, num_predictors, num_inputs, timeout_ms):
    graph = tf.Graph()
    with graph.as_default():
        dequeues = [prediction_queue(tf, k).dequeue() for k in range(num_predictors)]
    config = tf.ConfigProto(operation_timeout_in_ms=timeout_ms)
    means = []
    with tf.Session(target, graph=graph, config=config) as sess:
        for _ in range(num_inputs):
            got = []
            for dequeue in dequeues:
                try:
                    got.append(float(sess.run(dequeue)[1]))  # late ones count for this input
                except tf.errors.DeadlineExceededError:
                    pass
            means.append(sum(got) / len(got))
    return means
'''

# issue 28: three aggregators that the checks used to accept, each the reference one with a
# change: 0.0 where None is due; a stale prediction dropped with this input's turn; a predictor
# that missed a deadline never asked again (the reference solution's rule until then)
SOLUTION = (lessons.solution_path(FOLDER)).read_text(encoding="utf-8")
AGGREGATOR = SOLUTION[SOLUTION.index("def aggregator("):SOLUTION.index("def choose_capacity")]
ZERO = AGGREGATOR.replace("if predictions else None", "if predictions else 0.0")
DROPS_IN_TIME = AGGREGATOR.replace(
    "while int(index) < i:  # stale: it belongs to an earlier input\n"
    "                        index, value = sess.run(dequeues[k])",
    "if int(index) < i:  # stale, and with it this input's turn\n"
    "                        continue")
GIVES_UP = AGGREGATOR.replace("for k in range(num_predictors):", "for k in list(on_time):") \
    .replace("means = []", "on_time, means = list(range(num_predictors)), []") \
    .replace("                    continue\n                predictions",
             "                    on_time.remove(k)\n                    continue\n"
             "                predictions")

TOO_MANY = '''
def choose_pipeline():
    return 16, 5
'''


def test_wrong_answers_get_what_is_wrong_and_a_hint(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(WRONG)
    r = {c.name: c for c in lessons.run_checks("06", file=mine)}
    assert r["pipeline"].message.startswith("with capacity 32 and 2 loader thread(s) the "
                                            "trainer is starved 48.")
    assert r["pipeline"].hint.startswith("2 thread(s) do not keep up on average")
    assert r["padding"].message == (
        "a PaddingFIFOQueue with shapes=[(None, 3)] holding elements of shapes [(2, 3), (5, 3), "
        "(1, 3)]: you predicted (3, 2, 3), dequeue_many(3) gives (3, 5, 3)")
    assert r["all_on_time"].passed
    assert "it waited for it" in r["slow"].message
    assert "without a deadline" in r["slow"].hint
    assert "operation_timeout_in_ms" in r["slow"].detail
    mine.write_text(LATE)
    r = {c.name: c for c in lessons.run_checks("06", file=mine)}
    assert r["all_on_time"].passed and not r["slow"].passed
    assert r["slow"].message.startswith("the aggregator returned [0.0, 1.5, 3.0, ")
    assert r["slow"].message.endswith("expected [0.0, 1.5, 3.0, 4.5, 6.0]")
    assert r["slow"].hint.startswith("a prediction that comes too late")
    mine.write_text(TOO_MANY)
    r = {c.name: c for c in lessons.run_checks("06", file=mine)}
    assert r["pipeline"].message.startswith("capacity 8 with 5 loader thread(s) starves the "
                                            "trainer only 4.0%")
    assert "adds no throughput" in r["pipeline"].hint


@pytest.mark.parametrize("answer, message, hint", [
    # issue 28, predict then run: section 4's answer for a batch of 2, copied
    ((8, 3), "with capacity 8 and 3 loader thread(s) the trainer is starved 18.5%",
     "that is section 4's answer for a batch of 2"),
    ((4, 5), "with capacity 4 and 5 loader thread(s) the trainer is starved 5.4%",
     "the threads keep up on average, but the queue runs dry in a stall"),
    ((8, 6), "5 loader thread(s) with capacity 32 starve the trainer only 4.1%",
     "threads first"),
    ((8, 5), None, None),
])
def test_choose_pipeline_for_a_batch_of_three(answer, message, hint):
    r = LESSON.result("choose_pipeline", f"def choose_pipeline():\n    return {answer}")
    assert_outcome(r, message, hint)


@pytest.mark.parametrize("answer, message, hint", [
    ("b", None, None),
    ("a", "'a' (the queue is too small for a stall) is not why", "a queue of 32 holds far more"),
    ("c", "'c' (the enqueue threads take the trainer's CPU)", "a reader waits on I/O"),
    ("d", "'d' (the elements fill the link to the ps)", "an element is 256 bytes"),
    ("e", "returned 'e', expected one of 'a', 'b', 'c', 'd'", "return the letter"),
])
def test_why_capacity_cannot_help_is_a_checked_choice(answer, message, hint):
    r = LESSON.result("why_capacity_cannot_help",
                      f"def why_capacity_cannot_help():\n    return {answer!r}")
    assert_outcome(r, message, hint)


@pytest.mark.parametrize("source,message,hint", [
    (ZERO, "all three predictors late for input 0: the aggregator returned [0.0, 2.0, ",
     "no prediction of input 0 came in time: it has no mean, None"),
    (DROPS_IN_TIME, "predictor 2 late for inputs 0 to 2 only (its first prediction takes about "
     "7 ms, the next ones 35 us): the aggregator returned [0.0, 1.5, 3.0, 4.5, 6.0], expected "
     "[0.0, 1.5, 3.0, 6.0, 8.0]", "a predictor that missed a deadline may be on time"),
    (GIVES_UP, "predictor 2 late for inputs 0 to 2 only", "a predictor that missed a deadline"),
])
def test_aggregators_wrong_on_a_predictor_late_once(tmp_path, source, message, hint):
    """Issue 28: None where no prediction came, a predictor asked again after a missed
    deadline, and a stale prediction dropped without losing the in-time one behind it."""
    assert source != AGGREGATOR  # each is a change of the reference solution
    mine = tmp_path / "mine.py"
    mine.write_text(source)
    r = {c.name: c for c in lessons.run_checks("06", file=mine, exercise="aggregator")}
    assert not r["late_once"].passed
    assert r["late_once"].message.startswith(message), r["late_once"].message
    assert r["late_once"].hint.startswith(hint)


def _step_time(body):
    return ("def predict_step_time(map_us, num_parallel_calls, batch_size, prefetch, "
            f"train_us):\n    batch_us = batch_size * map_us / (num_parallel_calls or 1)\n"
            f"    return {body}\n")


@pytest.mark.parametrize("source, message, hint", [
    (_step_time("max(train_us, batch_us) if prefetch else train_us + batch_us"), None, None),
    # the sum, prefetch or not
    (_step_time("train_us + batch_us"), "map 50 us, num_parallel_calls=None, batch 4, prefetch "
     "1, train 300 us: you predicted 500 us a step, simdist takes 308 us",
     "prefetch makes the next batch while this step trains"),
    # the longer of the two, prefetch or not
    (_step_time("max(train_us, batch_us)"), "prefetch 0, train 300 us: you predicted 300 us",
     "without prefetch nothing runs ahead"),
    # num_parallel_calls ignored
    (_step_time("max(train_us, batch_size * map_us) if prefetch else train_us + batch_size * "
                "map_us"), "num_parallel_calls=2, batch 8, prefetch 1, train 120 us: you "
     "predicted 400 us a step, simdist takes 200 us", "num_parallel_calls map calls run at once"),
    # one map call a step
    (_step_time("max(train_us, batch_us / batch_size) if prefetch else train_us + batch_us / "
                "batch_size"), "you predicted 350 us a step, simdist takes 508 us",
     "a step takes a whole batch"),
    (_step_time("'fast'"), "returned 'fast'; expected a number", "return one number"),
])
def test_predict_step_time_names_the_rule_a_wrong_answer_breaks(source, message, hint):
    assert_outcome(LESSON.result("predict_step_time", source), message, hint)


def test_the_reference_aggregator_passes_the_late_once_check():
    checks, solution = load("checks"), load("solution")
    assert checks.check_late_once(solution).startswith("late once")
    assert checks.check_slow_predictor(solution).startswith("one slow predictor")


@pytest.mark.realtf
@pytest.mark.timeout(150)
def test_padded_batch_shapes_agree_with_real_tf():
    checks, solution = load("checks"), load("solution")
    real = checks.real_padded_batch_shapes(timeout=120)
    assert real == [checks.padded_batch(checks.sim, *case) for case in checks.PADDING_CASES]
    assert real == [solution.padded_batch_shape(*case) for case in checks.PADDING_CASES]
    assert real[0] == (3, 5, 3)


# -- the notebook --------------------------------------------------------------------------------


NOTEBOOK_TEXT = ["OutOfRangeError: FIFOQueue 'q' is closed and has insufficient elements "
                 "(requested 2, current size 1)",
                 "DeadlineExceededError: Timed out waiting for notification",
                 "by priority: [1, 2, 3] [10, 20, 30]",
                 "3 loader threads: 20 steps in 3.3 ms, trainer starved 6% of the time",
                 "impatient: gave up at 2.0 ms",
                 # issue 28: the figures draw a training run, not the size() run or the
                 # end-of-sequence run
                 "the figure: training step 2, 24 spans",
                 "the figure: step 1, lanes ['CPU:0', 'RunGraph', 'tf.data']",
                 "real TF: {'static shape': '(3, None)', 'batch': [[1, 2, 0], [3, 0, 0], "
                 "[4, 5, 6]], 'empty dequeue': 'DeadlineExceededError'}",
                 "not done yet: exercise choose_pipeline",
                 "shapes=[(None, 3)], elements [(2, 3), (5, 3), (1, 3)]: yours not done, "
                 "real TF (3, 5, 3)",
                 # section 4 on 3 MPI ranks, and exercise 5 (pipeline_mpi.py) on the stub
                 "on 3 MPI ranks, the same last step end and starved time as in one process: "
                 "True",
                 "pipeline_mpi: ✗ not done yet: exercise choose_capacity",
                 # issue 28: shuffle, repeat, interleave in simdist and on real TF; exercise 6
                 "repeat(2).batch(4):             [[0, 1, 2, 3], [4, 5, 0, 1], [2, 3, 4, 5]]",
                 "interleave, cycle 2, block 2:   [10, 11, 20, 21, 12, 22, 30, 31, 32]",
                 "not done yet: exercise predict_step_time",
                 "repeat(2).batch(4), the same as simdist's: True",
                 "interleave, the same as simdist's:         True",
                 "each pass the same six numbers: True",
                 "map 20 ms x 8, 4 calls, prefetch 1, train 30 ms: yours not done, simdist 40 ms"]


@pytest.mark.notebook
@pytest.mark.timeout(300)
def test_notebook_runs_top_to_bottom(monkeypatch):
    text, images = run_notebook(ROOT / "notebooks" / "06_queues.ipynb", monkeypatch,
                                cell_timeout=150)
    assert images >= 3
    for expected in NOTEBOOK_TEXT:
        assert expected in text, expected
