"""Parameter-server style all-reduce: push shards to their servers, pull the sums back.

The value is cut into ``num_ps`` shards, each served by a member (a parameter server
co-located with a worker, as in BytePS or a ps task per machine). ``placement="spread"``
(the default) puts them one per machine before a second on any machine, as TF's
``replica_device_setter`` over one ps task per machine would; ``"first"`` on the first
``num_ps`` members, whatever machines they share. With one member per machine the two are the
same: shard i on member i. Every member pushes each
shard to its server, the server adds the p pushes and every member pulls the sum. With one
server this is the naive reduce-to-one; with a shard on every member each NIC carries
2(p-1)/p of the value, like the ring, in only two rounds. Members send to servers in a
rotated order (member r starts with server r+1) so that servers are not all hit at once.
"""

from __future__ import annotations

from simdist.collectives.group import CollectiveError, begin
from simdist.collectives.ops import ReduceOp, copy, join, split


PLACEMENTS = ("spread", "first")


def ps_servers(machines: list, num_ps: int, placement: str = "spread") -> list[int]:
    """The members (indices) that serve shards 0, 1, ...: ``machines`` gives each member's
    machine, in member order."""
    if placement not in PLACEMENTS:
        raise CollectiveError(f"ps all-reduce: placement={placement!r}: expected one of "
                              f"{', '.join(PLACEMENTS)}")
    if placement == "first":
        return list(range(num_ps))
    seen: dict = {}
    nth = []  # each member's place among the members of its machine
    for m in machines:
        nth.append(seen.get(m, 0))
        seen[m] = nth[-1] + 1
    return sorted(range(len(machines)), key=lambda k: (nth[k], k))[:num_ps]


def ps_all_reduce(ctx, members, value, op=ReduceOp.SUM, num_ps: int = 1,
                  placement: str = "spread", device=None):
    """All-reduce by push/pull through ``num_ps`` parameter-server shards."""
    c, op = begin(ctx, members, "ps", value, op, device, what="parameter-server all-reduce")
    if not isinstance(num_ps, int) or not 1 <= num_ps <= c.p:
        raise CollectiveError(f"ps all-reduce: num_ps={num_ps!r} must be an int between 1 and "
                              f"the number of members ({c.p})")
    p, r = c.p, c.rank
    layout = ctx.hardware.layout
    servers = ps_servers([layout.machine_of(o) for o, _ in c.members], num_ps, placement)
    shard_of = {member: i for i, member in enumerate(servers)}
    shards = split(copy(value), num_ps)
    order = [(r + 1 + k) % p for k in range(p)]  # rotated: member r starts with r+1
    t0 = ctx.now
    for server in order:
        if server in shard_of and server != r:
            c.send(server, "push", shards[shard_of[server]])
    if r in shard_of:  # this member serves a shard
        mine = shard_of[r]
        for k in order:
            if k != r:
                got = yield from c.recv(k, "push", expect=shards[mine])
                shards[mine] = op.combine(shards[mine], got)
        shards[mine] = op.finalize(shards[mine], p)
        c.span("push (serve shard)", t0, step=0, chunk=mine, peer="all", phase="push")
        t0 = ctx.now
        for k in order:
            if k != r:
                c.send(k, "pull", shards[mine])
    for server in order:
        if server in shard_of and server != r:
            i = shard_of[server]
            shards[i] = yield from c.recv(server, "pull", expect=shards[i])
            c.span("pull", t0, step=1, chunk=i, peer=c.task_name(server), phase="pull")
            t0 = ctx.now
    return join(shards, value)
