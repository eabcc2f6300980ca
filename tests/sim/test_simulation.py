"""Messages between tasks: arrival times from the cost model, delivery order, NIC queues."""

import numpy as np
import pytest

from simdist import ClusterSpec, Hardware, HardwareCatalog, Layout, Phantom, simulate
from simdist.hardware.cluster import UnknownTaskError
from simdist.sim.core import SimulationDeadlock
from simdist.base.errors import InvalidArgumentError


def hardware(tasks_per_machine=1, system="cpu"):
    return Hardware.from_catalog(HardwareCatalog.default(), system,
                                 Layout(tasks_per_machine=tasks_per_machine))


def test_one_message_arrives_after_latency_plus_bytes_over_bandwidth():
    hw = hardware()
    nbytes = 1 << 20

    def main(ctx):
        if ctx.order == 0:
            yield ctx.timeout(100)
            ctx.send("worker:1", "t", np.zeros(nbytes // 8))
        else:
            msg = yield ctx.recv("worker:0", "t")
            return msg.arrived_at, ctx.now, msg.nbytes, msg.sent_at

    res = simulate({"worker": 2}, main, hardware=hw)
    link = hw.network
    expected = 100 + link.transfer_time_ns(nbytes)
    assert res.returns["worker:1"] == (expected, expected, nbytes, 100)


def test_tasks_on_one_machine_use_the_intra_machine_link():
    hw = hardware(tasks_per_machine=2)

    def main(ctx):
        if ctx.order == 0:
            ctx.send(1, "a", Phantom(4096))
            ctx.send(2, "b", Phantom(4096))
        else:
            msg = yield ctx.recv(0)
            return msg.arrived_at

    res = simulate({"worker": 3}, main, hardware=hw)
    assert res.returns["worker:1"] == hw.intra_link.transfer_time_ns(4096)
    # worker:2 is on the other machine: the 10 GbE link, and its egress starts at once
    assert res.returns["worker:2"] == hw.network.transfer_time_ns(4096)


def test_many_senders_to_one_receiver_queue_at_its_nic():
    hw = hardware()
    nbytes = 1 << 20

    def main(ctx):
        if ctx.task_type == "worker":
            ctx.send("ps:0", "grad", Phantom(nbytes))
            return None
        arrivals = []
        for _ in range(3):
            msg = yield ctx.recv(tag="grad")
            arrivals.append((msg.src, msg.arrived_at))
        return arrivals

    res = simulate({"worker": 3, "ps": 1}, main, hardware=hw)
    ser = hw.network.serialization_ns(nbytes)  # the bytes and the port's cost per message
    first = hw.network.transfer_time_ns(nbytes)
    # same head arrival time: served in source task order, one after another (a FIFO)
    assert res.returns["ps:0"] == [("worker:0", first), ("worker:1", first + ser),
                                   ("worker:2", first + 2 * ser)]


def test_senders_on_one_machine_share_its_nic_egress():
    hw = hardware(tasks_per_machine=2)
    nbytes = 1 << 20

    def main(ctx):
        if ctx.order < 2:
            ctx.send(2 + ctx.order, "x", Phantom(nbytes))
            return None
        msg = yield ctx.recv(tag="x")
        return msg.arrived_at

    res = simulate({"worker": 4}, main, hardware=hw)
    ser = hw.network.serialization_ns(nbytes)
    assert res.returns["worker:2"] == hw.network.transfer_time_ns(nbytes)
    # worker:1's message waited for worker:0's to leave the shared NIC
    assert res.returns["worker:3"] == hw.network.transfer_time_ns(nbytes) + ser


def test_delivery_order_is_arrival_then_source_then_sequence():
    def main(ctx):
        if ctx.order in (1, 2):
            for i in range(2):
                ctx.send(0, "m", np.array([ctx.order * 10 + i]))
            return None
        got = []
        for _ in range(4):
            msg = yield ctx.recv()
            got.append(int(msg.payload[0]))
        return got

    res = simulate({"worker": 3}, main, hardware=hardware())
    # both senders' first messages reach the receiver's NIC together; its FIFO takes them by
    # source task order, then each sender's second message
    assert res.returns["worker:0"] == [10, 20, 11, 21]


def test_payloads_arrive_intact_and_are_snapshots():
    def main(ctx):
        if ctx.order == 0:
            data = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(2)}
            ctx.send(1, "tensors", data)
            data["w"][:] = -1  # the message already holds a copy, like TF's Send op
            ctx.send(1, "tuple", (np.int64(0) + np.arange(3), np.zeros(0)))
            ctx.send(1, "scalar", np.float64(2.5))
            return None
        a = (yield ctx.recv(0, "tensors")).payload
        b = (yield ctx.recv(0, "tuple")).payload
        c = (yield ctx.recv(0, "scalar")).payload
        return a, b, c

    a, b, c = simulate({"worker": 2}, main).returns["worker:1"]
    np.testing.assert_array_equal(a["w"], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert a["w"].dtype == np.float32 and list(a) == ["w", "b"]
    assert isinstance(b, tuple) and b[0].tolist() == [0, 1, 2] and b[1].shape == (0,)
    assert c == 2.5


def test_same_seed_same_random_numbers_per_task():
    def main(ctx):
        yield ctx.timeout(1)
        return ctx.rng.integers(0, 1 << 30)

    a = simulate({"worker": 3}, main, seed=7).returns
    b = simulate({"worker": 3}, main, seed=7).returns
    c = simulate({"worker": 3}, main, seed=8).returns
    assert a == b and a != c and len(set(a.values())) == 3


def test_sending_to_a_task_that_does_not_exist_names_it():
    def main(ctx):
        ctx.send("worker:7", "x", None)
        yield ctx.timeout(1)

    with pytest.raises(UnknownTaskError, match="worker:7"):
        simulate({"worker": 2}, main)
    with pytest.raises(UnknownTaskError, match="task number 5"):
        simulate({"worker": 2}, lambda ctx: (yield ctx.recv(5)))


def test_bad_payload_and_self_send_are_clear_errors():
    def bad_payload(ctx):
        ctx.send((ctx.order + 1) % 2, "x", "a string")
        yield ctx.timeout(1)

    with pytest.raises(InvalidArgumentError, match="'a string'.*expected None, a numpy array"):
        simulate({"worker": 2}, bad_payload)

    def self_send(ctx):
        ctx.send(ctx.task, "x", None)
        yield ctx.timeout(1)

    with pytest.raises(InvalidArgumentError, match="worker:0 sends to itself"):
        simulate({"worker": 2}, self_send)


def test_main_that_is_not_a_generator_is_rejected():
    with pytest.raises(InvalidArgumentError, match="expected a generator"):
        simulate({"worker": 1}, lambda ctx: 3)


def test_deadlock_across_tasks_is_reported_with_every_blocked_task():
    def main(ctx):
        yield ctx.recv((ctx.order + 1) % 3, "never")

    with pytest.raises(SimulationDeadlock) as info:
        simulate(ClusterSpec({"worker": 3}), main)
    names = [who for who, _ in info.value.blocked]
    assert names == ["worker:0/main", "worker:1/main", "worker:2/main"]
    assert "recv(src=worker:1, tag='never') on worker:0" in str(info.value)


def test_compute_uses_the_cost_model_and_serializes_on_a_device():
    hw = hardware()

    def main(ctx):
        a = ctx.compute("matmul", flops=2e9)
        b = ctx.compute("matmul", flops=2e9)  # same device: runs after the first
        yield ctx.env.all_of([a, b])
        return ctx.now

    res = simulate({"worker": 1}, main, hardware=hw)
    one = hw.device.compute_time_ns(2e9)
    assert res.returns["worker:0"] == 2 * one
    spans = [s for s in res.trace.spans if s.cat == "compute"]
    assert [(s.start, s.dur) for s in spans] == [(0, one), (one, one)]


def test_messages_between_devices_of_one_task_use_the_local_link():
    hw = Hardware.from_catalog(HardwareCatalog.default(), "v100-nvlink2-25gbe",
                               Layout(devices_per_task=2))
    nbytes = 1 << 20

    def main(ctx):
        ctx.send(ctx.task, "w", Phantom(nbytes), device=0, dst_device=1)
        ctx.send("worker:1", "x", Phantom(8), device=1, dst_device=0) if ctx.order == 0 else None
        got = yield ctx.recv(tag="w", device=1)
        assert got.src_device == 0 and got.dst_device == 1
        if ctx.order == 1:
            other = yield ctx.recv("worker:0", "x", src_device=1, device=0)
            return got.arrived_at, other.arrived_at
        return got.arrived_at, None

    res = simulate({"worker": 2}, main, hardware=hw)
    local = hw.intra_link.transfer_time_ns(nbytes)
    assert res.returns["worker:0"] == (local, None)
    assert res.returns["worker:1"] == (local, hw.network.transfer_time_ns(8))
    with pytest.raises(InvalidArgumentError, match="device 2 does not exist on worker:0"):
        simulate({"worker": 1}, lambda ctx: (yield ctx.send(0, "t", None, device=0,
                                                            dst_device=2)), hardware=hw)
    with pytest.raises(InvalidArgumentError, match="sends to itself"):
        simulate({"worker": 1}, lambda ctx: (yield ctx.send(0, "t", None, device=1,
                                                            dst_device=1)), hardware=hw)


def test_buffer_pool_reuses_a_buffer_only_once_nothing_refers_to_it():
    from simdist.sim.payloads import BufferPool

    pool = BufferPool()
    a = pool.get("float32", (1 << 18,))  # 1 MiB: pooled
    address = a.__array_interface__["data"][0]
    view = a[10:20]
    del a
    b = pool.get("float32", (1 << 18,))  # the view keeps the first buffer alive
    assert b.__array_interface__["data"][0] != address
    del view
    c = pool.get("float32", (1 << 18,))
    assert c.__array_interface__["data"][0] == address  # now it is free again
    small = pool.get("float32", (16,))
    assert pool.get("float32", (16,)) is not small  # small buffers are not pooled


def test_a_tag_that_cannot_cross_mpi_ranks_is_refused_in_one_process_too():
    from simdist.base.errors import InvalidArgumentError

    def main(ctx):
        if ctx.task_id == 0:
            ctx.send("worker:1", ("step", 1, object()), None)
        yield ctx.timeout(1)

    with pytest.raises(InvalidArgumentError, match=r"message tag <object object at .*> of "
                                                   r"type object cannot travel between MPI"):
        simulate({"worker": 2}, main)
