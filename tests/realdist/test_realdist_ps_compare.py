"""realdist's parameter-server training without TensorFlow: the accumulator replay that
counts applied and dropped gradients, the conversion of the worker processes' outputs into
simdist's PSTrainingRun and trace, the simulated-vs-real rows, and bad input."""

import math

import pytest

from realdist.cli import main as realdist_main
from realdist.training import ps_compare
from realdist.training.ps_compare import (arrival_order, compare_ps_runs, differs, failure_figures,
                                          format_comparison, simulate_like)
from realdist.training.ps_programs import (Arrival, _training_run, check_train_on_ps,
                                           replay_accumulator, unconfirmed)
from simdist.base.errors import InvalidArgumentError
from simdist.training.ps_training import train_on_ps

pytestmark = pytest.mark.usefixtures("fresh_tf1")


def _outcomes(replayed):
    return [(r.arrival.worker, r.applied, r.step_before, r.step_after) for r in replayed]


def test_replay_drops_a_gradient_older_than_the_accumulators_step():
    # two replicas to aggregate: worker 0's first two gradients (the second on an initial
    # token, still local step 0) make step 1; worker 1's, computed at step 0, comes late
    arrivals = [Arrival(250, 1, 0, 0, 1), Arrival(100, 0, 0, 0, 0), Arrival(200, 0, 1, 0, 1)]
    assert _outcomes(replay_accumulator(arrivals, 2, max_takes=9)) == [
        (0, True, 0, 0), (0, True, 0, 1), (1, False, 1, 1)]


def test_replay_takes_no_more_steps_than_the_global_step_shows():
    # the chief stopped after step 1: later gradients still reach the accumulator, no take
    arrivals = [Arrival(t, t % 2, t, 0 if t < 3 else 1, None) for t in range(1, 7)]
    replayed = replay_accumulator(arrivals, 2, max_takes=1)
    assert [r.step_after for r in replayed] == [0, 1, 1, 1, 1, 1]
    assert [r.applied for r in replayed] == [True, True, True, True, True, True]


def test_a_global_step_read_outside_the_replay_is_unconfirmed():
    replayed = replay_accumulator([Arrival(1, 0, 0, 0, 1), Arrival(2, 1, 0, 0, 3)], 1, 9)
    # the first read 1 is its own take; the second gradient came at step 1 (dropped), so a
    # read of 3 right after it cannot be
    assert [r.applied for r in replayed] == [True, False] and unconfirmed(replayed) == 1


def _worker(t0, runs, last_compute=None, ended_by=None, events=()):
    out = {"start_line": t0, "run": runs, "ended_by": ended_by, "left": t0 + 900,
           "accumulators": {"w:0/grad_accum": "/job:ps/task:0",
                            "b:0/grad_accum": "/job:ps/task:0"},
           "event": list(events), "closed": t0 + 2000}
    if last_compute is not None:
        out["last_compute"] = last_compute
    return out


def _run(begin, end, applied_at, local_step, step_at_apply, step_after, loss, compute):
    return {"begin": begin, "end": end, "applied_at": applied_at, "local_step": local_step,
            "step_at_apply": step_at_apply, "step_after": step_after, "step_read": 0,
            "loss": loss, "compute": compute}


OPTIONS = {"workers": 2, "ps": 1, "mode": "sync", "steps": 1, "step_ms": [100, 250],
           "replicas_to_aggregate": 2, "learning_rate": 0.05, "seed": 0}


def test_worker_outputs_become_simdists_training_run_and_trace():
    t0 = 10_000
    outs = {"worker:0": _worker(t0, [
                _run(t0, t0 + 110, t0 + 100, 0, 0, 0, 2.0, (t0 - 40, t0 + 99)),
                _run(t0 + 110, t0 + 210, t0 + 200, 0, 1, 1, 1.5, (t0 + 111, t0 + 198))]),
            "worker:1": _worker(t0, [
                _run(t0, t0 + 260, t0 + 250, 0, 1, 1, 3.0, (t0 - 30, t0 + 249))],
                (t0 + 261, t0 + 700),
                {"error": "OutOfRangeError", "message": "FIFOQueue 'sync_token_q' is "
                 "closed and has insufficient elements", "local_step": 1})}
    run = _training_run(outs, OPTIONS, 2, {})
    assert run.global_step == 1 and run.worker_steps == {0: 2, 1: 1}
    # worker 1's last gradient (local step 1, from the run the closed queue ended) counts
    assert run.gradients_by_worker() == {0: (2, 0), 1: (1, 1)}
    assert (run.applied, run.dropped) == (3, 1)
    assert run.worker_runs[0] == [(110, 0, 2.0), (210, 1, 1.5)] and run.end_time == 2000
    instants = [(e.pid, e.lane, e.name, e.t, e.args["local_step"], e.args["global_step"])
                for e in run.trace.instants if e.lane == "accumulators"]
    assert instants == [("ps:0", "accumulators", "gradient applied", 100, 0, 0),
                        ("ps:0", "accumulators", "gradient applied", 200, 0, 0),
                        ("ps:0", "accumulators", "gradient dropped", 250, 0, 1),
                        ("ps:0", "accumulators", "gradient applied", 700, 1, 1)]
    assert run.trace.metadata["replay"] == {"arrivals": 4, "unconfirmed": 0}
    closed = [e for e in run.trace.instants if e.name == "OutOfRangeError"]
    assert [(e.pid, e.t) for e in closed] == [("worker:1", 900)]
    first = next(s for s in run.trace.spans if s.pid == "worker:0" and s.lane == "CPU:0")
    assert (first.start, first.dur) == (0, 99)  # the graph's registration before t0 is not
    # drawn
    assert run.describe()[0] == "sync training: global step 1 after 0.00 ms of wall-clock time"
    assert run.recoveries == {0: 0, 1: 0} and run.restored_from is None


def test_replay_starts_again_at_the_restored_step():
    # step 1 taken, then a ps failure: the chief restored step 0's checkpoint at t=50, and
    # the accumulators, new, drop nothing computed at step 0 any more
    arrivals = [Arrival(10, 0, 0, 0, 0), Arrival(20, 1, 0, 0, 1), Arrival(60, 1, 1, 0, 0),
                Arrival(70, 0, 1, 0, 1)]
    replayed = replay_accumulator(arrivals, 2, max_takes=1, restores=[(50, 0, 1)])
    assert _outcomes(replayed) == [(0, True, 0, 0), (1, True, 0, 1), (1, True, 0, 0),
                                   (0, True, 0, 1)]
    assert unconfirmed(replayed) == 0


def test_a_failure_and_a_restore_are_in_the_trace_and_the_run():
    t0 = 1_000_000
    ms = 1_000_000
    ckpt = "/tmp/x/model.ckpt-3"
    chief = [_run(t0 + i * 100 * ms, t0 + (i + 1) * 100 * ms, t0 + (i + 1) * 100 * ms - 5, i,
                  i + 1, i + 1, 1.0, (t0, t0 + 1)) for i in range(5)]
    after = [_run(t0 + 3000 * ms, t0 + 3100 * ms, t0 + 3090 * ms, 3, 4, 4, 0.5, (t0, t0 + 1))]
    other = [_run(r["begin"], r["end"] + 1, r["applied_at"] + 1, r["local_step"],
                  r["step_at_apply"], r["step_after"], 1.0, (t0, t0 + 1)) for r in chief]
    events = [{"t": t0 + 600 * ms, "kind": "recreate", "error": "UnavailableError",
               "message": "Socket closed"},
              {"t": t0 + 2900 * ms, "kind": "restore", "path": ckpt}]
    outs = {"worker:0": _worker(t0, chief + after, events=events),
            "worker:1": _worker(t0, other, events=events[:1])}
    failures = [{"task": "ps:0", "at_ms": 550, "down_ms": 500, "start_line": t0,
                 "killed": t0 + 550 * ms, "restarted": t0 + 1050 * ms,
                 "serving": t0 + 2800 * ms}]
    run = _training_run(outs, {**OPTIONS, "steps": 4, "replicas_to_aggregate": 1}, 1, {},
                        failures)
    faults = [(e.pid, e.name, e.t // ms) for e in run.trace.instants if e.cat == "fault"]
    assert faults == [("ps:0", "task failed", 550), ("ps:0", "task restarted", 1050),
                      ("ps:0", "task serving again", 2800)]
    down = [s for s in run.trace.spans if s.name == "task down"]
    assert [(s.pid, s.lane, s.start // ms, s.dur // ms) for s in down] == [
        ("ps:0", "faults", 550, 2250)]
    restored = [e.args for e in run.trace.instants if e.name == "checkpoint restored"]
    assert restored == [{"checkpoint": ckpt, "global_step_before": 5, "global_step_after": 3}]
    assert run.restored_from == ckpt and run.recoveries == {0: 1, 1: 1}
    assert run.trace.metadata["replay"]["unconfirmed"] == 0
    assert "  ps:0: task failed at 550.00 ms" in run.describe()
    assert run.trace.metadata["failures"][0]["serving"] == 2800 * ms


def test_simulated_and_real_rows_line_up_and_mark_differences():
    simulated = train_on_ps(workers=2, mode="sync", steps=2, step_us=[1000, 1700])
    assert simulate_like({"workers": 2, "ps": 1, "mode": "sync", "steps": 2,
                          "step_ms": [1, 1.7], "replicas_to_aggregate": None,
                          "learning_rate": 0.05, "seed": 0,
                          "stop_grace_period_secs": 1.0}).trace.to_chrome() == \
        simulated.trace.to_chrome()
    rows = compare_ps_runs(simulated, simulated)
    assert [name for name, *_ in rows[:5]] == [
        "global step", "worker 0 steps", "worker 0 gradients applied",
        "worker 0 gradients dropped", "worker 0 last loss"]
    assert not any("differs" in line for line in format_comparison(rows))
    table = format_comparison([("global step", 2, 3), ("worker 0 last loss", 1.0, 1.0004)])
    assert table[1].endswith("<- differs") and not table[2].endswith("differs")
    assert differs(float("nan"), 1.0) and not differs(math.nan, math.nan)


def _backup_run(step_ms):
    run = train_on_ps(workers=3, mode="sync", steps=5, step_us=[m * 1000 for m in step_ms],
                      replicas_to_aggregate=2, model="sparse")
    run.trace.metadata["options"] = {
        "workers": 3, "ps": 1, "mode": "sync", "steps": 5, "step_ms": [120, 150, 500],
        "replicas_to_aggregate": 2, "learning_rate": 0.05, "seed": 0,
        "stop_grace_period_secs": 1.0, "model": "sparse"}
    return run


def test_arrival_order_follows_the_accumulator_events():
    order = arrival_order(_backup_run([120, 150, 500]))
    # one entry per gradient (the sparse model has two accumulators that decide alike)
    assert order[:4] == [(0, 0, True), (1, 0, True), (0, 0, False), (1, 0, False)]
    assert len(order) == 18 and sum(applied for *_, applied in order) == 11
    # worker 1 14 ms slower per step: worker 0 reaches the ps twice at local step 1 first
    assert arrival_order(_backup_run([120, 164, 500]))[4:7] == [
        (0, 1, True), (0, 1, True), (1, 1, False)]


def test_a_run_in_another_order_than_simdists_is_run_again(monkeypatch):
    # a stand-in for real TF: first a run with worker 1 late, then one on time
    runs = [_backup_run([120, 164, 500]), _backup_run([120, 150, 500])]
    monkeypatch.setattr(ps_compare, "real_train_on_ps", lambda **options: runs.pop(0))
    simulated, real, rows = ps_compare.compare_train_on_ps(attempts=3, mode="sync")
    assert runs == [] and not [row for row in rows if differs(row[1], row[2])]
    first, second = real.trace.metadata["attempts"]
    assert first != second == arrival_order(simulated)
    # one attempt: the late run is compared as it is, and its counts differ
    runs = [_backup_run([120, 164, 500])]
    _, late, rows = ps_compare.compare_train_on_ps(mode="sync")
    assert len(late.trace.metadata["attempts"]) == 1
    assert [name for name, sim, real in rows if differs(sim, real)][:2] == [
        "worker 0 gradients applied", "worker 0 gradients dropped"]
    # a run in another order whose figures all agree is kept: nothing to explain
    runs = [_backup_run([120, 164, 500])]
    monkeypatch.setattr(ps_compare, "compare_ps_runs", lambda sim, real: [("global step", 5, 5)])
    _, kept, _ = ps_compare.compare_train_on_ps(attempts=3, mode="sync")
    assert runs == [] and len(kept.trace.metadata["attempts"]) == 1


def test_async_rows_add_the_staleness():
    run = train_on_ps(workers=2, mode="async", steps=4, step_us=[1000, 2500])
    rows = {name: (a, b) for name, a, b in compare_ps_runs(run, run)}
    assert rows["staleness max"] == (max(run.staleness),) * 2 and "staleness mean" in rows
    run.end_time += 10**9  # a real async run's last close: no queue runner to wait for
    assert not any("queue runner" in line for line in run.describe())


@pytest.mark.parametrize("options, message", [
    ({"workers": 0}, "real_train_on_ps: workers=0, expected an int >= 1"),
    ({"workers": 9}, "real_train_on_ps: workers=9, expected at most 8"),
    ({"mode": "ring"}, "real_train_on_ps: mode='ring', expected 'sync' or 'async'"),
    ({"step_ms": [100, 100]}, "real_train_on_ps: step_ms=[100, 100], expected 3 step times"),
    ({"step_ms": [100, -1, 100]}, "real_train_on_ps: step_ms=[100, -1, 100], expected 3"),
    ({"replicas_to_aggregate": 4},
     "real_train_on_ps: replicas_to_aggregate=4 is more than the 3 workers"),
    ({"replicas_to_aggregate": 0}, "real_train_on_ps: replicas_to_aggregate=0, expected"),
    ({"learning_rate": float("nan")}, "real_train_on_ps: learning_rate (--learning-rate) must "
                                      "be a finite number > 0 and <= 1000, got nan"),
    ({"learning_rate": -1}, "real_train_on_ps: learning_rate (--learning-rate) must be"),
    ({"seed": -1}, "real_train_on_ps: seed (--seed) must be an int >= 0 and < 2**63, got -1"),
    ({"stop_grace_period_secs": 120}, "real_train_on_ps: stop_grace_period_secs=120, expected "
                                      "seconds >= 0 and below the timeout (60)"),
    ({"failures": ["ps:1@100ms+100ms"]}, "real_train_on_ps: failure of task 'ps:1', which is "
                                         "not in this cluster: its tasks are ps:0, worker:0, "
                                         "worker:1, worker:2"),
    ({"failures": ["ps:0@601s+100ms"]}, "real_train_on_ps: failure of ps:0: at_ms=601000.0, "
                                        "expected ms from 0 to 600000"),
    ({"failures": ["ps:0@5ms"]}, "real_train_on_ps: failure 'ps:0@5ms': expected a downtime "
                                 "(TASK@TIME[+DOWN] with +DOWN)"),
    ({"failures": ["ps:0"]}, "failure 'ps:0': expected TASK@TIME[+DOWN], e.g. "
                             "'worker:1@2ms+1ms'"),
    ({"failures": [("ps:0", 1000, 500)]}, "failure ('ps:0', 1000, 500): the old form (task, "
                                          "at_ms, down_ms) is gone: write 'ps:0@1s+500ms'"),
    ({"save_checkpoint_steps": 3}, "real_train_on_ps: save_checkpoint_steps=3 needs a "
                                   "checkpoint_dir"),
    ({"checkpoint_dir": "/tmp/x", "save_checkpoint_steps": 0},
     "real_train_on_ps: save_checkpoint_steps=0, expected an int >= 1"),
    ({"model": "cnn"}, "real_train_on_ps: model='cnn', expected 'dense' or 'sparse'"),
    ({"model": "sparse", "ps": 2}, "real_train_on_ps: the sparse model is built for one ps "
                                   "(ps=2)"),
])
def test_bad_options_are_refused_before_any_process_starts(options, message):
    given = {"workers": 3, "ps": 1, "mode": "sync", "steps": 4, "step_ms": None,
             "replicas_to_aggregate": None, "learning_rate": 0.05, "timeout": 60, **options}
    with pytest.raises(InvalidArgumentError) as error:
        check_train_on_ps(**given)
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("argv, expected", [
    (["--step-ms", "100,x,100"], "realdist: error: --step-ms '100,x,100': expected step times"),
    (["--workers", "2", "--step-ms", "100"],
     "realdist: error: real_train_on_ps: step_ms=[100.0], expected 2 step times"),
    (["--replicas-to-aggregate", "5"],
     "realdist: error: real_train_on_ps: replicas_to_aggregate=5 is more than the 3 workers"),
    (["--trace", "out.txt"], "realdist: error: --trace 'out.txt' must end in .json"),
    (["--fail", "ps:0,x,100"], "realdist: error: failure 'ps:0,x,100': expected "
                               "TASK@TIME[+DOWN], e.g. 'worker:1@2ms+1ms'"),
    (["--fail", "worker:3@100ms+100ms"], "realdist: error: real_train_on_ps: failure of task "
                                         "'worker:3', which is not in this cluster"),
    (["--fail", "ps:0@-1ms+100ms"], "realdist: error: failure 'ps:0@-1ms+100ms': expected "
                                    "whole nanoseconds, the time >= 0"),
    (["--fail", "ps:0,1000,500"], "realdist: error: failure 'ps:0,1000,500': the old form "
                                  "TASK,AT_MS,DOWN_MS is gone: write 'ps:0@1s+500ms' "
                                  "(TASK@TIME[+DOWN], times with units)"),
])
def test_bad_ps_command_input_is_one_line_and_exit_2(capsys, argv, expected):
    assert realdist_main(["ps", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(expected) and captured.err.count("\n") == 1
    assert captured.out == ""


def test_failure_rows_give_the_step_at_the_failure_and_the_restored_step(tmp_path):
    run = train_on_ps(workers=3, mode="sync", steps=12, failures=["ps:0@8ms+2ms"],
                      checkpoint_dir=str(tmp_path), save_checkpoint_steps=3)
    rows = {name: (sim, real) for name, sim, real in compare_ps_runs(run, run)}
    assert rows["ps:0 failed: global step"] == (5, 5)  # as tests/distribute/test_fault_tolerance.py
    assert rows["restored checkpoint's step"] == (3, 3)
    assert rows["worker 1 sessions made again"] == (1, 1)
    assert failure_figures(train_on_ps(workers=2, mode="sync", steps=2)) == []
    table = format_comparison([("restored checkpoint's step", 3, None)])  # None: no restore
    assert table[1].split()[-4:] == ["3", "-", "<-", "differs"]


def test_simulate_like_passes_the_failures_and_its_own_checkpoint_folder(tmp_path):
    options = {"workers": 3, "ps": 1, "mode": "sync", "steps": 12, "step_ms": [1, 1, 1],
               "replicas_to_aggregate": None, "learning_rate": 0.05, "seed": 0,
               "stop_grace_period_secs": 1.0, "failures": ["ps:0@8ms+2ms"],
               "checkpoint_dir": str(tmp_path / "real"), "save_checkpoint_steps": 3}
    run = simulate_like(options)
    assert [(e.name, e.t) for e in run.trace.instants if e.cat == "fault"] == [
        ("task failed", 8_000_000), ("task restarted", 10_000_000)]
    assert run.restored_from.endswith("model.ckpt-3") and not (tmp_path / "real").exists()


def test_the_launcher_collects_repeated_keys_and_checks_failures(tmp_path):
    from realdist.runtime.localcluster import kill_orders
    from realdist.runtime.processes import MARK, read_outputs

    out = tmp_path / "task.out"
    out.write_text("".join(f"{MARK}{line}\n" for line in (
        '{"run[]": 1}', '{"left": 5}', '{"run[]": 2}', '{"left": 6}')) + "noise\n")
    assert read_outputs(out) == {"run": [1, 2], "left": 6}
    assert read_outputs(tmp_path / "missing.out") == {}
    assert kill_orders([("ps:0", 1, 2.5)], {"ps": 1, "worker": 2}, "f") == [
        ("ps:0", 1, 2.5)]
    with pytest.raises(InvalidArgumentError, match="^f: failure of worker:1: down_ms=True"):
        kill_orders([("worker:1", 1, True)], {"ps": 1, "worker": 2}, "f")


def test_realdist_ps_reads_the_failure_syntax_and_hands_the_launcher_ms(monkeypatch):
    from realdist.training import ps_programs

    handed = []

    def run_cluster(jobs, tasks, timeout, failures):
        handed.extend(failures)
        raise InterruptedError  # no TensorFlow process: only what the launcher was given

    monkeypatch.setattr(ps_programs, "run_cluster", run_cluster)
    with pytest.raises(InterruptedError):
        ps_programs.real_train_on_ps(workers=2, failures=["ps:0@1s+500ms", "worker:1@1500us+2s"])
    assert handed == [("ps:0", 1000.0, 500.0), ("worker:1", 1.5, 2000.0)]


def test_the_launcher_kills_a_task_after_the_start_line_and_starts_it_again(tmp_path):
    import time

    from realdist.runtime.localcluster import _Schedule
    from realdist.runtime.processes import MARK

    class Proc:
        def __init__(self):
            self.code = None

        def poll(self):
            return self.code

        def kill(self):
            self.code = -9

        def wait(self):
            return self.code

    procs, started = {"ps:0": Proc(), "worker:0": Proc()}, []

    def start(name, incarnation):
        started.append((name, incarnation))
        procs[name] = Proc()

    schedule = _Schedule([{"task": "ps:0", "at_ms": 0, "down_ms": 0},
                          {"task": "worker:0", "at_ms": 600_000, "down_ms": 0}], tmp_path,
                         {"ps:0": 1, "worker:0": 2})
    schedule.step(procs, start)  # no start line yet: nothing happens
    assert schedule.done == [] and started == []
    (tmp_path / "worker:0.out").write_text(f'{MARK}{{"start_line": {time.monotonic_ns()}}}\n')
    first = procs["ps:0"]
    schedule.step(procs, start)
    assert first.code == -9 and started == [] and schedule.down("ps:0")
    schedule.step(procs, start)  # down_ms later
    assert started == [("ps:0", 1)] and not schedule.down("ps:0")
    assert [(r["task"], r["restarted"] is not None) for r in schedule.done] == [("ps:0", True)]
    assert procs["worker:0"].code is None  # its time has not come
    assert schedule.describe() == " (after ps:0 was killed at 0 ms and restarted)"
