"""The event kernel: ordering, processes, conditions, interrupts and the deadlock report."""

import pytest

from simdist.sim.core import Environment, Interrupt, SimulationDeadlock


def test_time_is_int_nanoseconds_and_timeouts_fire_in_time_order():
    env = Environment()
    log = []

    def proc(name, delays):
        for d in delays:
            yield env.timeout(d)
            log.append((env.now, name))

    env.process(proc("a", [5, 10]))
    env.process(proc("b", [7, 1]))
    env.run()
    assert log == [(5, "a"), (7, "b"), (8, "b"), (15, "a")]
    assert isinstance(env.now, int) and env.now == 15


def test_ties_break_by_priority_then_task_order_then_sequence():
    env = Environment()
    log = []

    def proc(name):
        yield env.timeout(10)
        log.append(name)

    # created in reverse task order: task order must win over creation order
    env.process(proc("task2-first"), order=2)
    env.process(proc("task0"), order=0)
    env.process(proc("task2-second"), order=2)
    env.process(proc("task1"), order=1)
    env.run()
    assert log == ["task0", "task1", "task2-first", "task2-second"]


def test_triggered_event_runs_before_timeouts_at_the_same_time():
    env = Environment()
    log = []
    ev = env.event()

    def waiter():
        yield ev
        log.append(("event", env.now))

    def sleeper():
        yield env.timeout(3)
        log.append(("timeout", env.now))

    def trigger():
        yield env.timeout(3)
        ev.succeed()

    env.process(sleeper(), order=0)
    env.process(waiter(), order=1)
    env.process(trigger(), order=2)
    env.run()
    # the sleeper's timeout and the trigger's timeout are both NORMAL at t=3; the triggered
    # event is URGENT so it runs before any other NORMAL event at t=3 that is still queued
    assert log == [("timeout", 3), ("event", 3)]


def test_process_return_value_and_waiting_on_a_process():
    env = Environment()

    def child():
        yield env.timeout(4)
        return 42

    def parent():
        value = yield env.process(child())
        return value + 1

    p = env.process(parent())
    env.run()
    assert p.value == 43 and env.now == 4


def test_all_of_and_any_of():
    env = Environment()
    out = {}

    def proc():
        a, b = env.timeout(3, "a"), env.timeout(9, "b")
        got = yield env.any_of([a, b])
        out["any"] = (env.now, list(got.values()))
        got = yield env.all_of([a, b])
        out["all"] = (env.now, sorted(got.values()))
        got = yield env.all_of([])
        out["empty"] = (env.now, got)

    env.process(proc())
    env.run()
    assert out == {"any": (3, ["a"]), "all": (9, ["a", "b"]), "empty": (9, {})}


def test_interrupt_is_thrown_into_the_process():
    env = Environment()
    log = []

    def sleeper():
        try:
            yield env.timeout(100)
        except Interrupt as irq:
            log.append((env.now, irq.cause))
        yield env.timeout(1)
        log.append(env.now)

    def boss(victim):
        yield env.timeout(10)
        victim.interrupt("wake up")

    victim = env.process(sleeper())
    env.process(boss(victim))
    env.run()
    assert log == [(10, "wake up"), 11]


def test_failed_process_raises_its_error_unless_someone_waits():
    env = Environment()

    def bad():
        yield env.timeout(1)
        raise KeyError("boom")

    env.process(bad())
    with pytest.raises(KeyError, match="boom"):
        env.run()

    env = Environment()
    caught = []

    def parent():
        try:
            yield env.process(bad())
        except KeyError as e:
            caught.append(str(e))

    env.process(parent())
    env.run()
    assert caught == ["'boom'"]


def test_yielding_a_non_event_is_a_clear_error():
    env = Environment()

    def proc():
        yield 5

    env.process(proc(), name="worker:0/main")
    with pytest.raises(TypeError, match="worker:0/main yielded 5"):
        env.run()


def test_negative_or_float_timeout_is_rejected():
    env = Environment()
    with pytest.raises(ValueError, match="-1"):
        env.timeout(-1)
    with pytest.raises(ValueError, match="1.5"):
        env.timeout(1.5)


def test_deadlock_lists_each_blocked_process_and_what_it_waits_on():
    env = Environment()
    never = env.event(desc="recv(src=ps:0, tag='grad') on worker:0")

    def waiter():
        yield never

    def finisher():
        yield env.timeout(5)

    env.process(waiter(), name="worker:0/main")
    env.process(finisher(), name="worker:1/main")
    with pytest.raises(SimulationDeadlock) as info:
        env.run()
    err = info.value
    assert err.now == 5
    assert err.blocked == [("worker:0/main", "recv(src=ps:0, tag='grad') on worker:0")]
    assert "worker:0/main waits on recv(src=ps:0" in str(err)


def test_run_until_is_exclusive_and_keeps_later_events():
    env = Environment()
    log = []

    def proc():
        for _ in range(3):
            yield env.timeout(10)
            log.append(env.now)

    env.process(proc())
    env.run_until(20)
    assert log == [10]
    assert env.peek() == 20
    env.run()
    assert log == [10, 20, 30]


def test_deliveries_run_by_task_then_source_then_number_and_before_timeouts():
    env = Environment()
    log = []
    timeout = env.timeout(5)  # NORMAL, task 0
    timeout.callbacks.append(lambda event: log.append("timeout"))

    def deliver(name, order, source, seq):
        event = env.event(order=order)
        event.callbacks.append(lambda event: log.append(event.value))
        event.succeed_at(5, source, seq, name)

    # scheduled out of order: the kernel's keys put them in order
    deliver("task 1, from 0 #2", 1, 0, 2)
    deliver("task 0, after every message", 0, 3, 1)
    deliver("task 0, from 1 #0", 0, 1, 0)
    deliver("task 0, from 0 #7", 0, 0, 7)
    deliver("task 0, from 0 #(2**40 - 1)", 0, 0, 2**40 - 1)
    env.run()
    assert log == ["task 0, from 0 #7", "task 0, from 0 #(2**40 - 1)", "task 0, from 1 #0",
                   "task 0, after every message", "task 1, from 0 #2", "timeout"]
    assert env.now == 5


def test_succeed_at_refuses_the_past_and_a_second_trigger():
    env = Environment()
    env.run(until=10)
    late = env.event()
    with pytest.raises(RuntimeError, match="before now"):
        late.succeed_at(9, 0, 1, "late")
    assert not late.triggered  # still pending: it may be triggered at a time to come
    late.succeed_at(10, 0, 1, "on time")
    with pytest.raises(RuntimeError, match="already been triggered"):
        late.succeed_at(11, 0, 2)
    env.run()
    assert late.value == "on time" and late.processed
