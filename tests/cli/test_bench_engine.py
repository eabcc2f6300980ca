"""``simdist bench engine``: the lean SimPy ring does the same rounds as simdist's with 2 to 3
kernel events per round (simdist: 2), the Store-based one 4; the lean program runs unchanged
on simdist's kernel with the very same events."""

from simdist.commands.bench import engine, floor


def test_the_three_rings_do_the_same_work_with_the_events_they_claim():
    tasks, rounds = 8, 20
    lean, _ = engine.simpy_lean_ring(tasks, rounds)
    store, _ = engine.simpy_ring(tasks, rounds)
    ours, _ = engine.simdist_run(tasks, rounds, False)
    assert 2 <= lean / (tasks * rounds) <= 3
    assert round(store / (tasks * rounds)) == 4 and round(ours / (tasks * rounds)) == 2


def test_the_lean_program_schedules_the_same_events_on_either_kernel():
    simpy_events, _ = engine.simpy_lean_ring(16, 50)
    kernel_events, _ = engine.kernel_lean_ring(16, 50)
    assert kernel_events == simpy_events and kernel_events > 2 * 16 * 50


def test_the_inlined_message_path_models_the_same_run():
    from simdist.sim.payloads import Phantom
    from simdist.sim.scheduler import simulate

    tasks, rounds = 12, 30
    events, _, end = floor.floor_ring(tasks, rounds, engine.delay)
    result = simulate({"worker": tasks},
                      lambda ctx: engine.simdist_ring(ctx, rounds, Phantom(floor.NBYTES)),
                      trace=False)
    assert (events, end) == (result.events, result.end_time) and end > rounds * 10_000


def test_quick_run_prints_both_ratios(capsys, monkeypatch):
    class Done:
        returncode, stdout, stderr = 0, '{"seconds": 1.0}\n', ""

    monkeypatch.setattr("simdist.sim.launcher.run_mpi", lambda *a, **k: Done())
    assert engine.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "vs Store" in out and "vs lean" in out and "SimPy 4, lean (reference)" in out
    assert "lean, on simdist's kernel" in out and "its message path inlined" in out
    assert out.count(">=1.0x") == 1 and "speed-up 2 ranks vs 1: 1.00x best against best" in out
