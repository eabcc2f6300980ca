"""One call of a collective on one participant: its group, its messages and its trace spans.

It plays the part of TF's collective "group" and "instance" keys: every participant lists the
same members in the same order and calls collectives in the same order, so the n-th call on
each of them talks about the same data. Every step of an algorithm is a span on the task's
"collective" lane with its step index, chunk and peer.
"""

from __future__ import annotations

import numpy as np

from simdist.sim.context import TaskContext
from simdist.base.errors import InvalidArgumentError
from simdist.sim.payloads import Phantom
from simdist.collectives.ops import ReduceOp, check_pieces, check_value, size_of

LANE = "collective"


class CollectiveError(InvalidArgumentError):
    """Participants disagree (shapes, dtypes, membership): the message names them."""


class Collective:
    """The state of one collective call on one participant."""

    def __init__(self, ctx: TaskContext, members, name: str, value=None, device=None):
        self.ctx = ctx
        self.name = name
        self.device = device
        self.members = [member_address(ctx, m) for m in members]
        names = [self._describe(m) for m in self.members]
        if len(set(self.members)) != len(self.members):
            raise CollectiveError(f"{name}: members {names} name a participant twice")
        me = (ctx.order, device)
        if me not in self.members:
            raise CollectiveError(f"{name}: {self._describe(me)} calls it but is not one of "
                                  f"its members {names}")
        self.p = len(self.members)
        self.rank = self.members.index(me)
        # like TF's group and instance keys: numbered per group, so that members of a
        # sub-group (hierarchical's leaders) do not shift everyone else's numbers
        self.instance = ctx.next_instance((name, tuple(self.members), device))
        self.value = value

    def _describe(self, member) -> str:
        order, device = member
        name = self.ctx._names[order]
        return name if device is None else f"{name}/{self.ctx._device_name(device)}"

    def task_name(self, rank: int) -> str:
        """The member's name: "worker:1", or "worker:1/GPU:0" for a device."""
        return self._describe(self.members[rank % self.p])

    def tag(self, step, chunk=None) -> str:
        suffix = "" if chunk is None else f"c{chunk}"
        return f"{self.name}#{self.instance} s{step}{suffix}"

    def send(self, rank: int, step, value, chunk=None):
        """Send to the member with group rank ``rank`` (non-blocking)."""
        # collectives never change a buffer after sending it, so no snapshot is needed
        order, device = self.members[rank % self.p]
        self.ctx.send(order, self.tag(step, chunk), value, copy=False, device=self.device,
                      dst_device=device)

    def recv(self, rank: int, step, expect=None, chunk=None, into=None):
        """Receive from member ``rank`` (use with ``yield from``); check it against ``expect``.
        ``into``: where the payload may land when it crosses ranks (see ``ctx.recv``; the
        tag of a collective's message is unique, as that requires)."""
        src, src_device = self.members[rank % self.p]
        msg = yield self.ctx.recv(src, self.tag(step, chunk), src_device=src_device,
                                  device=self.device, into=into)
        if expect is not None:
            self._check(msg.payload, expect, rank)
        return msg.payload

    def _check(self, got, expect, rank):
        same = (isinstance(got, Phantom) == isinstance(expect, Phantom)
                and size_of(got) == size_of(expect)
                and (isinstance(got, Phantom) or got.dtype == expect.dtype))
        if not same:
            raise CollectiveError(
                f"{self.name}: {self.task_name(rank)} sent {_describe(got)} where "
                f"{self.ctx.name} expected {_describe(expect)}: every participant must pass "
                f"values of the same shape and dtype"
                + (f" ({self.ctx.name} passed {_describe(self.value)})"
                   if self.value is not None else ""))

    def span(self, label: str, start: int, **args):
        """Record one step, from ``start`` to now, on the collective lane."""
        lane = LANE if self.device is None else f"{self.ctx._device_name(self.device)} {LANE}"
        self.ctx.span(lane, f"{self.name} {label}", self.name, start, self.ctx.now - start,
                      **args)


def begin(ctx: TaskContext, members, name: str, value, op=None, device=None, pieces: int = 1,
          what: str | None = None) -> tuple[Collective, ReduceOp | None]:
    """What every collective call starts with: ``op`` parsed (None: a collective that does not
    reduce), ``value`` and ``pieces`` checked (``what`` names the call in the error, default
    ``name``), then the call's ``Collective``, which checks the members. Returns it and the
    op."""
    op = None if op is None else ReduceOp.parse(op)
    check_value(value, what or name)
    check_pieces(pieces)
    return Collective(ctx, members, name, value, device), op


def member_address(ctx: TaskContext, member) -> tuple:
    """(task order, device or None) of a member given as a task or as (task, device)."""
    if isinstance(member, tuple):
        if len(member) != 2:
            raise CollectiveError(f"member {member!r}: expected a task or (task, device index)")
        ctx._check_device(member[1])
        return ctx._order_of(member[0]), member[1]
    return ctx._order_of(member), None


def _describe(value) -> str:
    if isinstance(value, Phantom):
        return f"a phantom of {value.nbytes} bytes"
    if isinstance(value, np.ndarray):
        return f"shape {value.shape} {value.dtype}"
    return repr(value)
