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
                                            "trainer is starved 47.")
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
                                            "trainer only 3.8%")
    assert "adds no throughput" in r["pipeline"].hint


@pytest.mark.parametrize("answer, message, hint", [
    # issue 28, predict then run: section 4's answer for a batch of 2, copied
    ((8, 3), "with capacity 8 and 3 loader thread(s) the trainer is starved 18.5%",
     "that is section 4's answer for a batch of 2"),
    ((4, 5), "with capacity 4 and 5 loader thread(s) the trainer is starved 5.5%",
     "the threads keep up on average, but the queue runs dry in a stall"),
    ((8, 6), "5 loader thread(s) with capacity 32 starve the trainer only 3.9%",
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
                 "3 loader threads: 20 steps in 3.3 ms, trainer starved 5% of the time",
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
                 "pipeline_mpi: ✗ not done yet: exercise choose_capacity"]


@pytest.mark.notebook
@pytest.mark.timeout(300)
def test_notebook_runs_top_to_bottom(monkeypatch):
    text, images = run_notebook(ROOT / "notebooks" / "06_queues.ipynb", monkeypatch,
                                cell_timeout=150)
    assert images >= 3
    for expected in NOTEBOOK_TEXT:
        assert expected in text, expected
