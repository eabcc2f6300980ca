"""Flow-level all-reduce (``fidelity="flow"``): a collective as a few flows, not p^2 messages.

In a run with ``simulate(..., fidelity="flow")`` (``simdist run ... --fidelity flow``),
``all_reduce`` over size-only values (``Phantom``) does not send the algorithm's messages: each
member joins the call once, and the network (``simdist.sim.flows``) runs each phase of the
algorithm as one flow: its time alone from the algorithm's closed form (``formulas.py``), its
bytes and messages through each member's NIC from the algorithm's traffic, and NIC contention
from max-min fair sharing with the other flows running at the same time. Each member wakes
once, when the call ends, and its trace shows one span per phase, and on its machine's NIC an
egress and an ingress span per phase: its bytes at the speed the phase ran (the NIC busy time
of ``simdist run``'s table, within 1% of message mode's alone). The time of a call alone on the
network equals the closed form, which the message mode matches within 1% where the closed form
holds (tests/collectives/test_flow_fidelity.py); what costs p^2 events per step in message mode
costs about p here (1,024 workers: ~2 million messages a step against 1,024 joins).

What flow mode does not model (the call falls back to messages where it would matter):

- real values: a call over numpy arrays always runs its messages (it must add them up);
- members that are devices of a task (``device=``), and layouts without a closed form: an
  algorithm other than ring and hierarchical with two members on one machine, a ring whose
  machines' members are not next to each other (two hops through one NIC) or too costly to
  evaluate (``RING_WORK``), hierarchical with explicit ``groups`` or pipelined over
  machines of unequal sizes, a reduce-to-one with a ``root``: these run as messages
  (``simdist run data_parallel --fidelity flow`` refuses such a layout up front,
  ``no_flow_plan``, rather than say "flow" and send messages);
- the start and the end: a flow-level call starts when its last member joins and ends for
  all its members at once; in message mode the early members' first sends start before,
  and in a ring over machines of several tasks a member that hears over the machine's link
  ends while its NIC still sends the last chunk on (up to (k-1)/(2(p-1)) of the ring
  sooner; a training loop's next step starts that much earlier there: docs/results/overlap.md);
- inside a phase: the latencies of a phase are one block, its transfer one fluid stream at
  the rate its busiest port allows; pipelining (``pieces``) is in the closed form only;
- contention between flows and messages: a flow shares NICs with the other flows, not with
  messages sent by ``ctx.send`` at the same time (those queue only behind each other);
- fair sharing, not FIFO: flows that share a NIC progress together, where messages queue in
  order; two parameter-server exchanges through one server both finish pushing before
  either pulls (FIFO lets the first pull while the second pushes): 33% longer than message
  mode in that case, while two rings over the same NICs agree within 1%;
- phases that are not symmetric (trees, recursive doubling's fold) get their closed-form time
  split evenly between their phases: exact alone, an approximation under contention.
"""

from __future__ import annotations

import functools
import math

from simdist.sim.flows import INTRA, NETWORK, FlowPhase, PortTraffic
from simdist.sim.network import nic_name
from simdist.sim.payloads import Phantom
from simdist.collectives import formulas
from simdist.collectives.group import CollectiveError, member_address
from simdist.collectives.ops import ReduceOp, split_sizes


def flow_plan(record, orders: tuple, n: int, hardware, options: dict):
    """The phases of one call of ``record``'s algorithm over tasks ``orders`` (member order)
    on ``hardware``, or None where flow mode does not cover it (it runs as messages)."""
    return _plan(record, orders, n, hardware, tuple(sorted(options.items())))


@functools.lru_cache(maxsize=64)  # a pure function: the tasks of one process share a plan
def _plan(record, orders, n, hardware, options):
    options, planner = dict(options), PLANS.get(record.name)
    if planner is None:
        return None
    if options.pop("root", None) is not None:
        return None  # reduce-to-one through a chosen root: its closed form has no root
    layout = hardware.layout
    machines = [layout.machine_of(o) for o in orders]
    if record.name != "hierarchical":
        if len(set(machines)) != len(orders):
            if record.name == "ring":  # several tasks a machine: hops over NICs and NVLink
                return _ring_on_machines(orders, machines, n, hardware, **options)
            return None
        net = hardware.network
        formula = record.formula(len(orders), n, net.latency_ns, net.bandwidth,
                                 o=net.message_ns, **options)
        return planner(orders, n, formula, **options)
    return planner(orders, machines, n, hardware, **options)


def _net(orders, tx, rx, tx_messages, rx_messages):
    """Each member's NETWORK traffic: bytes and messages sent and received."""
    return tuple(PortTraffic(*fields) for fields in zip(
        orders, [NETWORK] * len(orders), tx, rx, tx_messages, rx_messages))


def _even(names, total, traffic):
    """Phases that share the closed form's time evenly."""
    return tuple(FlowPhase(name, total / len(names), t) for name, t in zip(names, traffic))


def _ring(orders, n, total, pieces=1):
    p = len(orders)
    moved, messages = [(p - 1) * math.ceil(n / p)] * p, [(p - 1) * pieces] * p
    return _even(("reduce-scatter", "all-gather"), total,
                 [_net(orders, moved, moved, messages, messages)] * 2)


def _ring_on_machines(orders, machines, n, hardware, pieces=1):
    """A ring whose members share machines (NCCL's ring over 4 GPUs a server): its hops
    between machines cross the NICs, the others the machine's own link (NVLink, shared
    memory). Each machine's members must be next to each other in the ring, so that each
    NIC carries one hop each way (as in message mode's FIFOs); else None (messages)."""
    p = len(orders)
    crosses = [machines[r] != machines[(r + 1) % p] for r in range(p)]
    if any(crosses) and sum(crosses) != len(set(machines)):
        return None  # a machine's members apart in the ring: hops would share its NIC
    total = ring_on_machines(crosses, n, hardware, pieces)
    if total is None:
        return None
    moved, m = (p - 1) * math.ceil(n / p), (p - 1) * pieces
    traffic = []
    for r, o in enumerate(orders):  # each member sends to its successor, hears its predecessor
        out, into = (NETWORK if crosses[r] else INTRA), (NETWORK if crosses[r - 1] else INTRA)
        traffic += [PortTraffic(o, out, moved, moved, m, m)] if out == into else \
            [PortTraffic(o, out, moved, 0, m, 0), PortTraffic(o, into, 0, moved, 0, m)]
    return _even(("reduce-scatter", "all-gather"), total, [tuple(traffic)] * 2)


#: the most port steps ``ring_on_machines`` evaluates (about a second of Python): a period
#: of the ring's pattern x its 2(p-1) steps x the pieces
RING_WORK = 1 << 20


def _period(crosses) -> int:
    """The period of a ring's pattern of hops: a machine's members when every machine holds
    as many (1 when none crosses), else the whole ring."""
    p = len(crosses)
    cut = [r for r in range(p) if crosses[r]]
    gaps = {(b - a) % p or p for a, b in zip(cut, cut[1:] + cut[:1])}
    return 1 if not cut else gaps.pop() if len(gaps) == 1 else p


def ring_on_machines(crosses, n: int, hardware, pieces: int = 1) -> float | None:
    """The ring all-reduce's time in ns when hop r (member r to r+1) crosses the network
    where ``crosses[r]`` and the machine's own link elsewhere, as message mode runs it: each
    hop a + (n/p/pieces)/B of its link, holding its port o + (n/p/pieces)/B (o: the link's
    cost per message), each port a FIFO carrying one hop. A member sends
    step s's pieces as it receives step s-1's from its predecessor and its port is free, so
    the slowest hop (the NIC's) sets the pace once the chunks are large, as in NCCL's ring;
    its sender's next chunks queue while the hops inside machines wait. Evaluated step by
    step over one period of the pattern (a machine's members when every machine holds as
    many, else the whole ring); None beyond ``RING_WORK`` port steps."""
    p = len(crosses)
    if p < 2:
        return 0.0
    chunk = math.ceil(n / p) / pieces
    net, intra = hardware.network, hardware.intra_link
    hop = [(link.latency_ns, chunk * 1e9 / link.bandwidth, link.message_ns)
           for link in (net if x else intra for x in crosses)]
    q = _period(crosses)  # hop[r] is hop[r % q]
    if q * 2 * (p - 1) * pieces > RING_WORK:
        return None
    ready = [[0.0] * pieces for _ in range(q)]  # when each member may send each piece
    free = [0.0] * q  # when its port is free
    for _ in range(2 * (p - 1)):  # a step: each member sends a chunk's pieces to the next
        got = [None] * q
        for c in range(q):
            a, d, o = hop[c]
            t, out = free[c], []
            for j in range(pieces):
                t = max(ready[c][j], t)
                out.append(t + a + d)
                t += o + d
            free[c], got[(c + 1) % q] = t, out
        ready = got
    return max(r[-1] for r in ready)


def _reduce_to_one(orders, n, total):
    p = len(orders)
    leaves, leaf_messages = [0] + [n] * (p - 1), [0] + [1] * (p - 1)
    root_side, root_messages = [(p - 1) * n] + [0] * (p - 1), [p - 1] + [0] * (p - 1)
    return _even(("reduce", "broadcast"), total,
                 [_net(orders, leaves, root_side, leaf_messages, root_messages),
                  _net(orders, root_side, leaves, root_messages, leaf_messages)])


def _recursive_doubling(orders, n, total):
    p = len(orders)
    rounds = (p.bit_length() - 1) + (0 if p & (p - 1) == 0 else 2)  # the fold: one more each way
    moved, messages = [rounds * n] * p, [rounds] * p
    return _even(("exchange",), total, [_net(orders, moved, moved, messages, messages)])


def _halving_doubling(orders, n, total):
    p = len(orders)
    rounds = p.bit_length() - 1
    fold = p & (p - 1) != 0
    moved = [sum(math.ceil(n / 2 ** (k + 1)) for k in range(rounds)) + fold * n] * p
    messages = [rounds + fold] * p
    return _even(("reduce-scatter (halving)", "all-gather (doubling)"), total,
                 [_net(orders, moved, moved, messages, messages)] * 2)


def _binary_tree(orders, n, total, pieces=1):
    p = len(orders)
    children = [len([c for c in (2 * i + 1, 2 * i + 2) if c < p]) for i in range(p)]
    up = [0 if i == 0 else n for i in range(p)]
    down = [k * n for k in children]
    up_messages = [0 if i == 0 else pieces for i in range(p)]
    down_messages = [k * pieces for k in children]
    return _even(("reduce (up the tree)", "broadcast (down)"), total,
                 [_net(orders, up, down, up_messages, down_messages),
                  _net(orders, down, up, down_messages, up_messages)])


def _double_binary_tree(orders, n, total, pieces=1):
    p = len(orders)
    moved, messages = [0] * p, [0] * p
    for half, place in ((n - n // 2, lambda r: r), (n // 2, lambda r: p - 1 - r)):
        for r in range(p):  # up and down the tree: to its parent and to each child
            i = place(r)
            hops = (i > 0) + len([c for c in (2 * i + 1, 2 * i + 2) if c < p])
            moved[r] += half * hops
            messages[r] += pieces * hops
    return _even(("reduce and broadcast (two trees)",), total,
                 [_net(orders, moved, moved, messages, messages)])


def _ps(orders, n, total, num_ps=1, placement="spread"):  # one member a machine: same
    p = len(orders)
    if not isinstance(num_ps, int) or not 1 <= num_ps <= p:
        return None  # the message path says what is wrong
    shards = split_sizes(n, num_ps) + [0] * (p - num_ps)
    pushed = [sum(shards) - shards[r] for r in range(p)]  # to every server but itself
    served = [(p - 1) * shards[r] for r in range(p)]
    servers = sum(1 for shard in shards if shard)
    pushes = [servers - (shards[r] > 0) for r in range(p)]
    serves = [(p - 1) * (shards[r] > 0) for r in range(p)]
    return _even(("push", "pull"), total,
                 [_net(orders, pushed, served, pushes, serves),
                  _net(orders, served, pushed, serves, pushes)])


def _hierarchical(orders, machines, n, hardware, pieces=1, groups=None):
    if groups is not None:
        return None
    by_machine: dict = {}
    for o, m in zip(orders, machines):
        by_machine.setdefault(m, []).append(o)
    local = list(by_machine.values())
    sizes = {len(g) for g in local}
    if pieces > 1 and len(sizes) > 1:
        return None  # the closed form holds for equal machines only
    k, m = max(sizes), len(local)
    intra, net = hardware.intra_link, hardware.network
    phases = []
    if k > 1:
        reduce_ns = formulas.reduce_to_one(k, n, intra.latency_ns, intra.bandwidth,
                                           intra.message_ns) / 2
        up = tuple(PortTraffic(o, INTRA, n, 0, 1, 0) if i else
                   PortTraffic(o, INTRA, 0, (len(g) - 1) * n, 0, len(g) - 1)
                   for g in local for i, o in enumerate(g))
        down = tuple(PortTraffic(t.order, INTRA, t.rx, t.tx, t.rx_messages, t.tx_messages)
                     for t in up)
        phases.append(FlowPhase("reduce in the machine", reduce_ns, up))
    if m > 1:
        leaders = [g[0] for g in local]
        phases += _ring(leaders, n, formulas.ring(m, n, net.latency_ns, net.bandwidth, pieces,
                                                  net.message_ns), pieces)
    if k > 1:
        phases.append(FlowPhase("broadcast in the machine", reduce_ns, down))
    return tuple(phases)


#: the algorithms flow mode covers, by record name (the others always run as messages)
PLANS = {"ring": _ring, "reduce-to-one": _reduce_to_one,
         "recursive-doubling": _recursive_doubling, "halving-doubling": _halving_doubling,
         "binary-tree": _binary_tree, "double-binary-tree": _double_binary_tree,
         "ps": _ps, "hierarchical": _hierarchical}


def no_flow_plan(algorithm: str, tasks: int, tasks_per_machine: int,
                 pieces: int = 1) -> str | None:
    """Why an all-reduce of ``algorithm`` over tasks 0..``tasks``-1, ``tasks_per_machine`` to
    a machine, would run as messages in flow mode (a phrase naming what would not, ending
    with what to use instead), or None when it has a flow plan: a command that offers
    ``--fidelity flow`` refuses it up front rather than fall back."""
    k = tasks_per_machine
    if algorithm not in PLANS:
        return (f"the {algorithm} all-reduce has no flow-level plan; use --fidelity message or "
                f"one of {', '.join(PLANS)}")
    if k <= 1 or tasks <= 1:
        return None
    what = (f"the {algorithm} all-reduce{f' with --pieces {pieces}' if pieces > 1 else ''} "
            f"over {tasks} tasks, {k} to a machine, has no flow-level plan")
    if algorithm == "ring":
        q = _period([r // k != (r + 1) % tasks // k for r in range(tasks)])
        if q * 2 * (tasks - 1) * pieces <= RING_WORK:
            return None
        cause, fix = ((f"its last machine holds {tasks % k}", f"a multiple of {k} tasks")
                      if tasks % k else (f"{pieces} pieces a chunk", "fewer --pieces"))
        return (f"{what} (evaluating it costs {q * 2 * (tasks - 1) * pieces:,} port steps, "
                f"over {RING_WORK:,}: {cause}); use {fix} or --fidelity message")
    if algorithm == "hierarchical":
        if pieces <= 1 or tasks <= k or not tasks % k:
            return None
        return (f"{what} (pipelined, its closed form holds for machines of equal sizes); use "
                f"a multiple of {k} tasks, --pieces 1 or --fidelity message")
    return (f"{what} (flows take several tasks a machine in the ring and hierarchical only); "
            "use --algorithm ring or hierarchical, --tasks-per-machine 1 or --fidelity "
            "message")


def _group(ctx, members, name):
    """(member task orders, this task's rank, key) of a group of tasks, checked and kept on
    the task for its next calls (a training loop all-reduces over the same members); False
    when the members are devices (flow mode does not cover them). The key is the same on
    every member however it gives the members. Give thousands of members as a ``range``:
    a list costs each task a tuple of them."""
    if members.__class__ is not range:
        members = tuple(members)
    group = ctx.groups.get(members)
    if group is None:
        if isinstance(members, range) and members.step == 1 and len(members) and \
                0 <= members.start and members.stop <= ctx.num_tasks:
            orders = members  # task orders, kept as a range: no copy per task
        elif members and set(map(type, members)) == {int} and 0 <= min(members) and \
                max(members) < ctx.num_tasks:
            orders = members  # task orders already
        elif any(isinstance(m, tuple) for m in members):
            ctx.groups[members] = False
            return False
        else:
            orders = tuple(member_address(ctx, m)[0] for m in members)
        if not isinstance(orders, range) and len(set(orders)) != len(orders):
            raise CollectiveError(f"{name}: members {list(members)} name a participant twice")
        if ctx.order not in orders:
            raise CollectiveError(f"{name}: {ctx.name} calls it but is not one of its members "
                                  f"{list(members)}")
        p = len(orders)
        if orders[-1] - orders[0] == p - 1 and (isinstance(orders, range)
                                                 or list(orders) == list(range(orders[0],
                                                                               orders[-1] + 1))):
            key = ("tasks", orders[0], p)  # consecutive tasks, however given
            orders = range(orders[0], orders[0] + p)
        else:
            key = ("members", p, hash(tuple(orders)))
        group = ctx.groups[members] = (orders, orders.index(ctx.order), key)
    return group


def covers(ctx, value, device) -> bool:
    """Whether ``all_reduce`` may run this call at flow level: a flow-fidelity run, a
    size-only value, members that are tasks (not devices of a task)."""
    return ctx.fidelity == "flow" and value.__class__ is Phantom and device is None


def flow_all_reduce(ctx, record, members, value, op, options):
    """``all_reduce`` at flow level (use with ``yield from``): one join, one wake-up, one
    span per phase; the message path where the algorithm or layout is not covered."""
    ReduceOp.parse(op)
    group = _group(ctx, members, record.name)
    if not group:  # devices of tasks: messages
        return (yield from record.function(ctx, members, value, op, **options))
    orders, rank, group_key = group
    p = len(orders)
    if p == 1:
        return value
    plans = ctx.groups.setdefault((group_key, "plans"), {})
    plan_key = (record.name, value.nbytes, tuple(sorted(options.items())))
    phases = plans.get(plan_key, False)
    if phases is False:  # the same on every member: a function of the arguments
        phases = plans[plan_key] = flow_plan(record, orders, value.nbytes, ctx.hardware,
                                             options)
    if phases is None:
        return (yield from record.function(ctx, members, value, op, **options))
    instance = ctx.next_instance((record.name, group_key))
    given = "".join(f", {k}={v!r}" for k, v in sorted(options.items()))
    what = f"{record.name} all-reduce #{instance} of {value.nbytes} B over {p} tasks{given}"
    spans = yield ctx.join_flow((record.name, group_key, instance), p,
                                phases if rank == 0 else None, what)
    for phase, plan in zip(spans, phases):  # a flows.PhaseSpan each, and its FlowPhase
        ctx.span("collective", f"{record.name} {phase.name} (flow)", record.name, phase.start,
                 phase.end - phase.start, phase=phase.name, members=p, bytes=value.nbytes)
        _nic_spans(ctx, f"{record.name} {phase.name}", phase, plan)
    return value


#: id(phase) -> (the FlowPhase, its NETWORK traffic by member: {order: [PortTraffic, ...]},
#: the most time one port is busy): the tasks of one process share a plan (``_plan``'s
#: cache), so each phase's traffic is indexed once, not scanned again by each member
_BY_MEMBER: dict = {}


def _network_traffic(plan, link):
    """``plan``'s NETWORK traffic by member, and its busiest port's time on ``link``
    (cached)."""
    entry = _BY_MEMBER.get(id(plan))
    if entry is None or entry[0] is not plan:
        if len(_BY_MEMBER) >= 256:
            _BY_MEMBER.clear()
        by_member, most = {}, 0.0
        for traffic in plan.traffic:
            if traffic.link == NETWORK:
                by_member.setdefault(traffic.order, []).append(traffic)
                most = max(most, *traffic.busy_ns(link))
        entry = _BY_MEMBER[id(plan)] = (plan, by_member, most)
    return entry[1], entry[2]


def _nic_spans(ctx, what: str, phase, plan) -> None:
    """This member's share of its machine's NIC during one phase, as message mode shows
    it: an egress span of what it sent and an ingress span of what it received, each as
    long as its bytes and messages take (``PortTraffic.busy_ns``) at the speed the phase
    ran (its busiest port's time over the closed form's alone: slower when other flows
    shared the NICs)."""
    trace = ctx._trace  # a span of the NIC's process, kept in this task's stream
    if trace is None:
        return
    link = ctx.hardware.network
    by_member, alone = _network_traffic(plan, link)  # alone: the busiest port's time
    mine = by_member.get(ctx.order)
    if not mine or alone <= 0:
        return
    took = phase.end - phase.start
    transfer = min(took, max(alone, took - (plan.duration_ns - alone)))
    nic = nic_name(ctx.hardware.layout.machine_of(ctx.order))
    for traffic in mine:
        for lane, nbytes, busy, name in zip(
                ("egress", "ingress"), (traffic.tx, traffic.rx), traffic.busy_ns(link),
                (f"{ctx.name} → {what}", f"{what} → {ctx.name}")):
            if busy:
                trace.span(nic, lane, name, "network", phase.start,
                           max(1, round(busy * transfer / alone)),
                           {"bytes": nbytes, "flow": True})
