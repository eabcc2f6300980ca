"""Evaluation while training with ParameterServerStrategy (simdist/training/evaluation.py):
inline on the coordinator, inline distributed (at-least-once), exactly-once, and a side-car
evaluator that skips checkpoints. Each metric is checked against numpy on the same weights."""

import numpy as np
import pytest

from simdist.training.evaluation import simulate_evaluation
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise

EVAL = 256  # the first 256 examples, 8 batches of 32
#: worker 1 fails at 2.4 ms, during the evaluation (training ends at about 2.2 ms)
DURING_EVAL = ("worker:1@2400us+100us",)


def _run(style, failures=(), **options):
    exercise = Exercise(strategy="parameter_server", workers=2, steps=20, failures=failures)
    return exercise, simulate_evaluation(exercise, style, eval_examples=EVAL, **options)


def _numpy_loss(exercise, weights, visits=None):
    """The mean per-example loss of ``weights`` on the evaluation set, numpy only (each
    example weighted by its visits when given)."""
    model, data = exercise.build()
    losses = model.per_example_loss(weights, data.x[:EVAL], data.y[:EVAL]).astype(np.float64)
    return float(np.average(losses, weights=visits))


def _runs(run, prefix):
    return {f: n for f, n in run.metadata["function_runs"].items() if f.startswith(prefix)}


@pytest.mark.parametrize("style", ["inline", "distributed", "exactly_once"])
def test_each_inline_style_gives_the_numpy_metric_of_the_final_weights(style):
    exercise, run = _run(style)
    ev = run.metadata["evaluation"]
    assert ev["style"] == style and ev["counted"] == EVAL
    np.testing.assert_array_equal(ev["visits"], np.ones(EVAL))
    assert ev["metric"] == pytest.approx(_numpy_loss(exercise, run.weights), rel=1e-6)


def test_inline_direct_evaluation_is_a_span_on_the_chief():
    _, run = _run("inline")
    spans = [s for s in run.trace.spans if s.cat == "evaluation"]
    assert [(s.pid, s.lane, s.name) for s in spans] == [("chief:0", "evaluation", "evaluate")]
    assert spans[0].dur > 0 and not _runs(run, "eval")  # nothing scheduled on the workers


def test_distributed_evaluation_is_at_least_once_a_failure_double_counts_and_misses():
    exercise, run = _run("distributed", DURING_EVAL)
    ev = run.metadata["evaluation"]
    assert _runs(run, "eval_step")["eval_step#22"] == 2  # re-run after worker 1 failed
    # worker 0 ran one function more and wrapped around its shard; worker 1's last batch
    # was never visited
    np.testing.assert_array_equal(ev["visits"][::32], [2, 1, 1, 1, 1, 1, 1, 0])
    truth = _numpy_loss(exercise, run.weights)
    assert ev["metric"] != pytest.approx(truth, rel=1e-4)
    assert ev["metric"] == pytest.approx(_numpy_loss(exercise, run.weights, ev["visits"]),
                                         rel=1e-6)


def test_exactly_once_counts_each_example_once_despite_the_failure():
    exercise, run = _run("exactly_once", DURING_EVAL)
    ev = run.metadata["evaluation"]
    runs = _runs(run, "eval_shard")
    assert len(runs) == 4 and runs["eval_shard#22"] == 2 and sum(runs.values()) == 5
    np.testing.assert_array_equal(ev["visits"], np.ones(EVAL))
    assert ev["metric"] == pytest.approx(_numpy_loss(exercise, run.weights), rel=1e-6)


def test_the_sidecar_skips_checkpoints_written_faster_than_it_looks():
    exercise = Exercise(strategy="parameter_server", workers=2, steps=40, global_batch=256)
    run = simulate_evaluation(exercise, "sidecar", eval_examples=EVAL, poll_ns=1_000_000)
    ev = run.metadata["evaluation"]
    names = [c["name"] for c in ev["checkpoints"]]
    assert len(names) == 10  # one per epoch of 4 steps, every ~0.49 ms
    assert ev["skipped"] and ev["evaluated"][-1] == names[-1]
    assert sorted(ev["evaluated"] + ev["skipped"], key=names.index) == names
    by_name = {c["name"]: c["weights"] for c in ev["checkpoints"]}
    for name in ev["evaluated"]:
        assert ev["metrics"][name] == pytest.approx(_numpy_loss(exercise, by_name[name]),
                                                    rel=1e-6)
    lane = [(i.pid, i.name) for i in run.trace.instants if i.name.startswith("skipped")]
    assert lane == [("evaluator:0", f"skipped {n}") for n in ev["skipped"]]
    evaluated = [s.name for s in run.trace.spans if s.cat == "evaluation"]
    assert evaluated == [f"evaluate {n}" for n in ev["evaluated"]]
    # looking often enough, it evaluates every checkpoint
    often = simulate_evaluation(exercise, "sidecar", eval_examples=EVAL, poll_ns=200_000)
    assert often.metadata["evaluation"]["skipped"] == []


@pytest.mark.parametrize("options, message", [
    ({"style": "offline"}, r"evaluation style 'offline': expected one of inline, "),
    ({"style": "inline", "shards": 0}, r"shards must be an int >= 1, got 0"),
    ({"style": "inline", "eval_examples": 5000}, r"the dataset has only 1024 examples"),
])
def test_bad_evaluation_options_are_refused(options, message):
    with pytest.raises(InvalidArgumentError, match=message):
        simulate_evaluation(Exercise(strategy="parameter_server"), **options)


def test_simdist_run_parameter_server_evaluation_prints_it_and_saves_it(tmp_path, capsys):
    from simdist.commands.cli import main
    from simdist.training.exercises import RunResult

    path = tmp_path / "run.json"
    assert main(["run", "parameter_server", "--workers", "2", "--steps", "20", "--fail",
                 DURING_EVAL[0], "--evaluation", "distributed", "--result", str(path)]) == 0
    out = capsys.readouterr().out
    assert ("evaluation distributed: loss 0.011486 over 256 counted visits of 256 examples "
            "(32 counted more than once, 32 never)") in out
    exercise, run = _run("distributed", DURING_EVAL)
    saved = RunResult.load(path).metadata["evaluation"]
    assert saved["visits"] == run.metadata["evaluation"]["visits"].tolist()
    assert saved["metric"] == run.metadata["evaluation"]["metric"]


def test_simdist_run_parameter_server_sidecar_adds_the_evaluator_task(capsys):
    from simdist.commands.cli import main

    assert main(["run", "parameter_server", "--steps", "40", "--global-batch", "256",
                 "--evaluation", "sidecar"]) == 0
    out = capsys.readouterr().out
    assert "on 5 tasks" in out  # chief, 2 workers, 1 ps and the evaluator
    assert "evaluation sidecar: 10 checkpoints, evaluated ckpt-0 " in out


def test_evaluation_is_an_option_of_parameter_server_only(capsys):
    from simdist.commands.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["run", "mirrored", "--evaluation", "inline"])
    assert stop.value.code == 2 and "unrecognized arguments: --evaluation" in \
        capsys.readouterr().err
