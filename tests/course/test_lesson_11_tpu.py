"""Lesson 11 (TPUs and TPUStrategy): wrong answers with their hints, and the notebook
(test_lesson_checks.py runs its checks on the solution and the stubs)."""


import pytest


from tests.course.expect import assert_outcome
from tests.conftest import ROOT, LessonChecks, assert_notebook_shows

FOLDER = ROOT / "lessons" / "11_tpu"
LESSON = LessonChecks(FOLDER)
_result = LESSON.result


ICI = "import math\ndef ici_bytes_per_chip(x, y, n):\n"
WRONG_ICI = {
    "one ring over all chips": ("    return 2 * (x * y - 1) * math.ceil(n / (x * y))",
                                "ici_bytes_per_chip(4, 2, 76840) returned 134,470; each chip "
                                "of the simulated 4x2 slice sent 192,100 bytes",
                                "the torus does not run one ring"),
    "reduce-scatter only": ("    return sum((p - 1) * math.ceil(n / p) for p in (x, y))",
                            "returned 96,050", "a ring all-reduce is a reduce-scatter"),
    "X only": ("    return 2 * (x - 1) * math.ceil(n / x)", "returned 115,260",
               "after the X rings come the Y rings"),
    "bits": ("    return 16 * sum((p - 1) * math.ceil(n / p) for p in (x, y))",
             "returned 1,536,800", "bytes, not bits"),
    "the whole tensor each round": ("    return 2 * (x - 1 + y - 1) * n", "returned 614,720",
                                    "a ring of p chips sends 2(p - 1) pieces"),
    # issue 28: rounding down, or not per piece, passed while no torus had a side of 3
    "floor": ("    return sum(2 * (p - 1) * (n // p) for p in (x, y))",
              "ici_bytes_per_chip(4, 3, 76840) returned 217,712; each chip of the simulated 4x3 "
              "slice sent 217,716 bytes", "a piece of nbytes / p that does not divide evenly is "
              "rounded UP"),
    "rounded once": ("    return round(sum(2 * (p - 1) * n / p for p in (x, y)))",
                     "ici_bytes_per_chip(4, 3, 76840) returned 217,713", "a piece of nbytes / p"),
    # issue 28: the sweep's figure for the 2x2 torus, copied (the sweep now runs after the
    # checks)
    "copied": ("    return 153_680", "ici_bytes_per_chip(4, 2, 76840) returned 153,680",
               "153,680 is one slice's count for one all-reduce"),
    "a float": ("    return sum(2 * (p - 1) * n / p for p in (x, y))",
                "returned 192100.0, expected an int", "return a number of bytes"),
}


@pytest.mark.parametrize("mistake", WRONG_ICI)
def test_wrong_ici_bytes_get_a_hint_aimed_at_the_mistake(mistake):
    body, message, hint = WRONG_ICI[mistake]
    r = _result("ici_bytes_per_chip", ICI + body)
    assert not r.passed and message in r.message, r.message
    assert r.hint.startswith(hint), r.hint


@pytest.mark.parametrize("answer, message, hint", [
    ("b", None, None),
    ("a", "'a' (in proportion to the chips) is not why", "each chip sends pieces of n / p"),
    ("c", "'c' (they shrink with the piece n / p)", "the pieces get smaller, but"),
    ("d", "'d' (exactly 2 n whatever the size)", "a torus runs a ring along each dimension"),
    (["b"], "how_ici_bytes_grow returned ['b'], expected one of", "return the letter"),
])
def test_how_ici_bytes_grow_is_a_checked_choice(answer, message, hint):
    r = _result("how_ici_bytes_grow", f"def how_ici_bytes_grow():\n    return {answer!r}")
    assert_outcome(r, message, hint)
    if message is None:  # the pass message quotes the simulator: 4x4 sends more, below 4 n
        assert "on 2x2 a chip sends 153,680 of 76,840 bytes, on 4x4 230,520" in r.message


def test_the_ici_sweep_runs_after_the_checks_of_exercise_1():
    """Issue 28, predict then run: the lesson prints each chip's ICI bytes only after the
    learner's answers are checked."""
    for name in ("lesson.md", "lesson.zh.md"):
        text = (FOLDER / name).read_text(encoding="utf-8")
        sweep = text.index("span.args['ici_bytes_per_chip']")
        assert text.index('check("ici_bytes_per_chip")') < sweep, name
        assert text.index('check("how_ici_bytes_grow")') < sweep, name
        assert "2(X - 1) n / X + 2(Y - 1) n / Y" not in text[:sweep], name


@pytest.mark.parametrize("answer, message, hint", [
    (9, "with steps_per_execution=9 the cores are busy 47.4% of the time (at least 90% "
        "wanted)", "90% busy means the 100 us dispatch is a ninth"),
    (16, "with steps_per_execution=16 the cores are busy 61.6%", "90% busy means"),
    (89, "with steps_per_execution=89 the cores are busy 89.9%", "90% busy means"),
    (100, "steps_per_execution=99 also keeps the cores 90% busy (90.83%)",
     "the smallest that does"),
    (0, "steps_per_execution_for_90_percent returned 0, expected an int 1..1000",
     "return steps_per_execution"),
])
def test_wrong_steps_per_execution_get_what_is_wrong_and_a_hint(answer, message, hint):
    r = _result("steps_per_execution_for_90_percent",
                f"def steps_per_execution_for_90_percent():\n    return {answer!r}")
    assert not r.passed and r.message.startswith(message), r.message
    assert r.hint.startswith(hint), r.hint


@pytest.mark.parametrize("body, message, hint", [
    ("{b for b in c if b % 8 == 0}", "returned [48, 64, 96, 128, 256]: it includes [48, 96], "
     "which fail", "without drop_remainder the epoch ends with a partial batch"),
    ("{b for b in c if 1024 % b == 0 or b % 8 == 0}", "includes [4, 48, 96]",
     "each of the 8 cores gets the same static shape"),
    ("{b for b in c if b % 8 == 0 or 1024 % b == 0 and b > 8}", "includes [48, 96]",
     "without drop_remainder"),
    ("{b for b in c if 1000 % b == 0 or b % 8 == 0 and 1024 % b == 0}",
     "it includes [4, 100], which fail", "each of the 8 cores gets the same static shape"),
    # issue 28: two rules that passed while no candidate told them from the right one
    ("{b for b in c if 1024 % b == 0}", "returned [4, 64, 128, 256]: it includes [4], which "
     "fail", "each of the 8 cores gets the same static shape"),
    ("{b for b in c if b % 4 == 0 and 1024 % b == 0}", "it includes [4], which fail",
     "each of the 8 cores gets the same static shape"),
    ("{64, 128}", "it leaves out [256], which train", "a multiple of 8 that divides 1,024"),
    ("64", "returned 64, expected a set of ints", "return a set of batch sizes"),
    ("{64, 128, 256.0}", "expected a set of ints", "return a set of batch sizes"),
])
def test_wrong_batch_sets_get_what_is_wrong_and_a_hint(body, message, hint):
    r = _result("batches_that_compile", f"def batches_that_compile(c):\n    return {body}")
    assert not r.passed and message in r.message, r.message
    assert r.hint.startswith(hint), r.hint


@pytest.mark.parametrize("body", ["[64, 128, 256]", "(256, 128, 64, 64)",
                                  "frozenset({64, 128, 256})"])
def test_the_right_batches_pass_as_any_collection(body):
    """Issue 28, one rule for the types of answers (course/answers.py): a choice whose order
    says nothing may be a set, a list or a tuple."""
    r = _result("batches_that_compile", f"def batches_that_compile(c):\n    return {body}")
    assert r.passed, r.message


def test_the_lesson_says_tf_2_21_pads_a_partial_batch_by_default():
    """Issue 28: a partial batch is an error with static shapes only, not by default."""
    for name in ("lesson.md", "lesson.zh.md"):
        text = (FOLDER / name).read_text(encoding="utf-8")
        assert "experimental_enable_dynamic_batch_size=False" in text, name
        assert "tf.distribute.RunOptions" in text, name
    assert "experimental_enable_dynamic_batch_size=False" in (FOLDER / "exercises.py").read_text()


NOTEBOOK_TEXT = ["v3-32     32 cores   16 chips   4 x 4  torus   4 host(s)",
                 "by hand: 5,874 ns",
                 "closed form: 5,874 ns",
                 " 8 cores, 2x2 torus: all-reduce of 76,840 bytes takes 5,875 ns, each chip "
                 "sends 153,680 bytes",
                 "steps_per_execution=1: utilization 9.1%",
                 "steps_per_execution=8: utilization 44.5%",
                 "K= 32: 76.2%",
                 "global batch 48: TPUStrategy: the global batch of step 21 has shape (16, 8)",
                 "not done yet: exercise ici_bytes_per_chip"]


@pytest.mark.notebook
@pytest.mark.timeout(300)
def test_notebook_runs_top_to_bottom(monkeypatch):
    # three figures: the timelines at K = 1 and K = 8, and the utilization curve
    assert_notebook_shows(ROOT / "notebooks" / "11_tpu.ipynb", monkeypatch, NOTEBOOK_TEXT,
                          images=3, cell_timeout=200)
