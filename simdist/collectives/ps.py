"""Parameter-server style all-reduce: push shards to their servers, pull the sums back.

The value is cut into ``num_ps`` shards; shard i lives on member i (a parameter server
co-located with a worker, as in BytePS or a ps task per machine). Every member pushes each
shard to its server, the server adds the p pushes and every member pulls the sum. With one
server this is the naive reduce-to-one; with a shard on every member each NIC carries
2(p-1)/p of the value, like the ring, in only two rounds. Members send to servers in a
rotated order (member r starts with server r+1) so that servers are not all hit at once.
"""

from __future__ import annotations

from simdist.collectives.group import CollectiveError, begin
from simdist.collectives.ops import ReduceOp, copy, join, split


def ps_all_reduce(ctx, members, value, op=ReduceOp.SUM, num_ps: int = 1, device=None):
    """All-reduce by push/pull through ``num_ps`` parameter-server shards."""
    c, op = begin(ctx, members, "ps", value, op, device, what="parameter-server all-reduce")
    if not isinstance(num_ps, int) or not 1 <= num_ps <= c.p:
        raise CollectiveError(f"ps all-reduce: num_ps={num_ps!r} must be an int between 1 and "
                              f"the number of members ({c.p})")
    p, r = c.p, c.rank
    shards = split(copy(value), num_ps)
    order = [(r + 1 + k) % p for k in range(p)]  # rotated: member r starts with r+1
    t0 = ctx.now
    for server in order:
        if server < num_ps and server != r:
            c.send(server, "push", shards[server])
    if r < num_ps:  # this member serves shard r
        for k in order:
            if k != r:
                got = yield from c.recv(k, "push", expect=shards[r])
                shards[r] = op.combine(shards[r], got)
        shards[r] = op.finalize(shards[r], p)
        c.span("push (serve shard)", t0, step=0, chunk=r, peer="all", phase="push")
        t0 = ctx.now
        for k in order:
            if k != r:
                c.send(k, "pull", shards[r])
    for server in order:
        if server < num_ps and server != r:
            shards[server] = yield from c.recv(server, "pull", expect=shards[server])
            c.span("pull", t0, step=1, chunk=server, peer=c.task_name(server), phase="pull")
            t0 = ctx.now
    return join(shards, value)
