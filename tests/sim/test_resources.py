"""simdist.sim.resources: the pool, the store and the link ports every blocking concept uses."""

import pytest

from simdist.sim.core import Environment, SimulationDeadlock
from simdist.hardware.devices import HardwareCatalog
from simdist.base.errors import CancelledError, DeadlineExceededError, OutOfRangeError
from simdist.sim.resources import Pool, Ports, Store


def run(env, *generators):
    procs = [env.process(g, name=f"p{i}") for i, g in enumerate(generators)]
    env.run()
    return [p.value for p in procs]


def test_pool_hands_units_out_first_come_first_served():
    env = Environment()
    pool, log = Pool(env, 2, "thread"), []

    def user(name, hold):
        yield pool.acquire()
        log.append((env.now, name, "in"))
        yield env.timeout(hold)
        pool.release()

    run(env, user("a", 10), user("b", 5), user("c", 1), user("d", 1))
    assert log == [(0, "a", "in"), (0, "b", "in"), (5, "c", "in"), (6, "d", "in")]
    assert pool.free == 2


def test_store_get_waits_for_items_and_keeps_fifo_order():
    env, store = Environment(), Store(name="q")

    def consumer():
        first = yield store.get(env)
        pair = yield store.get(env, 2)
        return env.now, first, pair

    def producer():
        for i in range(3):
            yield env.timeout(10)
            yield store.put(env, [i])

    (when, first, pair), _ = run(env, consumer(), producer())
    assert (when, first, pair) == (30, [0], [1, 2])


def test_store_put_waits_for_room():
    env, store = Environment(), Store(capacity=2, name="q")

    def producer():
        yield store.put(env, [1, 2, 3])  # the third waits until a get makes room
        return env.now

    def consumer():
        yield env.timeout(7)
        return (yield store.get(env))

    assert run(env, producer(), consumer()) == [7, [1]]
    assert list(store.items) == [2, 3]


def test_a_get_that_can_never_be_served_is_a_deadlock_naming_the_store():
    env, store = Environment(), Store(name="my queue")

    def consumer():
        yield store.get(env)

    env.process(consumer(), name="trainer")
    with pytest.raises(SimulationDeadlock, match="trainer waits on get 1 from my queue"):
        env.run()


def test_closing_a_store_ends_waiting_gets_as_tf_closes_a_queue():
    env, store = Environment(), Store(name="q")
    outcomes = []

    def getter(n, up_to):
        try:
            outcomes.append((n, up_to, (yield store.get(env, n, up_to))))
        except OutOfRangeError as error:
            outcomes.append((n, up_to, str(error)))

    def closer():
        yield store.put(env, ["a"])
        yield env.timeout(1)
        store.close()

    run(env, getter(3, False), getter(3, True), closer())
    # the first get had taken "a" as it came: closed short, it names what it still misses
    # and the size before putting "a" back in front (TF 2.21's message), and the next,
    # an up_to get, takes it
    assert outcomes[0] == (3, False, "q is closed and has insufficient elements "
                                     "(requested 2, current size 0)")
    assert outcomes[1] == (3, True, ["a"])


def test_put_into_a_closed_store_and_cancelled_puts_fail_with_cancelled_error():
    env, store = Environment(), Store(capacity=1, name="q")
    seen = []

    def putter(items):
        try:
            yield store.put(env, items)
            seen.append("ok")
        except CancelledError as error:
            seen.append(str(error))

    def closer():
        yield env.timeout(1)
        store.close(cancel_pending_puts=True)
        yield from putter(["late"])

    run(env, putter([1, 2]), closer())
    assert seen == ["q is closed: pending put cancelled", "q is closed"]


def test_cancel_withdraws_a_waiting_get():
    env, store = Environment(), Store(name="q")

    def getter():
        event = store.get(env)
        deadline = env.timeout(5)
        yield env.any_of([event, deadline])
        if not event.triggered:
            store.cancel(event, DeadlineExceededError("timed out"))
        try:
            yield event
        except DeadlineExceededError as error:
            return env.now, str(error)

    def putter():
        yield env.timeout(9)
        yield store.put(env, ["x"])

    assert run(env, getter(), putter())[0] == (5, "timed out")
    assert list(store.items) == ["x"]  # nobody took it


def test_ports_serialize_in_order_on_both_ends():
    link = HardwareCatalog.default().link("10gbe")
    ports = Ports()
    n = link.bandwidth // 1000  # 1 ms on the wire
    ser, head = 1_000_000 + link.message_ns, link.latency_ns - link.message_ns
    assert ports.send("a", link, 0, n) == (0, ser, head)
    assert ports.send("a", link, 10, n) == (ser, ser, ser + head)  # a's NIC busy
    assert ports.receive("b", head, ser) == (head, link.latency_ns + 1_000_000)
    assert ports.receive("b", head + 5, ser) == (head + ser, head + 2 * ser)
