"""Evaluation while training on a real ParameterServerStrategy
(realdist/training/parameter_server_eval.py) against simdist's (simdist/training/evaluation.py):
with one worker and no failure, inline, distributed and exactly_once give simdist's metric
and count every example once; the side-car evaluator process evaluates or skips every
checkpoint the coordinator wrote, each metric that of the checkpoint's weights; a worker
SIGKILLed as the evaluation begins is survived, exactly_once still counts each example once
and distributed counts what its surviving worker's repeated shard gave. About 75 s of real
clusters on 2 busy cores."""

import numpy as np
import pytest

from realdist.cli import main as realdist_main
from realdist.training.parameter_server_eval import check_options, run_evaluation
from simdist.commands.cli import main as simdist_main
from simdist.training.evaluation import simulate_evaluation
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise, RunResult

EVAL = {"eval_examples": 64, "eval_batch": 16, "shards": 2}
ONE = Exercise(strategy="parameter_server", workers=1, ps=2, steps=8)
#: 10 epochs of 4 steps: a checkpoint after each
SIDECAR = Exercise(strategy="parameter_server", workers=1, ps=2, steps=40, global_batch=256)
CLI = ["run", "parameter_server", "--workers", "1", "--ps", "2", "--steps", "8",
       "--evaluation", "distributed"]


def _numpy_loss(exercise, weights, examples, visits=None):
    model, data = exercise.build()
    losses = model.per_example_loss(weights, data.x[:examples], data.y[:examples])
    return float(np.average(losses.astype(np.float64), weights=visits))


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    """{style: (simdist run, realdist run)}; distributed through both commands."""
    runs = {style: (simulate_evaluation(ONE, style, **EVAL),
                    run_evaluation(ONE, style, timeout=200, **EVAL))
            for style in ("inline", "exactly_once")}
    out = tmp_path_factory.mktemp("eval")
    sim, real = out / "sim.json", out / "real.json"
    assert simdist_main([*CLI, "--result", str(sim)]) == 0
    assert realdist_main([*CLI, "--result", str(real), "--timeout", "200"]) == 0
    runs["distributed"] = RunResult.load(sim), RunResult.load(real)
    return runs


@pytest.mark.realtf
@pytest.mark.timeout(300)
@pytest.mark.parametrize("style", ["inline", "distributed", "exactly_once"])
def test_one_worker_gives_simdist_s_metric_and_counts_each_example_once(parity, style):
    sim, real = parity[style]
    examples = EVAL["eval_examples"] if style != "distributed" else 256  # the CLI's default
    np.testing.assert_allclose(real.losses, sim.losses, rtol=1e-5)
    s, r = sim.metadata["evaluation"], real.metadata["evaluation"]
    assert r["style"] == s["style"] == style
    assert r["counted"] == s["counted"] == examples
    np.testing.assert_array_equal(r["visits"], np.ones(examples))
    assert r["metric"] == pytest.approx(s["metric"], rel=1e-5)
    assert r["metric"] == pytest.approx(_numpy_loss(ONE, real.weights, examples), rel=1e-5)


@pytest.mark.realtf
@pytest.mark.timeout(300)
def test_evaluation_functions_are_numbered_after_the_training_s_as_in_simdist(parity):
    for style, name in (("distributed", "eval_step"), ("exactly_once", "eval_shard")):
        sim, real = parity[style]
        assert real.metadata["function_runs"] == sim.metadata["function_runs"]
        assert real.metadata["functions"] == sim.metadata["functions"]
        spans = [s.name for s in real.trace.spans if s.name.startswith(name)]
        assert spans == [f for f in sim.metadata["function_runs"] if f.startswith(name)]
    inline = [(s.pid, s.lane, s.name) for s in parity["inline"][1].trace.spans
              if s.cat == "evaluation"]
    assert inline == [("chief:0", "evaluation", "evaluate")]


@pytest.mark.realtf
@pytest.mark.timeout(300)
def test_realdist_run_prints_the_evaluation(capsys):
    assert realdist_main([*CLI[:-1], "inline", "--timeout", "200"]) == 0
    out = capsys.readouterr().out
    assert ("realdist: evaluation inline: loss " in out
            and " over 256 counted visits of 256 examples (0 counted more than once, 0 never)"
            in out)


@pytest.mark.realtf
@pytest.mark.timeout(300)
def test_the_sidecar_evaluates_or_skips_every_checkpoint_the_coordinator_wrote():
    real = run_evaluation(SIDECAR, "sidecar", poll_s=0.2, timeout=200, **EVAL)
    sim = simulate_evaluation(SIDECAR, "sidecar", **EVAL)
    ev, sim_ev = real.metadata["evaluation"], sim.metadata["evaluation"]
    names = [c["name"] for c in ev["checkpoints"]]
    assert names == [c["name"] for c in sim_ev["checkpoints"]] == [f"ckpt-{i}"
                                                                  for i in range(10)]
    assert [c["step"] for c in ev["checkpoints"]] == list(range(4, 41, 4))
    assert ev["evaluated"][-1] == "ckpt-9"  # the last one is never skipped
    assert sorted(ev["evaluated"] + ev["skipped"], key=names.index) == names
    for real_c, sim_c in zip(ev["checkpoints"], sim_ev["checkpoints"]):
        for key in sim_c["weights"]:
            np.testing.assert_allclose(real_c["weights"][key], sim_c["weights"][key],
                                       atol=1e-5)
    by_name = {c["name"]: c["weights"] for c in ev["checkpoints"]}
    for name in ev["evaluated"]:
        assert ev["metrics"][name] == pytest.approx(
            _numpy_loss(SIDECAR, by_name[name], EVAL["eval_examples"]), rel=1e-5)
        assert ev["metrics"][name] == pytest.approx(sim_ev["metrics"][name], rel=1e-5)
    wrote = [i.name for i in real.trace.instants if i.name.startswith("wrote")]
    assert wrote == [f"wrote {n}" for n in names]


@pytest.fixture(scope="module")
def killed():
    """Two workers, one ps, one process each; worker 1 SIGKILLed as the evaluation begins."""
    exercise = Exercise(strategy="parameter_server", workers=2, ps=1, steps=4)
    return exercise, {style: run_evaluation(exercise, style, eval_examples=256, eval_batch=8,
                                            shards=8, kill=(1, 0.001), timeout=200)
                      for style in ("distributed", "exactly_once")}


@pytest.mark.realtf
@pytest.mark.timeout(300)
def test_a_worker_killed_during_distributed_evaluation_is_survived_at_least_once(killed):
    exercise, runs = killed
    run = runs["distributed"]
    assert [k["task"] for k in run.metadata["kills"]] == ["worker:1"]
    ev = run.metadata["evaluation"]
    assert len([f for f in run.metadata["function_runs"] if f.startswith("eval_step")]) == 32
    # 32 batches of 8, each function one batch: 256 counted, whichever worker ran them;
    # the survivor repeats its own shard, so what it counted is not each example once
    assert ev["counted"] == 256 and ev["visits"].sum() == 256
    assert ev["metric"] == pytest.approx(
        _numpy_loss(exercise, run.weights, 256, ev["visits"]), rel=1e-5)


@pytest.mark.realtf
@pytest.mark.timeout(300)
def test_a_worker_killed_during_exactly_once_evaluation_still_counts_each_example_once(killed):
    exercise, runs = killed
    run = runs["exactly_once"]
    assert [k["task"] for k in run.metadata["kills"]] == ["worker:1"]
    ev = run.metadata["evaluation"]
    np.testing.assert_array_equal(ev["visits"], np.ones(256))
    assert ev["metric"] == pytest.approx(_numpy_loss(exercise, run.weights, 256), rel=1e-5)


@pytest.mark.parametrize("options, message", [
    ({"style": "offline"}, r"evaluation style 'offline': expected one of inline, "),
    ({"style": "inline", "eval_batch": 0}, r"eval_batch must be an int >= 1, got 0"),
    ({"style": "inline", "eval_examples": 5000}, r"the dataset has only 1024 examples"),
    ({"style": "sidecar", "poll_s": 0}, r"poll_s must be seconds in \(0, 60\], got 0"),
    ({"style": "inline", "kill": (1, 0)}, r"only the distributed and exactly_once styles"),
    ({"style": "distributed", "kill": (2, 0)}, r"kill=\(2, 0\): expected \(worker, "),
])
def test_bad_evaluation_options_are_refused(options, message):
    with pytest.raises(InvalidArgumentError, match=message):
        check_options(Exercise(strategy="parameter_server", workers=2), **options)


def test_evaluation_is_parameter_server_s_option(capsys):
    assert realdist_main(["run", "mirrored", "--evaluation", "inline"]) == 2
    assert ("realdist: error: --evaluation is parameter_server's option, not mirrored's"
            in capsys.readouterr().err)
