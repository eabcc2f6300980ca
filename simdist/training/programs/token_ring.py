"""A token passed around 4 tasks on 2 machines: latency, bandwidth and a NIC queueing up.

Three phases, each a classic picture of the cost model:
1. a small token (8 bytes) goes around the ring: every hop costs about one link latency
   (latency-bound), and the hop between machines is slower than the hop inside one;
2. a large token (8 MiB by default) goes around: every hop costs about bytes / bandwidth
   (bandwidth-bound);
3. every task pushes a large "gradient" to the last task at once (what workers do to a
   parameter server): the senders on the other machine share one NIC, so their messages
   queue up behind each other.
"""

import numpy as np

from simdist.hardware.cluster import ClusterSpec
from simdist.hardware.devices import Layout
from simdist.base.checks import check_footprint
from simdist.base.errors import InvalidArgumentError
from simdist.hardware.units import size_option
from simdist.training.programs.program import Program

#: the largest token (every task holds one, and the last task a sum as large)
MAX_TOKEN_BYTES = 1 << 30


def add_arguments(parser):
    parser.add_argument("--tasks", type=int, default=4, help="number of tasks (default 4)")
    parser.add_argument("--tasks-per-machine", type=int, default=2,
                        help="tasks on one machine (default 2)")
    parser.add_argument("--rounds", type=int, default=2, help="laps of each token (default 2)")
    parser.add_argument("--small-bytes", type=size_option, default=8,
                        help="size of the small token in bytes (default 8)")
    parser.add_argument("--large-bytes", type=size_option, default=8 << 20,
                        help="size of the large token and of each pushed gradient (default 8 MiB)")


def setup(args):
    if args.tasks < 2:
        raise InvalidArgumentError(f"--tasks {args.tasks}: a ring needs at least 2 tasks")
    if args.rounds < 0:
        raise InvalidArgumentError(f"--rounds {args.rounds}: expected a number of laps >= 0")
    for option in ("small_bytes", "large_bytes"):
        size = getattr(args, option)
        if not 1 <= size <= MAX_TOKEN_BYTES:
            raise InvalidArgumentError(f"--{option.replace('_', '-')} {size}: expected a size "
                                       f"in bytes >= 1 and <= {MAX_TOKEN_BYTES} (1 GiB)")
    check_footprint(memory(args), f"--tasks {args.tasks:,} with --large-bytes "
                    f"{args.large_bytes:,}", "each task holds a large token and pushes a "
                    "gradient as large, all in flight at once, and about 16 KiB of its own",
                    "give fewer tasks or a smaller --large-bytes")
    return ClusterSpec({"worker": args.tasks}), Layout(tasks_per_machine=args.tasks_per_machine)


def memory(args) -> int:
    """About the bytes a run takes (measured: 190 tasks of 8 MiB, 3.0 GiB estimated, 3.0 GiB
    of resident memory)."""
    return args.tasks * (2 * args.large_bytes + 2 * args.small_bytes + (16 << 10))


def pass_token(ctx, token, rounds, tag):
    """One task's part of passing ``token`` around the ring ``rounds`` times."""
    n, me = ctx.num_tasks, ctx.order
    nxt, prev = (me + 1) % n, (me - 1) % n
    for _ in range(rounds):
        if me == 0:
            ctx.send(nxt, tag, token)
        msg = yield ctx.recv(prev, tag)
        token = msg.payload + 1
        yield ctx.compute(f"add one ({tag})", flops=token.size, nbytes=2 * token.nbytes)
        if me != 0:
            ctx.send(nxt, tag, token)
    return token


def main(ctx, args):
    small = np.zeros(max(1, args.small_bytes // 4), dtype=np.float32)
    large = np.zeros(max(1, args.large_bytes // 4), dtype=np.float32)
    small = yield from pass_token(ctx, small, args.rounds, "small token")
    large = yield from pass_token(ctx, large, args.rounds, "large token")
    last = ctx.num_tasks - 1
    if ctx.order != last:
        yield ctx.recv(last, "go")  # start the push together, like workers after a barrier
        grad = ctx.rng.standard_normal(large.size).astype(np.float32)
        ctx.send(last, "gradient", grad)
        return float(small[0]), float(large[0])
    for task in range(last):
        ctx.send(task, "go", None)
    total = np.zeros_like(large)
    for _ in range(last):
        msg = yield ctx.recv(tag="gradient")
        total += msg.payload
        yield ctx.compute(f"sum gradient from {msg.src}", flops=total.size,
                          nbytes=3 * total.nbytes)
    return float(small[0]), float(large[0]), float(total.sum(dtype=np.float64))


def report(result, hardware, args) -> str:
    """What the trace shows, phase by phase, next to the cost model's formulas."""
    from simdist.hardware.units import format_bytes, format_ns

    lines = ["", "what happened (per message: arrival - send, slowest message shown):",
             f"  {'phase':<13}{'link':<8}{'bytes':>10}{'latency':>10}{'bytes/bw':>10}"
             f"{'measured':>10}{'queued':>10}  bound by"]
    links = {hardware.intra_link.name: hardware.intra_link,
             hardware.network.name: hardware.network}
    for tag in ("small token", "large token", "gradient"):
        for name, link in links.items():
            flows = [f for f in result.trace.flows if f.name == tag and f.args["link"] == name]
            if not flows:
                continue
            nbytes = flows[0].args["bytes"]
            took = max(f.t_recv - f.args["sent_at_ns"] for f in flows)
            ser = link.serialization_ns(nbytes)
            queued = took - link.latency_ns - ser
            bound = "latency" if link.latency_ns > ser else "bandwidth"
            bound += " + NIC queue" if queued > 0 else ""
            lines.append(f"  {tag:<13}{name:<8}{format_bytes(nbytes):>10}"
                         f"{format_ns(link.latency_ns):>10}{format_ns(ser):>10}"
                         f"{format_ns(took):>10}{format_ns(max(queued, 0)):>10}  {bound}")
    return "\n".join(lines)


def cost(args) -> int:
    """About the events of the run: two laps of tokens and a push, per task."""
    return args.tasks * (8 * args.rounds + 8)


PROGRAM = Program(
    name="token_ring",
    summary="a token around 4 tasks on 2 machines: latency- vs bandwidth-bound, a NIC queue",
    setup=setup,
    main=main,
    add_arguments=add_arguments,
    report=report,
    cost=cost,
)
