"""One call of a collective on one participant: its group, its messages and its trace spans.

It plays the part of TF's collective "group" and "instance" keys: every participant lists the
same members in the same order and calls collectives in the same order, so the n-th call on
each of them talks about the same data. Every step of an algorithm is a span on the task's
"collective" lane with its step index, chunk and peer.
"""

from __future__ import annotations

import numpy as np

from ..comm import Phantom
from ..context import TaskContext
from ..errors import InvalidArgumentError
from .ops import size_of

LANE = "collective"


class CollectiveError(InvalidArgumentError):
    """Participants disagree (shapes, dtypes, membership): the message names them."""


class Collective:
    """The state of one collective call on one participant."""

    def __init__(self, ctx: TaskContext, members, name: str, value=None):
        self.ctx = ctx
        self.name = name
        self.members = [ctx._order_of(m) for m in members]
        if len(set(self.members)) != len(self.members):
            raise CollectiveError(f"{name}: members {list(members)} name a task twice")
        if ctx.order not in self.members:
            raise CollectiveError(f"{name}: {ctx.name} calls it but is not one of its members "
                                  f"{[ctx._names[m] for m in self.members]}")
        self.p = len(self.members)
        self.rank = self.members.index(ctx.order)
        self.instance = ctx.next_instance(name)
        self.value = value

    def task_name(self, rank: int) -> str:
        return self.ctx._names[self.members[rank % self.p]]

    def tag(self, step, chunk=None) -> str:
        suffix = "" if chunk is None else f"c{chunk}"
        return f"{self.name}#{self.instance} s{step}{suffix}"

    def send(self, rank: int, step, value, chunk=None):
        """Send to the member with group rank ``rank`` (non-blocking)."""
        # collectives never change a buffer after sending it, so no snapshot is needed
        self.ctx.send(self.members[rank % self.p], self.tag(step, chunk), value, copy=False)

    def recv(self, rank: int, step, expect=None, chunk=None):
        """Receive from member ``rank`` (use with ``yield from``); check it against ``expect``."""
        src = self.members[rank % self.p]
        msg = yield self.ctx.recv(src, self.tag(step, chunk))
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
        self.ctx.span(LANE, f"{self.name} {label}", self.name, start,
                      self.ctx.now - start, **args)


def _describe(value) -> str:
    if isinstance(value, Phantom):
        return f"a phantom of {value.nbytes} bytes"
    if isinstance(value, np.ndarray):
        return f"shape {value.shape} {value.dtype}"
    return repr(value)
