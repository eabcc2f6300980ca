"""Lesson 09 (when the network saturates): the ps NIC accessor it reads, wrong answers with
their hints, and the notebook (test_lesson_checks.py runs its checks on the solution and the
stubs)."""


import pytest

from simdist.hardware.devices import HardwareCatalog
from simdist.training.ps_training import train_on_ps

from course.lessons import load_module
from tests.course.expect import assert_outcome
from tests.conftest import ROOT, LessonChecks, assert_notebook_shows

FOLDER = ROOT / "lessons" / "09_network"


def test_nic_loads_count_each_update_s_bytes_and_the_time_they_take_on_the_wire():
    run = train_on_ps(workers=2, ps=2, mode="async", steps=4, features=100_000, examples=2,
                      gradient_dtype="float16")
    loads = run.nic_loads()
    assert set(loads) == {"ps:0", "ps:1", "worker:0", "worker:1"}
    updates = sum(run.worker_steps.values())
    # 50,000 weights each: float16 in, float32 out; and per worker run a RunGraph request in
    # and a response out (64 bytes each), the learning rate and the bias's gradient in, the
    # global step and the bias out (RegisterGraph, once per plan, is left out)
    for task in ("ps:0", "ps:1"):
        assert 0 <= loads[task].received_bytes - updates * 100_000 < updates * (64 + 80)
        assert 0 <= loads[task].sent_bytes - updates * 200_000 < updates * (64 + 100)
    window = run.trained_ns - run.started_ns
    assert 0 < run.started_ns < run.trained_ns
    # busy = (bytes / bandwidth + messages x message_ns) over the training window, 10 GbE's
    # 1.25 GB/s and 2 us a message, to a few ns per message
    link = HardwareCatalog.default().link("10gbe")
    sent = [s for s in run.trace.spans if s.pid.endswith(" NIC") and s.lane == "egress"
            and s.name.startswith("ps:1 → ") and run.started_ns <= s.start
            and s.end <= run.trained_ns
            and not str(s.args.get("tag", "")).startswith("RegisterGraph")]
    assert (link.bandwidth, link.message_ns) == (1_250_000_000, 2_000) and len(sent) > 0
    assert loads["ps:1"].busy_out == pytest.approx(
        (loads["ps:1"].sent_bytes / 1.25e9 + len(sent) * 2e-6) / (window / 1e9), rel=1e-3)
    assert loads["ps:0"].busy == loads["ps:0"].busy_out > loads["ps:0"].busy_in
    # what the ps sends, the workers receive
    assert sum(loads[f"worker:{k}"].received_bytes for k in range(2)) == sum(
        loads[f"ps:{i}"].sent_bytes for i in range(2))


def test_the_initial_values_are_not_a_training_step_and_a_shared_nic_queues():
    alone = train_on_ps(workers=1, mode="async", steps=3, features=100_000, examples=2)
    nic = alone.nic_loads()["ps:0"]
    # not the 400 kB init (nor RegisterGraph): RunGraph requests (64 bytes, one per run), the
    # learning rate and the bias's gradient
    assert nic.received_bytes - alone.global_step * 400_000 < (alone.global_step + 1) * 100
    assert nic.queued_ns == 0  # one worker never waits behind another
    two = train_on_ps(workers=2, mode="async", steps=4, features=1_000_000, examples=2)
    assert two.nic_loads()["ps:0"].queued_ns > 1_000_000  # 3.2 ms transfers overlap


def test_sync_float16_gradients_are_counted_for_the_worker_that_sent_them():
    # the float16 gradient is cast back on the ps: the accumulator's "source" is still the
    # worker (its local step), so gradients_by_worker splits them right
    run = train_on_ps(workers=2, ps=3, mode="sync", steps=3, features=1_200, examples=2,
                      gradient_dtype="float16", step_us=[1000, 3000])
    counts = run.gradients_by_worker()
    assert set(counts) == {0, 1}
    assert all(applied > 0 for applied, _ in counts.values())
    assert sum(applied for applied, _ in counts.values()) >= 2 * 3


# -- the checks ------------------------------------------------------------------------------

LESSON = LessonChecks(FOLDER)
_result = LESSON.result


BYTES = "BYTES = {'float32': 4, 'float16': 2}\ndef ps_nic_bytes(parameters, workers, ps, dtype):\n"
WRONG_BYTES = {
    "per worker": ("    return parameters * BYTES[dtype] // ps, parameters * 4 // ps",
                   "ps_nic_bytes(100000, 2, 1, 'float32') returned (400000, 400000)",
                   "every worker pushes its own gradient"),
    "float16 both ways": ("    return (workers * parameters * BYTES[dtype] // ps,) * 2",
                          "ps_nic_bytes(100000, 3, 1, 'float16') returned (600000, 600000)",
                          "only the gradient is cast to float16"),
    "float16 ignored": ("    return (workers * parameters * 4 // ps,) * 2",
                        "ps_nic_bytes(100000, 3, 1, 'float16') returned (1200000, 1200000)",
                        "a float16 value takes 2 bytes"),
    "one ps": ("    return workers * parameters * BYTES[dtype], workers * parameters * 4",
               "ps_nic_bytes(120000, 2, 3, 'float16') returned (480000, 960000)",
               "each ps holds 1/ps of the weights"),
    "bits": ("    return workers * parameters * BYTES[dtype] * 8 // ps, "
             "workers * parameters * 32 // ps", "returned (6400000, 6400000)",
             "bytes, not bits"),
    "one number": ("    return workers * parameters * 4 // ps",
                   "returned 800000, expected a pair of numbers (received, sent)",
                   "return two numbers"),
}


@pytest.mark.parametrize("mistake", WRONG_BYTES)
def test_wrong_byte_counts_get_a_hint_aimed_at_the_mistake(mistake):
    body, message, hint = WRONG_BYTES[mistake]
    r = _result("ps_nic_bytes", BYTES + body)
    assert not r.passed and message in r.message, r.message
    assert r.hint.startswith(hint), r.hint
    if "pair" not in message:
        assert "the simulated ps NIC received" in r.message
        assert r.detail.startswith("received = workers x parameters")


def test_a_pair_may_be_a_list_and_its_numbers_numpy_s():
    """Issue 28, one rule for the types of answers (course/answers.py): a pair is a tuple or
    a list, its numbers ints or floats, NumPy's included."""
    body = ("    import numpy as np\n"
            "    return [np.int64(workers * parameters * BYTES[dtype] // ps), "
            "workers * parameters * 4 / ps]")
    assert _result("ps_nic_bytes", BYTES + body).passed


def test_greedy_load_balancing_is_said_to_place_never_to_cut():
    """Issue 28: GreedyLoadBalancingStrategy never cut a variable, and TF 2.21 has none."""
    for name, words in (("lesson.md", ("it never cuts one", "gone from TF 2.21",
                                       "fixed_size_partitioner")),
                        ("lesson.zh.md", ("从不切分变量", "TF 2.21 里已经没有了",
                                          "fixed_size_partitioner"))):
        text = (FOLDER / name).read_text(encoding="utf-8")
        assert all(word in text for word in words), name


@pytest.mark.parametrize("answer, message, hint", [
    (1, "with 1 ps task the busiest ps NIC is busy 72% of the time (at most 50% wanted)",
     "each ps NIC carries 1/ps of every update's bytes"),
    (2, "with 2 ps tasks the busiest ps NIC is busy 57%", "each ps NIC carries 1/ps"),
    (4, "3 ps tasks also keep every ps NIC at most 50% busy (44%)", "the fewest that do"),
    (True, "choose_ps_shards returned True, expected an int 1..8", "return the number"),
])
def test_wrong_shard_counts_get_what_is_wrong_and_a_hint(answer, message, hint):
    r = _result("choose_ps_shards", f"def choose_ps_shards():\n    return {answer!r}")
    assert not r.passed and r.message.startswith(message), r.message
    assert r.hint.startswith(hint), r.hint


@pytest.mark.parametrize("answer, message, hint", [
    (0, "with 0 backup workers the steps average 1,063 gradients/s; with 1, 1,609",
     "without a backup worker every step waits for the 6 ms worker"),
    (1, "with 1 backup workers the steps average 1,609 gradients/s; with 2, 1,874",
     "one backup leaves the 3 ms worker"),
    (3, "with 3 backup workers the steps average 1,433 gradients/s; with 2, 1,874",
     "once the slow workers are backups"),
    (5, "with 5 backup workers the steps average 526 gradients/s; with 4, 1,094",
     "the steps are short, but each averages a single gradient"),
    (6, "backup_workers_for_throughput returned 6, expected an int 0..5", "return the number"),
])
def test_wrong_backup_counts_get_what_is_wrong_and_a_hint(answer, message, hint):
    r = _result("backup_workers_for_throughput",
                f"def backup_workers_for_throughput():\n    return {answer!r}")
    assert not r.passed and r.message.startswith(message), r.message
    assert r.hint.startswith(hint), r.hint


# -- exercise 6: the rows a sparse update changes, the bytes of its IndexedSlices ----------

SPARSE = LessonChecks(FOLDER)


@pytest.mark.parametrize("answer, message, hint", [
    (([0, 1, 3, 6, 8], 160), None, None),
    (([0, 1, 3, 6, 8], 100), "you said 100 bytes; the simulated gradient holds 160 bytes "
     "(indices [3, 8, 3, 1, 8, 3, 6, 0])", "the IndexedSlices keeps one row of values per "
     "lookup, repeated ids too"),
    (([0, 1, 3, 6, 8], 128), "you said 128 bytes", "the indices travel too"),
    (([0, 1, 3, 6, 8], 99), "you said 99 bytes", "values: one row of 4 float32 per lookup"),
    (([3, 8, 3, 1, 8, 3, 6, 0], 160), "you said rows [3, 8, 3, 1, 8, 3, 6, 0] change; the "
     "simulated step changed [0, 1, 3, 6, 8]", "each changed row once, in increasing order"),
    (([0, 1, 3], 160), "you said rows [0, 1, 3] change", "a lookup's gradient touches exactly"),
    (160, "sparse_update returned 160, expected a pair (rows, bytes)", "return (the rows"),
])
def test_sparse_update_is_checked_against_the_simulated_step(answer, message, hint):
    r = SPARSE.result("sparse_update", f"def sparse_update():\n    return {answer!r}")
    assert_outcome(r, message, hint)


def test_the_simulated_lookup_gradient_keeps_repeated_ids_and_the_update_sums_them():
    """Real TF 2.21 (tf.compat.v1, the notebook's exercise 6 cell) gives these values: an
    IndexedSlices of indices [2, 5, 2], values [[1, 1], [2, 2], [3, 3]], 36 bytes; rows 2
    and 5 change, row 2 by 1 + 3."""
    import simdist.graph as tf

    checks = load_module(FOLDER / "checks.py", "_lesson09_checks_test")
    step = checks.sparse_step(tf, ids=[2, 5, 2])
    assert step["type"] == "IndexedSlices" and step["indices"] == [2, 5, 2]
    assert step["values"] == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]] and step["bytes"] == 36
    assert step["changed"] == [2, 5]
    assert step["after"] == {"2": [-4.0, -4.0], "5": [-2.0, -2.0]}


NOTEBOOK_TEXT = ["4 MB per update in each direction: 3.2 ms on the wire",
                 "the most one ps NIC can serve: 312 updates/s",
                 "simulated: busy 36.7% in, 36.7% out; 4,000,080 bytes in per update",
                 "ps NIC busy 72% of the time",
                 "sparse         221 bytes in",
                 "1 backup workers: ",
                 "2 ps: real TF",
                 "not done yet: exercise ps_nic_bytes",
                 # section 8 and exercises 4-5: simdist ps and exercise 5 over MPI ranks
                 "async training: global step 12 after",
                 "the same trace on 1 and 4 MPI ranks, byte for byte: True",
                 "not done yet: exercise choose_ps_for_float16",
                 "ps_nic_mpi: ✗ not done yet: exercise choose_ps_for_float16",
                 # section 5's repeated ids, and exercise 6's real-TF cell
                 "gradient: IndexedSlices, indices [2, 5, 2], values [[1.0, 1.0], [2.0, 2.0], "
                 "[3.0, 3.0]], 36 bytes",
                 "rows changed: [2, 5], now {'2': [-4.0, -4.0], '5': [-2.0, -2.0]}",
                 "       16 rows: 16 lookups of 7 distinct rows, 216 bytes in per update",
                 "1,000,000 rows: 16 lookups of 16 distinct rows, 216 bytes in per update",
                 "real TF: IndexedSlices, indices [3, 8, 3, 1, 8, 3, 6, 0], 160 bytes; rows "
                 "changed [0, 1, 3, 6, 8], row 3 now [-10.0, -10.0, -10.0, -10.0]",
                 "yours:   not done yet"]


@pytest.mark.notebook
@pytest.mark.timeout(300)
def test_notebook_runs_top_to_bottom(monkeypatch):
    # two figures: the ps NIC's timeline and the throughput curve
    assert_notebook_shows(ROOT / "notebooks" / "09_network.ipynb", monkeypatch, NOTEBOOK_TEXT,
                          images=2, cell_timeout=200)
