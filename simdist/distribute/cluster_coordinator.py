"""``tf.distribute.experimental.coordinator.ClusterCoordinator``: the coordinator's queue of
functions, run by whichever worker is free, and ``RemoteValue``, the future of one.

    coordinator = ClusterCoordinator(strategy)
    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    rv = coordinator.schedule(step_fn, args=(iterator,))    # at once: a RemoteValue
    yield from coordinator.join()                             # every function has ended
    loss = yield from rv.fetch()

A scheduled function is a generator function (it yields simulated events: ``yield from
strategy.run(...)``, ``strategy.update``...) or a plain one. As in TF the coordinator keeps
one thread per worker: each takes the next function off the queue, spends the coordinator's
own overhead on it (``schedule_overhead_ns``, one at a time on the chief's "coordinator" lane:
TF's Python and RPC overhead per function, why packing several steps into one function
pays), sends it to its worker and waits for the result. The "run" message names the function
(registered on every rank: ``InProcessCluster.register``; in one process, as it is scheduled)
and carries its small arguments; a per-worker iterator among them is resolved by the worker
to its own (``simdist/distribute/worker.py``); the "done" reply carries the value's arrays
or the error's class and message.
The overhead is by default the coordinator's device profile's ``HostCosts.schedule_overhead_ns``
(100 us in the built-in profiles; ``simdist calibrate`` fits it).

``ClusterCoordinator(strategy, remote_value_fetch=True)`` copies the values as TF 2.21's
``Worker._process_closure`` does: they stay on the worker, and the coordinator's thread
fetches them in one more round trip (a "fetch" span on its "remote values" lane) before it
takes the next function; a function that returns None needs none (TF's tutorial: schedule
functions without return values). By default (the built-in runs) the "done" reply carries them.

Failures, as TF documents them: a worker that fails mid-function has the function put back
at the front of the queue (another worker, or the same one back up, runs it again: the trace
shows it twice) and its datasets are rebuilt when it returns; any other error (a function's
own, or ``UnavailableError`` from a failed ps) cancels every queued and running function
(``CancelledError`` from their ``fetch``; a "cancel" message stops a running one) and is
raised once, by the next ``schedule``, ``join`` or ``done``. The coordinator sees workers fail
and come back through its rank's mirror of their state (``InProcessCluster``).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from simdist.base.errors import CancelledError, InvalidArgumentError, brief
from simdist.sim.payloads import Phantom
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
from simdist.distribute.rpc import IteratorRef, decode, encode
from simdist.hardware.host_costs import SCHEDULE_OVERHEAD_NS
from simdist.sim.wire import RPC_BYTES, rebuild_error

LANE = "coordinator"
FETCH_LANE = "remote values"
_LOST = object()  # a fetch whose worker failed


class RemoteValue:
    """The future result of a scheduled function."""

    def __init__(self, env, name: str):
        self._event = env.event(desc=f"result of {name}")
        self._name = name
        self._value = self._error = None

    def _set(self, value=None, error=None) -> None:
        if self._event.triggered:
            return
        self._value, self._error = value, error
        self._event.succeed()

    def _ready(self):
        if not self._event.triggered:
            yield self._event
        if self._error is not None:
            raise self._error
        return self._value

    def fetch(self):
        """The function's result as numpy values (``yield from``); its error, or
        ``CancelledError`` if it was cancelled."""
        value = yield from self._ready()
        return _to_numpy(value)

    def get(self):
        """The function's result as it returned it (``yield from``)."""
        return (yield from self._ready())

    def __repr__(self):
        state = "pending" if not self._event.triggered else (
            "error" if self._error is not None else "done")
        return f"<RemoteValue of {self._name}: {state}>"


class PerWorkerValues:
    """One value per worker (``tf.distribute.experimental.coordinator.PerWorkerValues``):
    a function scheduled with it gets the value of the worker that runs it (in its "run"
    message: plain data)."""

    def __init__(self, values):
        self._values = list(values)

    def _for(self, worker: int):
        return self._values[worker]


class PerWorkerIterator(PerWorkerValues):
    """``iter(per_worker_dataset)``: one iterator per worker, to give a scheduled function
    (each worker takes its elements from its own, which it builds itself)."""

    def __init__(self, dataset: str, number: int):
        self._ref = IteratorRef(dataset, number)

    def _for(self, worker: int):
        return self._ref

    def __iter__(self):
        return self

    def __next__(self):
        raise InvalidArgumentError("next() of a per-worker iterator runs on a worker: pass the "
                                   "iterator to coordinator.schedule(fn, args=(iterator,))")


class PerWorkerDataset:
    """What ``create_per_worker_dataset`` returns: ``iter()`` gives a per-worker iterator.
    The dataset function travels by its registered name; each worker calls it."""

    def __init__(self, coordinator: ClusterCoordinator, name: str):
        self._coordinator, self._name = coordinator, name

    def __iter__(self) -> PerWorkerIterator:
        self._coordinator._iterators += 1
        return PerWorkerIterator(self._name, self._coordinator._iterators)


class _Closure:
    """One scheduled function: its registered name, arguments, RemoteValue, runs."""

    def __init__(self, number, fn, function: str, args, kwargs, value: RemoteValue, env,
                 keep: bool = False):
        self.number, self.function, self.args, self.kwargs = number, function, args, kwargs
        self.keep = keep  # the worker keeps the value until the coordinator fetches it
        self.value = value
        self.name = f"{getattr(fn, '__name__', 'function')}#{number}"
        self.runs = 0
        self.abort = env.event(desc=f"cancel {self.name}")

    def call(self, worker: int) -> list:
        """The "run" message's payload for ``worker``: the name and the arguments."""
        return encode({"f": self.function, **({"keep": 1} if self.keep else {})},
                      {"a": _for_worker(self.args, worker),
                                             "k": _for_worker(self.kwargs, worker)},
                      f"an argument of {self.name}")


class ClusterCoordinator:
    """``ClusterCoordinator(strategy)`` on the coordinator task (the strategy's ``ctx``)."""

    def __init__(self, strategy: ParameterServerStrategy,
                 schedule_overhead_ns: int | None = None,
                 remote_value_fetch: bool = False):
        if not isinstance(strategy, ParameterServerStrategy):
            raise InvalidArgumentError(f"ClusterCoordinator needs a ParameterServerStrategy, "
                                       f"got {brief(strategy)}")
        if schedule_overhead_ns is None:  # the coordinator's profile (HostCosts)
            schedule_overhead_ns = strategy.ctx.hardware.device.host_costs.schedule_overhead_ns
        if isinstance(schedule_overhead_ns, bool) or not isinstance(schedule_overhead_ns, int) \
                or schedule_overhead_ns < 0:
            raise InvalidArgumentError(f"schedule_overhead_ns must be an int >= 0, got "
                                       f"{brief(schedule_overhead_ns)}")
        if strategy._coordinator is not None:
            raise InvalidArgumentError("this ParameterServerStrategy has a ClusterCoordinator "
                                       "already: TF allows one per strategy")
        strategy._coordinator = self
        self.strategy, self.ctx = strategy, strategy.ctx
        self.overhead = schedule_overhead_ns
        self.remote_value_fetch = bool(remote_value_fetch)
        self._cluster = strategy._cluster
        self._workers = strategy._num_workers
        self._iterators = 0  # per-worker iterators made so far (their numbers)
        self._queue: deque[_Closure] = deque()
        self._inflight: set[_Closure] = set()
        self._error = None
        self._scheduled = 0
        self._wake = self.ctx.env.event(desc="a function queued")
        self._changed = self.ctx.env.event(desc="a function ended")
        for w in range(self._workers):
            self.ctx.process(self._dispatch(w), name=f"coordinator thread {w}", daemon=True)

    # -- the coordinator's API ------------------------------------------------------------------

    def schedule(self, fn, args=None, kwargs=None) -> RemoteValue:
        """Queue ``fn(*args, **kwargs)`` for the next free worker; its ``RemoteValue`` at
        once. Raises the error of an earlier function (once) instead."""
        self._raise_if_error()
        if not callable(fn):
            raise InvalidArgumentError(f"schedule: fn must be a function, got {brief(fn)}")
        function = self._cluster.name_of(fn, "scheduled function")
        self._scheduled += 1
        name = f"{getattr(fn, '__name__', 'function')}#{self._scheduled}"
        closure = _Closure(self._scheduled, fn, function, tuple(args or ()), dict(kwargs or {}),
                           RemoteValue(self.ctx.env, name), self.ctx.env,
                           keep=self.remote_value_fetch)
        closure.call(0)  # arguments that cannot travel: refused now, on the coordinator
        self._queue.append(closure)
        self._notify("_wake")
        return closure.value

    def join(self):
        """Wait until every scheduled function has ended (``yield from``); raises the first
        error since the last one raised."""
        while True:
            self._raise_if_error()
            if not self._queue and not self._inflight:
                return
            yield self._changed

    def done(self) -> bool:
        """Whether every scheduled function has ended (raises a pending error)."""
        self._raise_if_error()
        return not self._queue and not self._inflight

    def fetch(self, val):
        """``coordinator.fetch(val)``: ``val``'s RemoteValues fetched (``yield from``)."""
        if isinstance(val, RemoteValue):
            return (yield from val.fetch())
        if isinstance(val, (list, tuple)):
            out = []
            for v in val:
                out.append((yield from self.fetch(v)))
            return type(val)(out)
        if isinstance(val, dict):
            out = {}
            for k, v in val.items():
                out[k] = yield from self.fetch(v)
            return out
        return val

    def create_per_worker_dataset(self, dataset_fn) -> PerWorkerDataset:
        """``dataset_fn()`` (or ``dataset_fn(input_context)``) once per worker, on the worker
        (by its registered name); rebuilt for a worker that comes back after a failure."""
        if not callable(dataset_fn):
            raise InvalidArgumentError(f"create_per_worker_dataset: dataset_fn must be a "
                                       f"function, got {brief(dataset_fn)}")
        return PerWorkerDataset(self, self._cluster.name_of(dataset_fn, "dataset function"))

    # -- inside ---------------------------------------------------------------------------------

    def _raise_if_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _notify(self, which: str) -> None:
        event = getattr(self, which)
        setattr(self, which, self.ctx.env.event(desc=event.desc))
        event.succeed()

    def _dispatch(self, w: int):
        """The coordinator's thread for worker ``w``: take a function, send it, wait. It
        sees the worker fail and come back through this rank's mirror of its state."""
        ctx, cluster = self.ctx, self._cluster
        worker = f"worker:{w}"
        state = cluster.state(worker)
        while True:
            if not state.up:
                yield state.restarted
                continue
            if not self._queue:
                yield self._wake
                continue
            closure = self._queue.popleft()
            start = ctx.occupy(LANE, self.overhead)
            ctx.span(LANE, f"schedule {closure.name}", "coordinator", start, self.overhead,
                     worker=worker)
            self._inflight.add(closure)
            yield ctx.timeout(start + self.overhead - ctx.now)
            if closure.abort.triggered or not state.up:
                self._inflight.discard(closure)
                if not closure.abort.triggered:
                    self._queue.appendleft(closure)
                self._notify("_changed")
                continue
            closure.runs += 1
            attempt = closure.runs
            ctx.send(worker, ("run", closure.number, attempt), closure.call(w))
            done = ctx.recv(worker, ("done", closure.number, attempt))
            failed = state.failed
            yield ctx.env.any_of([done, failed, closure.abort])
            lost = failed.triggered and not done.triggered
            if done.triggered:
                header, value = decode(done.value.payload)
                if "kept" in header:  # the value stayed on the worker: copy it here first
                    value = yield from self._fetch(closure, worker, attempt, failed)
                    lost = value is _LOST
                self._inflight.discard(closure)
                if "e" in header:
                    self._fail(closure, rebuild_error(header["e"]))
                elif not lost:
                    closure.value._set(value)
            self._inflight.discard(closure)
            if lost:
                if not closure.abort.triggered:
                    self._queue.appendleft(closure)  # TF puts it back, to run again
                    ctx.instant(LANE, f"{closure.name} back in the queue ({worker} failed)",
                                "fault", function=closure.name, worker=worker)
                    self._notify("_wake")
            elif not done.triggered:  # cancelled: stop it on the worker (TF cancels the RPC)
                ctx.send(worker, ("cancel", closure.number, attempt), Phantom(RPC_BYTES))
            self._notify("_changed")

    def _fetch(self, closure: _Closure, worker: str, attempt: int, failed):
        """TF's ``remote_value_fetch``: the coordinator's thread copies a function's returned
        values from its worker, one more round trip, before it takes the next function
        (``yield from``); ``_LOST`` when the worker fails meanwhile."""
        ctx, start = self.ctx, self.ctx.now
        ctx.send(worker, ("fetch", closure.number, attempt), Phantom(RPC_BYTES))
        got = ctx.recv(worker, ("value", closure.number, attempt))
        yield ctx.env.any_of([got, failed])
        if not got.triggered:
            return _LOST
        ctx.span(FETCH_LANE, f"fetch {closure.name}", "fetch", start, ctx.now - start,
                 worker=worker, bytes=got.value.nbytes)
        return decode(got.value.payload)[1]

    def _fail(self, closure: _Closure, error) -> None:
        """A function failed: its value holds the error; the others are cancelled and the
        error waits to be raised once."""
        closure.value._set(error=error)
        if self._error is not None:
            return
        self._error = error
        cancelled = list(self._queue) + sorted(self._inflight, key=lambda c: c.number)
        self._queue.clear()
        for other in cancelled:
            other.value._set(error=CancelledError(
                f"{other.name} was cancelled because {closure.name} failed with "
                f"{type(error).__name__}: {error}"))
            other.abort.succeed()
        self.ctx.instant(LANE, f"{closure.name} failed: {type(error).__name__}", "fault",
                         cancelled=len(cancelled))


def _for_worker(value, w: int):
    if isinstance(value, PerWorkerValues):
        return value._for(w)
    if isinstance(value, dict):
        return {k: _for_worker(v, w) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_for_worker(v, w) for v in value)
    return value


def _to_numpy(value):
    if isinstance(value, dict):
        return {k: _to_numpy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_numpy(v) for v in value)
    if value is None:
        return None
    return np.asarray(value)


__all__ = ["ClusterCoordinator", "PerWorkerDataset", "PerWorkerValues", "RemoteValue",
           "SCHEDULE_OVERHEAD_NS"]
