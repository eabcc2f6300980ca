"""Fault tolerance as TF1 documents it, simulated: a failed ps loses its variables and the
chief restores the last checkpoint (or starts over without one); a failed worker's process
dies and comes back stateless; a failed chief restores too. Failures are injected at a
simulated time (``train_on_ps(failures=["ps:0@8ms+2ms"])``) and are instants in the trace."""

import pytest

from simdist.base.errors import InvalidArgumentError
from simdist.distribute.failures import Failure
from simdist.training.ps_training import train_on_ps

pytestmark = pytest.mark.usefixtures("fresh_tf1")

SYNC = dict(workers=3, mode="sync", steps=12)


def _chief_steps(run):
    return [step for _, step, _ in run.worker_runs[0]]


def _faults(run):
    return [(e.name, e.pid, e.t) for e in run.trace.instants if e.cat == "fault"]


def test_a_failed_ps_means_every_task_restores_the_last_checkpoint(tmp_path):
    run = train_on_ps(failures=["ps:0@8ms+2ms"], checkpoint_dir=str(tmp_path),
                      save_checkpoint_steps=3, **SYNC)
    assert _faults(run) == [("task failed", "ps:0", 8_000_000),
                            ("task restarted", "ps:0", 10_000_000)]
    steps = _chief_steps(run)
    back = next(i for i in range(1, len(steps)) if steps[i] < steps[i - 1])
    # back to the checkpoint of step 3: the chief's first run after it may already see
    # step 4, which the chief's queue runner applied from the other workers' gradients
    assert steps[back - 1] == 5 and steps[back] in (3, 4)
    assert run.restored_from == str(tmp_path / "model.ckpt-3")
    assert run.recoveries == {0: 1, 1: 1, 2: 1}  # every session was made again
    assert run.global_step == 12 and set(run.ended_by.values()) == {"stopped"}


def test_a_new_session_waits_for_the_failed_ps_instead_of_retrying(tmp_path):
    # TF 2.21 (probed with a killed ps): the workers' new sessions wait for the ps to be
    # back, so the chief restores as soon as it is, whatever recovery_wait_secs says
    run = train_on_ps(failures=["ps:0@8ms+2ms"], checkpoint_dir=str(tmp_path),
                      save_checkpoint_steps=3, **SYNC)
    waits = [s for s in run.trace.spans if s.name == "wait for ps:0"]
    assert {s.pid for s in waits} == {"worker:0", "worker:1", "worker:2"}
    assert all(s.end == 10_000_000 for s in waits)  # when the ps restarts


def test_without_a_checkpoint_a_lost_ps_means_starting_over():
    run = train_on_ps(failures=["ps:0@8ms+2ms"], **SYNC)
    steps = _chief_steps(run)
    assert min(steps[steps.index(5):]) <= 1 and run.restored_from is None
    assert run.global_step == 12


def test_a_failed_worker_comes_back_stateless_and_nobody_restores(tmp_path):
    run = train_on_ps(failures=["worker:1@5ms+3ms"], checkpoint_dir=str(tmp_path),
                      save_checkpoint_steps=3, **SYNC)
    assert run.recoveries == {0: 0, 1: 1, 2: 0} and run.restored_from is None
    steps = _chief_steps(run)
    assert steps == sorted(steps) and run.global_step == 12  # nothing rolled back
    # the worker's process was down for 3 ms: no run of it ended meanwhile
    assert not [t for t, _, _ in run.worker_runs[1] if 5_000_000 < t < 8_000_000]


def test_a_failed_chief_restarts_and_restores(tmp_path):
    run = train_on_ps(failures=["worker:0@8ms+2ms"], checkpoint_dir=str(tmp_path),
                      save_checkpoint_steps=3, **SYNC)
    assert run.recoveries[0] == 1 and run.restored_from == str(tmp_path / "model.ckpt-3")
    assert run.global_step == 12


def test_failures_are_deterministic(tmp_path):
    def once(folder):
        return train_on_ps(failures=["ps:0@8ms+2ms"], checkpoint_dir=str(folder),
                           save_checkpoint_steps=3, **SYNC).worker_runs

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert once(tmp_path / "a") == once(tmp_path / "b")


def test_a_failure_of_a_task_that_does_not_exist_is_one_clear_line():
    with pytest.raises(InvalidArgumentError, match="task 'ps:3' is not in this cluster"):
        train_on_ps(failures=["ps:3@1ms+1ms"], **SYNC)


def test_the_ps_command_injects_a_failure_and_reports_the_recovery(tmp_path, capsys):
    from simdist.commands.cli import main

    plot = tmp_path / "ft.png"
    assert main(["ps", "--steps", "8", "--fail", "ps:0@5ms+2ms", "--checkpoint-dir",
                 str(tmp_path / "ckpt"), "--save-checkpoint-steps", "2", "--plot",
                 str(plot)]) == 0
    out = capsys.readouterr().out
    assert "ps:0: task failed at 5.00 ms" in out and "ps:0: task restarted at 7.00 ms" in out
    assert "the chief restored" in out and plot.stat().st_size > 10_000


@pytest.mark.parametrize("text, failure", [
    ("ps:0@8ms+2ms", Failure("ps:0", 8_000_000, 2_000_000)),
    ("worker:1@0s+1s", Failure("worker:1", 0, 10**9)),
    ("worker:1@2430us+100us", Failure("worker:1", 2_430_000, 100_000)),
    ("ps:1@1500us", Failure("ps:1", 1_500_000, None)),  # never back
    ("worker:2@7ns+1.5ms", Failure("worker:2", 7, 1_500_000)),
])
def test_a_failure_reads_its_syntax_and_writes_it_back(text, failure):
    assert Failure.parse(text) == failure and Failure.parse(str(failure)) == failure
    assert Failure.parse(failure) is failure


@pytest.mark.parametrize("old, old_unit, new", [
    ("ps:0,8000,2000", "us", "ps:0@8ms+2ms"),  # simdist ps's old --fail, in us
    (("worker:1", 5000, 3000), "us", "worker:1@5ms+3ms"),  # train_on_ps's old tuples
    (("ps:0", 8000, None), "us", "ps:0@8ms"),
    ("ps:0,1000,500", "ms", "ps:0@1s+500ms"),  # realdist ps's old --fail, in ms
    (["ps:0", 1.5, 2], "ms", "ps:0@1500us+2ms"),
])
def test_the_old_form_is_refused_with_its_new_spelling(old, old_unit, new):
    with pytest.raises(InvalidArgumentError) as error:
        Failure.parse(old, old_unit)
    message = str(error.value)
    assert f"write '{new}' (TASK@TIME[+DOWN]" in message and "\n" not in message
    assert message.startswith(f"failure {old!r}: the old form ")


@pytest.mark.parametrize("bad, expected", [
    ("ps:0", "failure 'ps:0': expected TASK@TIME[+DOWN], e.g. 'worker:1@2ms+1ms'"),
    ("ps:0,x,100", "failure 'ps:0,x,100': expected TASK@TIME[+DOWN], e.g. 'worker:1@2ms+1ms'"),
    ("gpu:0@1ms", "failure 'gpu:0@1ms': the task must be worker:N or ps:N, got 'gpu:0'"),
    ("ps:0@soon", "failure 'ps:0@soon': times must read like 2ms or 500us"),
    ("ps:0@1ms+0s", "failure 'ps:0@1ms+0s': expected whole nanoseconds, the time >= 0 and "
                    "the downtime > 0"),
])
def test_a_bad_failure_is_one_line_naming_it(bad, expected):
    with pytest.raises(InvalidArgumentError) as error:
        Failure.parse(bad)
    assert str(error.value) == expected


def test_train_on_ps_refuses_the_old_tuples_with_their_new_spelling():
    with pytest.raises(InvalidArgumentError, match=r"^failure \('ps:0', 8000, 2000\): the old "
                       r"form \(task, at_us, down_us\) is gone: write 'ps:0@8ms\+2ms'"):
        train_on_ps(failures=[("ps:0", 8000, 2000)], **SYNC)


def test_the_ps_command_tells_the_old_fail_syntax_how_to_write_it_now(capsys):
    from simdist.commands.cli import main

    with pytest.raises(SystemExit) as done:
        main(["ps", "--fail", "ps:0,8000,2000"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert done.value.code == 2
    assert last == ("simdist ps: error: argument --fail: failure 'ps:0,8000,2000': the old "
                    "form TASK,AT_US,DOWN_US is gone: write 'ps:0@8ms+2ms' (TASK@TIME[+DOWN], "
                    "times with units)")
