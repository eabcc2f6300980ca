"""A link's cost per message (``LinkProfile.message_ns``, issue 29 item 6): many small
messages through one port cost what they cost, in message mode, flow mode and the closed
forms alike, while a lone message still takes latency + n/B."""

import dataclasses
import json

import pytest

from simdist.base.errors import InvalidArgumentError
from simdist.collectives import all_reduce, formulas
from simdist.hardware.devices import Hardware, HardwareCatalog, LinkProfile
from simdist.sim.payloads import Phantom
from simdist.sim.scheduler import simulate
from tests.conftest import run_on_workers

HW = Hardware.from_catalog(HardwareCatalog.default(), "a100-nvlink3-100gbe")


def _all_reduce(p, n, hardware, fidelity="message", **options):
    def main(ctx):
        yield from all_reduce(ctx, range(p), Phantom(n), **options)

    return simulate({"worker": p}, main, hardware=hardware, trace=False,
                    fidelity=fidelity).end_time


def test_a_parameter_server_of_tiny_values_pays_each_message_at_its_nic():
    """The issue's case: 205 B over 48 tasks through one ps took 4 us, two latencies, as if
    the ps's NIC took 94 messages for free; the ring took 188 us."""
    p, n, net = 48, 205, HW.network
    assert net.message_ns == 500 and net.latency_ns == 2_000
    closed = formulas.parameter_server(p, n, net.latency_ns, net.bandwidth, o=net.message_ns)
    message = _all_reduce(p, n, HW, algorithm="ps")
    flow = _all_reduce(p, n, HW, "flow", algorithm="ps")
    assert message == pytest.approx(closed, rel=0.01) and flow == pytest.approx(closed, rel=0.01)
    assert message > 2 * (p - 1) * net.message_ns  # 94 messages through the ps's NIC
    free = dataclasses.replace(HW, network=dataclasses.replace(net, message_ns=0))
    assert _all_reduce(p, n, free, algorithm="ps") < 6_000  # 2a and 94 x 16 ns of bytes
    ring = _all_reduce(p, n, HW, algorithm="ring")
    assert ring == pytest.approx(2 * (p - 1) * net.latency_ns, rel=0.01)  # o inside a


def test_a_lone_message_takes_latency_plus_bytes_whatever_the_cost_per_message():
    link = HW.network
    for nbytes in (0, 1, 1 << 20):
        assert link.transfer_time_ns(nbytes) == link.latency_ns + -(-nbytes * 10**9 //
                                                                     link.bandwidth)

    def main(ctx):
        if ctx.order == 0:
            ctx.send(1, "t", Phantom(1 << 20))
        else:
            msg = yield ctx.recv(0, "t")
            return msg.arrived_at

    res = simulate({"worker": 2}, main, hardware=HW, trace=False)
    assert res.returns["worker:1"] == link.transfer_time_ns(1 << 20)


def test_senders_to_one_receiver_queue_by_the_cost_per_message():
    """p - 1 empty messages to one task: the first after the latency, each next one o
    later (its NIC takes one message per o)."""
    p, net = 9, HW.network

    def main(ctx):
        if ctx.order:
            ctx.send(0, "x", Phantom(0))
            return None
        arrivals = []
        for _ in range(p - 1):
            arrivals.append((yield ctx.recv(tag="x")).arrived_at)
        return arrivals

    res = simulate({"worker": p}, main, hardware=HW, trace=False)
    assert res.returns["worker:0"] == [net.latency_ns + k * net.message_ns
                                       for k in range(p - 1)]


def test_pieces_too_small_cost_more_in_messages_than_they_hide():
    p, n, net = 8, 64 << 10, HW.network
    times = {k: max(t for _, t in run_on_workers(
        p, lambda ctx: all_reduce(ctx, range(p), Phantom(n), pieces=k), HW)[0])
        for k in (1, 2, 64)}
    for k, took in times.items():
        assert took == pytest.approx(formulas.ring(p, n, net.latency_ns, net.bandwidth, k,
                                                   net.message_ns), rel=0.01)
    assert times[2] < times[1] < times[64]  # 32 KiB pieces pay; 1 KiB pieces cost 8x


def test_a_cost_per_message_is_checked_and_read_from_a_profiles_file(tmp_path):
    with pytest.raises(InvalidArgumentError, match=r"link 'l': message_ns must be less than "
                       r"latency_ns \(1000\), got 1000"):
        LinkProfile("l", "network", latency_ns=1000, bandwidth=10**9, message_ns=1000)
    with pytest.raises(InvalidArgumentError, match="message_ns"):
        LinkProfile("l", "network", latency_ns=1000, bandwidth=10**9, message_ns=-1)
    path = tmp_path / "hw.json"
    path.write_text(json.dumps({"links": {"10gbe": {"message_ns": "3 us"}}}))
    catalog = HardwareCatalog.default().load_file(path)
    assert catalog.link("10gbe").message_ns == 3_000
    assert catalog.link("10gbe").latency_ns == 10_000  # untouched fields kept
