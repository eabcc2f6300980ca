"""A stress program for determinism: 7 tasks on 3 machines, random sizes, any-source receives.

Every task draws the same communication plan from the seed, then runs two processes: one
sends its planned messages (real arrays or phantoms) after random compute, one receives with
``recv()`` from any source and sums what it gets.
"""

import numpy as np

from simdist.hardware.cluster import ClusterSpec
from simdist.hardware.devices import Layout
from simdist.sim.payloads import Phantom
from simdist.training.programs import Program


def add_arguments(parser):
    parser.add_argument("--messages", type=int, default=60)


def setup(args):
    return ClusterSpec({"chief": 1, "worker": 4, "ps": 2}), Layout(tasks_per_machine=3)


def plan(seed, n, count):
    rng = np.random.default_rng(seed)
    msgs = []
    for i in range(count):
        src = int(rng.integers(n))
        dst = int((src + 1 + rng.integers(n - 1)) % n)
        size = int(rng.choice([8, 1024, 1 << 16, 1 << 20]))
        msgs.append((i, src, dst, size, bool(rng.integers(2))))
    return msgs


def main(ctx, args):
    msgs = plan(ctx.seed, ctx.num_tasks, args.messages)
    mine = [m for m in msgs if m[1] == ctx.order]
    expected = sum(1 for m in msgs if m[2] == ctx.order)

    def sender():
        for i, _, dst, size, real in mine:
            yield ctx.compute(f"prepare {i}", flops=float(ctx.rng.integers(1, 10**7)))
            payload = np.full(size // 4, i, dtype=np.float32) if real else Phantom(size)
            ctx.send(dst, i % 3, payload)

    def receiver():
        total = 0.0
        for _ in range(expected):
            msg = yield ctx.recv()
            if not isinstance(msg.payload, Phantom):
                total += float(msg.payload.sum())
            ctx.counter("received", bytes=msg.nbytes)
        return total

    s = ctx.process(sender(), "sender")
    r = ctx.process(receiver(), "receiver")
    yield s
    total = yield r
    return total


PROGRAM = Program(name="chatter", summary="random traffic for determinism tests",
                  setup=setup, main=main, add_arguments=add_arguments)
