"""fidelity="flow": a collective over size-only values as one flow per phase.

Alone on homogeneous links it must give the message mode's time within 1% (both match the
closed form there); concurrent flows share NICs; what it does not cover runs as messages.
"""

import numpy as np
import pytest

from simdist.commands.cli import main as simdist_main
from simdist.collectives import ALGORITHMS, all_reduce
from simdist.sim.core import SimulationDeadlock
from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.base.errors import InvalidArgumentError
from simdist.collectives.flow import no_flow_plan, ring_on_machines
from simdist.collectives.formulas import ring
from simdist.sim.flows import max_min_speeds
from simdist.sim.payloads import Phantom
from simdist.sim.scheduler import simulate

#: (algorithm, options, tasks per machine): the closed forms on homogeneous links
CASES = [("ring", {}, 1), ("recursive-doubling", {}, 1), ("halving-doubling", {}, 1),
         ("binary-tree", {}, 1), ("hierarchical", {}, 2), ("ps", {"num_ps": 1}, 1),
         ("ps", {"num_ps": 2}, 1)]


def hardware(tasks_per_machine=1):
    return Hardware.from_catalog(HardwareCatalog.default(), "cpu",
                                 Layout(tasks_per_machine=tasks_per_machine))


def one_all_reduce(algorithm, p, n, fidelity, tasks_per_machine=1, calls=1, **options):
    """``calls`` concurrent all-reduces of a Phantom(n) over p tasks: (end, result)."""
    def call(ctx):
        yield from all_reduce(ctx, range(p), Phantom(n), algorithm=algorithm, **options)

    def main(ctx):
        yield ctx.env.all_of([ctx.process(call(ctx)) for _ in range(calls)])
        return ctx.now

    result = simulate({"worker": p}, main, hardware=hardware(tasks_per_machine),
                      fidelity=fidelity)
    return max(result.returns.values()), result


@pytest.mark.parametrize("algorithm,options,per_machine", CASES,
                         ids=[f"{a}{o.get('num_ps', '')}" for a, o, _ in CASES])
@pytest.mark.parametrize("p", [4, 8, 16])
@pytest.mark.parametrize("n", [4096, 1 << 22])
def test_flow_agrees_with_messages_within_one_percent(algorithm, options, per_machine, p, n):
    message, _ = one_all_reduce(algorithm, p, n, "message", per_machine, **options)
    flow, result = one_all_reduce(algorithm, p, n, "flow", per_machine, **options)
    assert abs(flow - message) <= 0.01 * message, (flow, message)
    closed = ALGORITHMS[algorithm].closed_form(p, n, hardware(per_machine), **options)
    assert abs(flow - closed) <= 1 + 1e-9 * closed  # the closed form, to the ns
    assert result.messages == 0 and result.flows == 1


def test_flow_mode_takes_a_few_events_per_member_not_per_message():
    _, message = one_all_reduce("ring", 32, 1 << 20, "message")
    _, flow = one_all_reduce("ring", 32, 1 << 20, "flow")
    assert message.messages == 2 * 31 * 32
    assert flow.events <= 6 * 32 < message.events / 10  # the program: 3 processes each


def test_concurrent_flows_share_the_nics_like_the_messages():
    """Two rings over the same NICs at once: each runs at half speed (messages: the FIFOs)."""
    alone, _ = one_all_reduce("ring", 4, 1 << 22, "flow")
    message, _ = one_all_reduce("ring", 4, 1 << 22, "message", calls=2)
    flow, result = one_all_reduce("ring", 4, 1 << 22, "flow", calls=2)
    assert flow > 1.9 * alone
    assert abs(flow - message) <= 0.01 * message
    assert result.flows == 2


def test_max_min_speeds_share_a_full_port_and_give_the_rest_to_the_others():
    assert max_min_speeds([{"a": 1.0}, {"a": 1.0}]) == [0.5, 0.5]
    speeds = max_min_speeds([{"a": 1.0}, {"a": 0.5}, {"c": 1.0}])
    assert speeds[0] == speeds[1] == pytest.approx(2 / 3)
    assert speeds[2] == 1.0
    assert max_min_speeds([{"a": 0.25}, {"a": 0.25}]) == [1.0, 1.0]  # room for both


def test_real_values_and_shared_machines_still_run_their_messages():
    def main(ctx):
        value = np.full(8, ctx.task_id + 1.0, dtype=np.float32)
        total = yield from all_reduce(ctx, range(4), value, algorithm="ring")
        return total.tolist()

    result = simulate({"worker": 4}, main, fidelity="flow")
    assert result.messages == 2 * 3 * 4 and result.flows == 0
    assert all(r == [10.0] * 8 for r in result.returns.values())
    _, shared = one_all_reduce("binary-tree", 4, 1 << 16, "flow", tasks_per_machine=2)
    assert shared.messages > 0 and shared.flows == 0  # no closed form for this layout


def test_each_member_traces_one_span_per_phase():
    _, result = one_all_reduce("ps", 4, 1 << 20, "flow", num_ps=2)
    spans = [s for s in result.trace.spans if s.pid == "worker:1"]
    assert [(s.lane, s.name) for s in spans] == [("collective", "ps push (flow)"),
                                                 ("collective", "ps pull (flow)")]
    assert spans[0].end == spans[1].start and spans[0].args["members"] == 4


def test_a_member_that_never_joins_is_a_deadlock_naming_the_flow():
    def main(ctx):
        if ctx.task_id < 3:
            yield from all_reduce(ctx, range(4), Phantom(1024))
        yield ctx.timeout(1)

    with pytest.raises(SimulationDeadlock, match="flow level, waiting for its 4 members"):
        simulate({"worker": 4}, main, fidelity="flow")


def test_an_unknown_fidelity_is_an_error_naming_it():
    with pytest.raises(InvalidArgumentError, match="fidelity 'packet': expected one of "
                                                   "message, flow"):
        simulate({"worker": 2}, lambda ctx: iter(()), fidelity="packet")


def test_data_parallel_step_is_compute_plus_the_ring_closed_form():
    from simdist.training.programs.data_parallel import train

    result = simulate({"worker": 16}, lambda ctx: train(ctx, 10**6, 3, 32), fidelity="flow")
    hw = hardware()
    step = (hw.device.compute_time_ns(6 * 10**6 * 32)
            + ALGORITHMS["ring"].closed_form(16, 4 * 10**6, hw)
            + hw.device.compute_time_ns(2 * 10**6, 12 * 10**6))
    for ends in result.returns.values():
        assert [round(e - k * step) for k, e in enumerate(ends, 1)] == [0, 0, 0]


def test_simdist_run_takes_fidelity_flow(capsys):
    assert simdist_main(["run", "data_parallel", "--workers", "16", "--steps", "3",
                         "--params", "1e6", "--fidelity", "flow", "--quiet"]) == 0
    assert "0 messages, 3 flow-level collectives" in capsys.readouterr().out


def test_a_flow_run_is_not_refused_for_the_messages_it_will_not_send():
    from argparse import Namespace

    from simdist.training.programs import allreduce
    from simdist.training.programs import data_parallel

    args = Namespace(p=4096, pieces=None, phantom=True, fidelity="flow")
    assert allreduce.cost(args) == 4 * 4096
    assert allreduce.cost(Namespace(**{**vars(args), "fidelity": "message"})) > 10**7
    assert data_parallel.cost(Namespace(workers=1024, steps=100, fidelity="flow")) < 10**6


def test_reduce_to_one_through_a_chosen_root_runs_its_messages():
    end, result = one_all_reduce("reduce-to-one", 4, 4096, "flow", root=2)
    assert result.flows == 0 and result.messages == 2 * 3
    end, result = one_all_reduce("reduce-to-one", 4, 4096, "flow", root=None)
    assert result.flows == 1 and result.messages == 0


def test_members_that_pass_different_sizes_get_an_error_naming_both():
    def main(ctx):
        yield from all_reduce(ctx, range(4), Phantom(1024 if ctx.task_id else 2048))

    with pytest.raises(InvalidArgumentError, match=r"worker:0 called ring all-reduce #1 of 2048 "
                                                   r"B over 4 tasks where worker:1 called ring "
                                                   r"all-reduce #1 of 1024 B"):
        simulate({"worker": 4}, main, fidelity="flow")


@pytest.mark.parametrize("p,per_machine,pieces", [(8, 4, 1), (16, 2, 1), (16, 4, 3), (6, 4, 1),
                                                  (8, 8, 2)])
@pytest.mark.parametrize("n", [4096, 1 << 22])
def test_a_ring_over_machines_of_several_tasks_is_flows_as_fast_as_its_messages(
        p, per_machine, pieces, n):
    """Hops inside a machine on its own link, between machines on the NICs (4+2 tasks: the
    last machine half full; 8 on one: no NIC at all): within 1% of message mode, the
    closed form to the ns (pipelined: within a window's head a phase)."""
    options = {"pieces": pieces} if pieces > 1 else {}
    message, _ = one_all_reduce("ring", p, n, "message", per_machine, **options)
    flow, result = one_all_reduce("ring", p, n, "flow", per_machine, **options)
    assert abs(flow - message) <= 0.01 * message, (flow, message)
    crosses = [r // per_machine != (r + 1) % p // per_machine for r in range(p)]
    hw = hardware(per_machine)
    closed = ring_on_machines(crosses, n, hw, pieces)
    # pipelined on one link, a phase may end at its transfer time plus the head of its flow
    slack = 2 * hw.min_latency_ns(p) if pieces > 1 else 1 + 1e-9 * closed
    assert -1 <= flow - closed <= slack
    assert result.messages == 0 and result.flows == 1


def test_the_ring_over_machines_of_one_task_is_the_ring_closed_form():
    net = hardware().network
    for p, n, pieces in ((2, 4096, 1), (16, 1 << 22, 1), (8, 1 << 20, 4), (5, 999, 2)):
        assert ring_on_machines([True] * p, n, hardware(), pieces) == pytest.approx(
            ring(p, n, net.latency_ns, net.bandwidth, pieces, net.message_ns), rel=1e-12)


def test_a_ring_whose_machines_interleave_runs_its_messages():
    """Members 0, 2, 1, 3 on machines 0, 1, 0, 1: every hop crosses, two through each NIC."""
    def main(ctx):
        yield from all_reduce(ctx, [0, 2, 1, 3], Phantom(4096), algorithm="ring")

    result = simulate({"worker": 4}, main, hardware=hardware(2), fidelity="flow")
    assert result.flows == 0 and result.messages == 2 * 3 * 4


@pytest.mark.parametrize("algorithm,tasks,per_machine,pieces,why", [
    ("ring", 512, 4, 1, None), ("ring", 6, 4, 3, None), ("hierarchical", 10, 4, 1, None),
    ("ps", 16, 4, 1, "the ps all-reduce over 16 tasks, 4 to a machine, has no flow-level "
                     "plan (flows take several tasks a machine in the ring and hierarchical "
                     "only); use --algorithm ring or hierarchical"),
    ("ring", 1023, 4, 1, "the ring all-reduce over 1023 tasks, 4 to a machine, has no "
                         "flow-level plan (evaluating it costs 2,091,012 port steps, over "
                         "1,048,576: its last machine holds 3); use a multiple of 4 tasks"),
    ("hierarchical", 10, 4, 2, "the hierarchical all-reduce with --pieces 2 over 10 tasks, 4 "
                               "to a machine, has no flow-level plan (pipelined")])
def test_no_flow_plan_names_the_layouts_flow_mode_runs_as_messages(algorithm, tasks,
                                                                  per_machine, pieces, why):
    said = no_flow_plan(algorithm, tasks, per_machine, pieces)
    assert said == why if why is None else said.startswith(why) and "\n" not in said
