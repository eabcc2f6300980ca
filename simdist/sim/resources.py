"""Shared resources that simulated processes wait on: thread pools, stores, link FIFOs.

The runtime's counterpart of SimPy's ``resources/``: every concept that makes a process wait
for something other than time or a message builds on one of these, so that the waiting is
done once, in one place, and shows up in a deadlock report with what is waited on.

- ``Pool``: ``size`` identical units taken and given back (TF's inter-op thread pool).
- ``Store``: a buffer of items with a capacity; ``put`` waits while it is full and ``get``
  while it holds too few (the base of TF's queues, accumulators and token queues). A store
  outlives a simulation (a TF queue keeps its elements between two ``Session.run`` calls),
  so each request names the environment it waits in.
- ``Ports``: the FIFO ends of links (a machine's NIC, a device's port). A transfer first
  serializes on its sender's port, in send order; its first bit reaches the receiver a
  latency later; then it serializes on the receiver's port, in the order first bits arrive.
  The network between tasks and the links between the devices of one task use this model.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from simdist.sim.core import Environment, Event
from simdist.base.errors import CancelledError, OutOfRangeError


class Pool:
    """``size`` units (threads) handed out first come, first served: ``acquire()`` is an
    event that happens when a unit is free, ``release()`` gives one back."""

    def __init__(self, env: Environment, size: int, name: str = "pool"):
        self.env, self.free, self.name = env, size, name
        self.waiters: deque[Event] = deque()

    def acquire(self) -> Event:
        event = self.env.event(desc=self.name)
        if self.free:
            self.free -= 1
            event.succeed()
        else:
            self.waiters.append(event)
        return event

    def release(self):
        if self.waiters:
            self.waiters.popleft().succeed()
        else:
            self.free += 1

    def cancel(self, request: Event):
        """Withdraw an ``acquire`` whose process no longer wants the unit (it was stopped):
        still waiting, it leaves the line; already granted, the unit is given back."""
        if request in self.waiters:
            self.waiters.remove(request)
        elif request.triggered:
            self.release()


class _Put(NamedTuple):
    """A put waiting in a ``Store``: its event and the items not yet in (taken from the
    front as room comes)."""

    event: Event
    items: deque


class _Get(NamedTuple):
    """A get waiting in a ``Store``: its event, how many items it wants (``up_to``: or fewer
    once the store is closed) and the items it has taken so far."""

    event: Event
    n: int
    up_to: bool
    taken: list


class Store:
    """Items in a bounded buffer; requests are served strictly in the order they came.

    ``put(env, items)`` happens once every item is in (each enters as soon as there is
    room); ``get(env, n)`` happens with a list of ``n`` items, or, after ``close()``, with
    fewer (at least one) when ``up_to`` allows it. As in TF's queues, the oldest get takes
    items as they come (so ``n`` may exceed the capacity, and a size seen meanwhile leaves
    out what it holds); a get that can never be served puts what it took back in front and
    fails with ``OutOfRangeError``, and one withdrawn by ``cancel(event, error)`` (a
    timeout) loses what it took, as TF's do. After ``close()`` a put fails with
    ``CancelledError``; ``close(cancel_pending_puts=True)`` also fails the waiting puts.
    Subclasses choose which
    items leave by overriding ``_take`` (e.g. a priority or a random order), how many may
    leave now by overriding ``_available`` (e.g. keeping a minimum behind), and the errors
    by overriding ``_closed_error`` / ``_insufficient_error`` / ``_cancelled_error``. A
    request left waiting in a simulation that has ended is dropped at the next request.
    """

    def __init__(self, capacity: float = float("inf"), name: str = "store"):
        self.capacity, self.name = capacity, name
        self.items: deque = deque()
        self.closed = False
        self._puts: deque[_Put] = deque()
        self._gets: deque[_Get] = deque()

    def __len__(self) -> int:
        return len(self.items)

    def put(self, env: Environment, items) -> Event:
        self._forget_other_simulations(env)
        event = env.event(desc=f"put into {self.name}")
        if self.closed:
            return event.fail(self._closed_error())
        self._puts.append(_Put(event, deque(items)))
        self._dispatch()
        return event

    def get(self, env: Environment, n: int = 1, up_to: bool = False) -> Event:
        self._forget_other_simulations(env)
        event = env.event(desc=f"get {n} from {self.name}")
        self._gets.append(_Get(event, n, up_to, []))
        self._dispatch()
        return event

    def close(self, cancel_pending_puts: bool = False):
        self.closed = True
        if cancel_pending_puts:
            for put in self._puts:
                put.event.fail(self._cancelled_error())
            self._puts.clear()
        self._dispatch()

    def _forget_other_simulations(self, env):
        for queue in (self._puts, self._gets):
            if queue and queue[0].event.env is not env:
                kept = [request for request in queue if request.event.env is env]
                queue.clear()
                queue.extend(kept)

    def _closed_error(self) -> BaseException:
        return CancelledError(f"{self.name} is closed")

    def _cancelled_error(self) -> BaseException:
        return CancelledError(f"{self.name} is closed: pending put cancelled")

    def _insufficient_error(self, n: int) -> BaseException:
        return OutOfRangeError(f"{self.name} is closed and has insufficient elements "
                               f"(requested {n}, current size {len(self.items)})")

    def _available(self) -> int:
        """How many items a get may take now."""
        return len(self.items)

    def cancel(self, event: Event, error: BaseException):
        """Withdraw a waiting put or get and fail it with ``error``."""
        for queue in (self._puts, self._gets):
            for request in queue:
                if request.event is event:
                    queue.remove(request)
                    event.fail(error)
                    self._dispatch()
                    return

    def fail_waiters(self, error: BaseException):
        """Fail every waiting put and get with ``error`` (the task holding the store died)."""
        waiting = [request.event for request in list(self._puts) + list(self._gets)]
        self._puts.clear()
        self._gets.clear()
        for event in waiting:
            event.fail(error)

    def _take(self, n: int) -> list:
        """Remove and return ``n`` items (FIFO here)."""
        return [self.items.popleft() for _ in range(n)]

    def _dispatch(self):
        """Serve the oldest requests while they can be served."""
        progress = True
        while progress:
            progress = False
            while self._puts and len(self.items) < self.capacity:
                put = self._puts[0]
                while put.items and len(self.items) < self.capacity:
                    self.items.append(put.items.popleft())
                    progress = True
                if put.items:
                    break
                self._puts.popleft()
                put.event.succeed()
            if self._gets:
                event, n, up_to, taken = self._gets[0]
                remaining, available = n - len(taken), self._available()
                puts_pending = any(put.items for put in self._puts)
                if remaining > available and self.closed and not (up_to and puts_pending):
                    # TF's order: the error names what is still asked for and the size
                    # before the taken items go back; up_to then takes all there is
                    self._gets.popleft()
                    error = self._insufficient_error(remaining)
                    self.items.extendleft(reversed(taken))
                    if up_to and self.items:
                        event.succeed(self._take(len(self.items)))
                    else:
                        event.fail(error)
                    progress = True
                else:
                    if min(available, remaining) > 0:
                        taken.extend(self._take(min(available, remaining)))
                        progress = True
                    if len(taken) == n:
                        self._gets.popleft()
                        event.succeed(taken)
                        progress = True


class Ports:
    """The FIFO ends of links, both directions, keyed by endpoint (any hashable)."""

    def __init__(self):
        self._tx: dict = {}
        self._rx: dict = {}

    def send(self, endpoint, link, ready: int, nbytes: int) -> tuple[int, int, int]:
        """Serialize ``nbytes`` on ``endpoint``'s way out from ``ready`` on, after what it
        sends already. Returns (start, the port's time on it, when the first bit arrives):
        ``LinkProfile.serialization_ns`` and ``flight_ns``, inlined (a hot path)."""
        start = self._tx.get(endpoint, 0)
        if start < ready:
            start = ready
        ser = link.message_ns - (-nbytes * 1_000_000_000 // link.bandwidth)  # ceil, exact
        self._tx[endpoint] = start + ser
        return start, ser, start + link.latency_ns - link.message_ns

    def receive(self, endpoint, head: int, ser: int) -> tuple[int, int]:
        """Take a transfer in on ``endpoint`` whose first bit arrives at ``head``, after what
        it receives already. Returns (start, arrival of the last bit)."""
        start = self._rx.get(endpoint, 0)
        if start < head:
            start = head
        arrival = self._rx[endpoint] = start + ser
        return start, arrival
