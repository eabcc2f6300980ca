"""The event kernel: an Environment that runs processes (Python generators) in simulated time.

It plays the part TensorFlow's runtime executor plays for a real job: it decides what runs next.
Simulated time is an ``int`` of nanoseconds. Events at the same time run in a fixed order,
(time, priority, task order, sequence), so a run never depends on the wall clock, on hash
order or on how tasks are spread over MPI ranks. The design follows SimPy's core, kept small.
Code outside the kernel triggers events with ``succeed``, ``succeed_at`` (a delivery at a
later time), ``fail`` or ``fire``, and schedules an event created already triggered with
``Environment.schedule`` or ``schedule_at``; it writes an event's fields only in an
``Event.__init__`` inlined for speed (marked with a NOTE, as SimPy marks its own).
"""

from __future__ import annotations

from heapq import heappop, heappush
from types import MethodType

URGENT = 0  #: process starts, resumptions and triggered events
DELIVERY = 1  #: message deliveries (ordered by source task and message sequence)
NORMAL = 2  #: timeouts

INFINITY = float("inf")

# -- ordering keys ------------------------------------------------------------------------------
# The queue holds (time, priority key, tie-break, event) entries and runs them in that order:
#   priority key = priority << 32 | task order (``priority_key``): bits 32 and up hold the
#       priority (URGENT, DELIVERY, NORMAL), bits 0-31 the order of the task the event is of;
#   tie-break = the event's scheduling number (same-key events run in the order they were
#       scheduled), or, for a DELIVERY event, source << 40 | sequence (``schedule_at``): bits
#       40 and up hold the source task's order (the number of tasks for what must come after
#       every message at that time), bits 0-39 a sequence number of that source.
_ORDER_BITS = 32
_ORDER_MASK = (1 << _ORDER_BITS) - 1
_SEQ_BITS = 40


def priority_key(priority: int, order: int) -> int:
    """The priority key of an event of task ``order`` (see the layout above)."""
    return (priority << _ORDER_BITS) | order


# a timeout's and a delivery's priority keys but the task order (``| order`` adds it: hot paths)
_NORMAL_KEY, _DELIVERY_KEY = priority_key(NORMAL, 0), priority_key(DELIVERY, 0)


class _Pending:
    def __repr__(self):
        return "<pending>"


PENDING = _Pending()


class SimulationDeadlock(RuntimeError):
    """Nothing is left to run, but processes still wait: each is listed with what it waits on."""

    def __init__(self, now: int, blocked: list[tuple[str, str]]):
        self.now = now
        self.blocked = blocked
        lines = [f"  {who} waits on {what}" for who, what in blocked]
        super().__init__(
            f"simulated deadlock at t={now} ns: no event is left to run but "
            f"{len(blocked)} process(es) still wait:\n" + "\n".join(lines))


class Interrupt(Exception):
    """Thrown into a process by ``Process.interrupt(cause)``."""

    @property
    def cause(self):
        return self.args[0] if self.args else None


class Event:
    """Something that happens at one point of simulated time; processes ``yield`` events."""

    __slots__ = ("env", "callbacks", "_value", "_ok", "_defused", "_order", "desc")

    def __init__(self, env: Environment, desc: str | None = None, order: int | None = None):
        self.env = env
        self.callbacks: list | None = []
        self._value = PENDING
        self._ok = True
        self._defused = False
        self._order = env._active_order if order is None else order
        self.desc = desc

    def __repr__(self):
        return self.desc or f"{type(self).__name__}()"

    triggered = property(lambda self: self._value is not PENDING, doc="It has a value.")
    processed = property(lambda self: self.callbacks is None, doc="Its callbacks have run.")
    ok = property(lambda self: self._ok, doc="It succeeded (False: it failed).")

    @property
    def value(self):
        if self._value is PENDING:
            raise AttributeError(f"value of {self!r} is not yet available")
        return self._value

    def succeed(self, value=None) -> Event:
        """Trigger this event with ``value``: it happens now (URGENT)."""
        if self._value is not PENDING:
            raise RuntimeError(f"{self!r} has already been triggered")
        self._value = value
        env = self.env
        # NOTE: inlined from Environment.schedule(self, URGENT) for performance (an URGENT
        # event's priority key is its task order)
        env._eid = eid = env._eid + 1
        heappush(env._queue, (env.now, self._order, eid, self))
        return self

    def succeed_at(self, time: int, source: int, seq: int, value=None) -> Event:
        """Trigger this event with ``value`` to happen at ``time`` as a delivery numbered
        ``seq`` by ``source`` (``Environment.schedule_at``)."""
        if self._value is not PENDING:
            raise RuntimeError(f"{self!r} has already been triggered")
        self.env.schedule_at(self, time, source, seq)  # first: it refuses a time in the past
        self._value = value
        return self

    def fire(self, value=None) -> Event:
        """Trigger this event and run its callbacks at once, without a trip through the queue.

        For a caller that knows the event would run next anyway (a message delivery
        completing the receive that waits for it: no URGENT event at this time is left once
        deliveries run), so the order of the run is the same as with ``succeed``.
        """
        if self._value is not PENDING:
            raise RuntimeError(f"{self!r} has already been triggered")
        self._value = value
        callbacks, self.callbacks = self.callbacks, None
        for callback in callbacks:
            callback(self)
        return self

    def fail(self, exception: BaseException) -> Event:
        if self._value is not PENDING:
            raise RuntimeError(f"{self!r} has already been triggered")
        if not isinstance(exception, BaseException):
            raise TypeError(f"fail() needs an exception, got {exception!r}")
        self._ok = False
        self._value = exception
        self.env.schedule(self, URGENT)
        return self

    def defuse(self):
        """Mark a failed event as handled so that it does not stop the simulation."""
        self._defused = True


class Timeout(Event):
    """An event that happens ``delay`` ns after it was created (``env.timeout``)."""

    __slots__ = ("delay",)

    def __init__(self, env: Environment, delay: int, value=None):
        if not isinstance(delay, int) or delay < 0:
            raise ValueError(f"timeout delay must be an int >= 0 of nanoseconds, got {delay!r}")
        # NOTE: inlined from Event.__init__() for performance (a timeout is the commonest event)
        self.env = env
        self.callbacks = []
        self._value = value
        self._ok = True
        self._defused = False
        self._order = order = env._active_order
        self.desc = None
        self.delay = delay
        # NOTE: inlined from Environment.schedule(self, NORMAL, delay) for performance
        env._eid = eid = env._eid + 1
        heappush(env._queue, (env.now + delay, _NORMAL_KEY | order, eid, self))

    def __repr__(self):
        return self.desc or f"timeout({self.delay} ns)"

    def cancel(self):
        """Withdraw a timeout nobody waits for any more (the deadline of a wait that ended):
        it never happens, and simulated time does not run on to it."""
        if self.callbacks is not None:
            self.callbacks = None


class Process(Event):
    """A running generator. It is itself an event that happens when the generator returns.

    A ``daemon`` process (a background worker, e.g. a prefetching thread) may be left
    waiting when a run ends: that is not a deadlock.
    """

    __slots__ = ("_generator", "_target", "name", "daemon", "_wake")

    def __init__(self, env: Environment, generator, name: str | None = None,
                 order: int | None = None, daemon: bool = False):
        if not hasattr(generator, "throw"):
            raise TypeError(f"env.process() needs a generator, got {generator!r}: "
                            "did you forget a 'yield' in the function?")
        super().__init__(env, order=order)
        self._generator = generator
        self.name = name or getattr(generator, "__name__", "process")
        self.daemon = daemon
        self._wake = self._resume  # the callback a waited-on event runs (bound once)
        start = Event(env, "start", self._order)
        start.callbacks.append(self._wake)
        start.succeed()
        self._target: Event | None = start
        env._live[self] = None

    def __repr__(self):
        return f"process {self.name}"

    @property
    def is_alive(self) -> bool:
        return self._value is PENDING

    @property
    def target(self) -> Event | None:
        """The event this process waits on."""
        return self._target

    def interrupt(self, cause=None):
        """Throw ``Interrupt(cause)`` into the process at the current time."""
        if self._value is not PENDING:
            raise RuntimeError(f"{self!r} has terminated and cannot be interrupted")
        if self is self.env.active_process:
            raise RuntimeError("a process cannot interrupt itself")
        irq = Event(self.env, "interrupt", self._order)
        irq.callbacks.append(self._interrupted)
        irq.fail(Interrupt(cause))
        irq.defuse()

    def _interrupted(self, irq: Event):
        if self._value is not PENDING:
            return
        target = self._target
        if target is not None and target.callbacks is not None:
            target.callbacks.remove(self._wake)
        self._resume(irq)

    def _resume(self, event: Event):
        env = self.env
        env.active_process = self
        generator = self._generator
        while True:
            try:
                if event._ok:
                    nxt = generator.send(event._value)
                else:
                    event._defused = True
                    nxt = generator.throw(event._value)
            except StopIteration as stop:
                self._target = None
                del env._live[self]
                self._value = stop.value
                env.schedule(self, URGENT)
                break
            except BaseException as error:
                self._target = None
                del env._live[self]
                self._ok = False
                self._value = error
                env.schedule(self, URGENT)
                break
            try:
                callbacks = nxt.callbacks
            except AttributeError:
                event = Event(env)
                event._ok = False
                event._value = TypeError(
                    f"process {self.name} yielded {nxt!r}; a process must yield events "
                    "(env.timeout(ns), ctx.recv(...), env.all_of([...]), ...)")
                continue
            if callbacks is not None:
                callbacks.append(self._wake)
                self._target = nxt
                break
            event = nxt
        env.active_process = None


class Never(Event):
    """An event that never happens (``env.never()``). A process waiting on it is a daemon:
    a run that ends with it still waiting is not a deadlock (TF's ``server.join()``)."""

    __slots__ = ()


class Condition(Event):
    """``all_of`` / ``any_of``: happens when all (or any) of ``events`` have happened.

    Its value is a dict mapping each event that has happened to its value, in the order given.
    """

    __slots__ = ("_events", "_need", "_done")

    def __init__(self, env: Environment, events, need_all: bool):
        super().__init__(env)
        self._events = list(events)
        for ev in self._events:
            if not isinstance(ev, Event):
                raise TypeError(f"all_of/any_of take events, got {ev!r}")
        self._need = len(self._events) if need_all else min(1, len(self._events))
        self._done = 0
        kind = "all_of" if need_all else "any_of"
        self.desc = f"{kind}({', '.join(map(repr, self._events))})"
        if self._need == 0:
            self.succeed({})
            return
        for ev in self._events:
            if ev.callbacks is None:
                self._check(ev)
            else:
                ev.callbacks.append(self._check)

    def _check(self, event: Event):
        if self._value is not PENDING:
            return
        if not event._ok:
            event._defused = True
            self.fail(event._value)
            return
        self._done += 1
        if self._done >= self._need:
            self.succeed({ev: ev._value for ev in self._events
                          if ev.callbacks is None or ev is event})


class Environment:
    """Simulated time and the queue of scheduled events (SimPy's Environment, in int ns)."""

    def __init__(self):
        #: the current simulated time, ns (read it; only the kernel sets it: a plain attribute,
        #: not a property, because every event and message reads it)
        self.now = 0
        self._queue: list = []
        self._eid = 0  # events scheduled so far: the tie-break after (time, priority, order)
        self._explicit = 0
        self._active_order = 0
        self._live: dict[Process, None] = {}
        self.active_process: Process | None = None
        # bound as SimPy binds them: env.timeout(d) is Timeout(env, d), no Python frame between
        self.timeout, self.event = MethodType(Timeout, self), MethodType(Event, self)

    # -- creating events --------------------------------------------------------------------

    def event(self, desc: str | None = None, order: int | None = None) -> Event:
        """A new pending event; ``order`` (a task order) sets its place among events at the
        same time and priority (default: the order of the process running now)."""
        return Event(self, desc, order)

    def succeeded(self, value=None, desc: str | None = None) -> Event:
        """An event that has already happened: a process yielding it resumes at once."""
        event = Event(self, desc)
        event._value = value
        event.callbacks = None
        return event

    def never(self, desc: str | None = None) -> Never:
        return Never(self, desc)

    def timeout(self, delay: int, value=None) -> Timeout:
        return Timeout(self, delay, value)

    def process(self, generator, name: str | None = None, order: int | None = None,
                daemon: bool = False) -> Process:
        return Process(self, generator, name, order, daemon)

    def all_of(self, events) -> Condition:
        return Condition(self, events, need_all=True)

    def any_of(self, events) -> Condition:
        return Condition(self, events, need_all=False)

    # -- scheduling -------------------------------------------------------------------------

    def schedule(self, event: Event, priority: int = NORMAL, delay: int = 0):
        """Schedule a triggered ``event`` to happen ``delay`` ns from now with ``priority``
        (SimPy's ``Environment.schedule``), after the events of its priority key already
        scheduled for that time."""
        self._eid = eid = self._eid + 1
        key = priority_key(priority, event._order)
        heappush(self._queue, (self.now + delay, key, eid, event))

    def schedule_at(self, event: Event, time: int, source: int, seq: int):
        """Schedule a triggered ``event`` at absolute ``time`` as a DELIVERY, placed among its
        task's deliveries at that time by ``source`` (a task order; the number of tasks to
        come after every message) and ``seq`` (that source's number for it), never by when a
        transport learned of it (``Event.succeed_at`` triggers and schedules at once)."""
        if time < self.now:
            raise RuntimeError(f"cannot schedule {event!r} at {time} ns, before now ({self.now})")
        self._explicit += 1
        # NOTE: inlined from priority_key(DELIVERY, event._order) for performance
        heappush(self._queue, (time, _DELIVERY_KEY | event._order, (source << _SEQ_BITS) | seq,
                               event))

    def peek(self):
        """Time of the next scheduled event, or ``INFINITY``."""
        queue = self._queue
        while queue and queue[0][3].callbacks is None:  # cancelled timeouts
            heappop(queue)
        return queue[0][0] if queue else INFINITY

    @property
    def events_scheduled(self) -> int:
        """How many events have been scheduled so far (a cost measure for benchmarks)."""
        return self._eid + self._explicit

    def run_until(self, limit) -> None:
        """Process every event whose time is strictly before ``limit`` (a window's end)."""
        queue = self._queue
        while queue:
            entry = heappop(queue)  # (one past the limit goes back: a look first costs more)
            now, key, _, event = entry
            if now >= limit:
                heappush(queue, entry)
                return
            callbacks = event.callbacks
            if callbacks is None:  # a cancelled timeout: time does not move to it
                continue
            self.now = now
            self._active_order = key & _ORDER_MASK  # the priority key's task order
            event.callbacks = None
            for callback in callbacks:
                callback(event)
            if not event._ok and not event._defused:
                raise event._value

    def run(self, until: int | None = None):
        """Run to ``until`` (exclusive) or until nothing is left; then report any deadlock."""
        if until is not None:
            self.run_until(until)
            self.now = max(self.now, until)
            return
        self.run_until(INFINITY)
        blocked = self.blocked()
        if blocked:
            raise SimulationDeadlock(self.now, blocked)

    @property
    def live_processes(self) -> int:
        """How many processes have started and not yet ended (daemons included)."""
        return len(self._live)

    def blocked(self) -> list[tuple[str, str]]:
        """Every live process but the daemons (and those waiting on ``never()``) and what
        it waits on, in creation order."""
        return [(proc.name, repr(proc._target)) for proc in self._live
                if not proc.daemon and proc._target.__class__ is not Never]
