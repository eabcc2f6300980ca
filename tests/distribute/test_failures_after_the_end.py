"""A failure scheduled after training has ended never happens (TF's job is over): it does
not stretch the run's simulated time, fail an abandoned thread, or leave every task 0% busy,
and the report says it never happened (issue 30, item 9)."""

import pytest

from simdist.commands.cli import main


def test_simdist_run_reports_the_time_training_took_not_the_failure_s(capsys):
    assert main(["run", "parameter_server", "--steps", "5",
                 "--fail", "worker:1@100s+1ms"]) == 0
    out = capsys.readouterr().out
    end = out.splitlines()[0].rsplit("simulated time ", 1)[1]
    assert int(end.split()[0]) < 10_000_000  # ns: training takes well under 10 ms
    assert "simulated time: 100.0 s" not in out
    chief = next(line for line in out.splitlines() if line.startswith("chief:0"))
    assert float(chief.split()[5]) > 50  # busy %: the chief coordinates all the run
    assert "failure worker:1@100s+1ms never happened: training ended first" in out


def test_a_worker_still_down_at_the_end_does_not_stretch_the_run(capsys):
    assert main(["run", "parameter_server", "--steps", "5", "--fail", "worker:1@200us+1s"]) == 0
    out = capsys.readouterr().out
    assert int(out.splitlines()[0].rsplit("simulated time ", 1)[1].split()[0]) < 10_000_000
    assert "worker:1 was still down when training ended" in out


def test_a_failure_during_training_still_happens():
    from simdist.training.exercises import Exercise
    from simdist.training.loop import simulate_exercise

    run = simulate_exercise(Exercise(strategy="parameter_server", steps=20, workers=2,
                                     failures=("worker:1@250us+200us",)))
    assert run.metadata["failures_never_happened"] == []
    assert any(e.name == "task failed" for e in run.trace.instants)


@pytest.mark.usefixtures("fresh_tf1")
def test_simdist_ps_finishes_when_a_ps_would_fail_after_the_end(capsys):
    assert main(["ps", "--fail", "ps:0@1000s+1ms"]) == 0
    out = capsys.readouterr().out
    assert "failed" not in out
    assert "failure ps:0@1000s+1ms never happened: every worker had ended" in out


@pytest.mark.usefixtures("fresh_tf1")
def test_train_on_ps_ends_with_its_workers_not_at_a_later_failure():
    from simdist.training.ps_training import train_on_ps

    run = train_on_ps(workers=3, mode="sync", failures=["worker:1@1000s"])
    assert run.end_time < 2e9  # the chief's 1 s grace period, not 1000 s
    assert run.failures_never_happened == ["worker:1@1000s"]
    assert not [e for e in run.trace.instants if e.cat == "fault"]
