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
pays), sends it to its worker and waits for the result. Per-worker iterators in the arguments
are replaced by that worker's own iterator.

Failures, as TF documents them: a worker that fails mid-function has the function put back
at the front of the queue (another worker, or the same one back up, runs it again: the trace
shows it twice) and its datasets are rebuilt when it returns; any other error (a function's
own, or ``UnavailableError`` from a failed ps) cancels every queued and running function
(``CancelledError`` from their ``fetch``) and is raised once, by the next ``schedule``,
``join`` or ``done``.
"""

from __future__ import annotations

import inspect
from collections import deque

import numpy as np

from simdist.sim.core import Interrupt
from simdist.base.errors import CancelledError, InvalidArgumentError, OutOfRangeError, brief
from simdist.sim.payloads import Phantom
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
from simdist.distribute.server import RPC_BYTES
from simdist.distribute.strategy import InputContext

#: the coordinator's own time per function (Python, serialization, the RPC's start): about
#: what TF's coordinator spends per small closure on a CPU host
SCHEDULE_OVERHEAD_NS = 100_000
LANE = "coordinator"


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
    a function scheduled with it gets the value of the worker that runs it."""

    def __init__(self, values):
        self._values = list(values)


class PerWorkerIterator(PerWorkerValues):
    """``iter(per_worker_dataset)``: one iterator per worker, to give a scheduled function
    (each worker takes its elements from its own)."""

    def __iter__(self):
        return self

    def __next__(self):
        raise InvalidArgumentError("next() of a per-worker iterator runs on a worker: pass the "
                                   "iterator to coordinator.schedule(fn, args=(iterator,))")


class PerWorkerDataset:
    """What ``create_per_worker_dataset`` returns: ``iter()`` gives a per-worker iterator."""

    def __init__(self, coordinator: ClusterCoordinator, dataset_fn):
        self._coordinator, self._fn = coordinator, dataset_fn
        self._iterators: list[PerWorkerIterator] = []

    def __iter__(self) -> PerWorkerIterator:
        per_worker = PerWorkerIterator(self._make(w) for w in range(self._coordinator._workers))
        self._iterators.append(per_worker)
        return per_worker

    def _make(self, worker: int):
        strategy = self._coordinator.strategy
        context = InputContext(strategy._num_workers, worker, 1)
        dataset = self._fn(context) if _takes_argument(self._fn) else self._fn()
        return _WorkerIterator(iter(dataset), worker)

    def _rebuild(self, worker: int) -> None:
        for per_worker in self._iterators:
            per_worker._values[worker] = self._make(worker)


class _WorkerIterator:
    """One worker's iterator; ``next()`` past its end is TF's ``OutOfRangeError``."""

    def __init__(self, iterator, worker: int):
        self._iterator, self.worker = iterator, worker
        self.elements = 0  # taken so far (a rebuilt dataset starts again from 0)

    def __iter__(self):
        return self

    def __next__(self):
        try:
            element = next(self._iterator)
        except StopIteration:
            raise OutOfRangeError(f"End of sequence: worker {self.worker}'s dataset has no "
                                  f"element after its {self.elements}") from None
        self.elements += 1
        return element


class _Closure:
    """One scheduled function: what to run, its RemoteValue and how often it ran."""

    def __init__(self, number, fn, args, kwargs, value: RemoteValue, env):
        self.number, self.fn, self.args, self.kwargs, self.value = number, fn, args, kwargs, value
        self.name = f"{getattr(fn, '__name__', 'function')}#{number}"
        self.runs = 0
        self.outcome = None  # (value, error) of the run that ended last
        self.abort = env.event(desc=f"cancel {self.name}")


class ClusterCoordinator:
    """``ClusterCoordinator(strategy)`` on the coordinator task (the strategy's ``ctx``)."""

    def __init__(self, strategy: ParameterServerStrategy,
                 schedule_overhead_ns: int = SCHEDULE_OVERHEAD_NS):
        if not isinstance(strategy, ParameterServerStrategy):
            raise InvalidArgumentError(f"ClusterCoordinator needs a ParameterServerStrategy, "
                                       f"got {brief(strategy)}")
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
        self._cluster = strategy._cluster
        self._workers = strategy._num_workers
        self._queue: deque[_Closure] = deque()
        self._inflight: set[_Closure] = set()
        self._error = None
        self._scheduled = 0
        self._wake = self.ctx.env.event(desc="a function queued")
        self._changed = self.ctx.env.event(desc="a function ended")
        self._datasets: list[PerWorkerDataset] = []
        for w in range(self._workers):
            self.ctx.process(self._dispatch(w), name=f"coordinator thread {w}", daemon=True)

    # -- the coordinator's API ------------------------------------------------------------------

    def schedule(self, fn, args=None, kwargs=None) -> RemoteValue:
        """Queue ``fn(*args, **kwargs)`` for the next free worker; its ``RemoteValue`` at
        once. Raises the error of an earlier function (once) instead."""
        self._raise_if_error()
        if not callable(fn):
            raise InvalidArgumentError(f"schedule: fn must be a function, got {brief(fn)}")
        self._scheduled += 1
        name = f"{getattr(fn, '__name__', 'function')}#{self._scheduled}"
        closure = _Closure(self._scheduled, fn, tuple(args or ()), dict(kwargs or {}),
                           RemoteValue(self.ctx.env, name), self.ctx.env)
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
        """``dataset_fn()`` (or ``dataset_fn(input_context)``) once per worker; rebuilt
        for a worker that comes back after a failure."""
        if not callable(dataset_fn):
            raise InvalidArgumentError(f"create_per_worker_dataset: dataset_fn must be a "
                                       f"function, got {brief(dataset_fn)}")
        dataset = PerWorkerDataset(self, dataset_fn)
        self._datasets.append(dataset)
        return dataset

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
        """The coordinator's thread for worker ``w``: take a function, send it, wait."""
        ctx, cluster = self.ctx, self._cluster
        worker = f"worker:{w}"
        state = cluster.state(worker)
        seen = state.incarnation
        while True:
            if not state.up:
                yield state.restarted
                continue
            if state.incarnation != seen:  # back after a failure: new datasets
                seen = state.incarnation
                for dataset in self._datasets:
                    dataset._rebuild(w)
                cluster.contexts[worker].instant("faults", "per-worker datasets rebuilt",
                                                 "fault")
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
            ctx.send(worker, ("run", closure.number, attempt), Phantom(RPC_BYTES))
            wctx = cluster.contexts[worker]
            state.running = wctx.process(self._execute(wctx, closure, w, attempt),
                                         name=f"run {closure.name}")
            done = ctx.recv(worker, ("done", closure.number, attempt))
            failed = state.failed
            yield ctx.env.any_of([done, failed, closure.abort])
            self._inflight.discard(closure)
            if done.triggered:
                value, error = closure.outcome
                if error is None:
                    closure.value._set(value)
                else:
                    self._fail(closure, error)
            elif failed.triggered:
                if not closure.abort.triggered:
                    self._queue.appendleft(closure)  # TF puts it back, to run again
                    ctx.instant(LANE, f"{closure.name} back in the queue ({worker} failed)",
                                "fault", function=closure.name, worker=worker)
                    self._notify("_wake")
            else:  # cancelled: stop it on the worker
                if state.running.is_alive:
                    state.running.interrupt("cancelled")
            self._notify("_changed")

    def _execute(self, wctx, closure: _Closure, w: int, attempt: int):
        """The function on worker ``w`` (a process of that task)."""
        try:
            yield wctx.recv(self.ctx.task, ("run", closure.number, attempt))
        except Interrupt:
            return
        start = wctx.now
        args = _for_worker(closure.args, w)
        kwargs = _for_worker(closure.kwargs, w)
        label = closure.name if attempt == 1 else f"{closure.name} (run {attempt})"
        try:
            value = yield from self._drive(wctx, closure.fn, args, kwargs)
        except Interrupt as stop:
            wctx.span("functions", label, "function", start, wctx.now - start,
                      function=closure.name, run=attempt, ended=f"{stop.cause}")
            return
        except Exception as error:  # noqa: BLE001 -- the function's error, for the coordinator
            closure.outcome = (None, error)
            wctx.span("functions", label, "function", start, wctx.now - start,
                      function=closure.name, run=attempt, error=type(error).__name__)
        else:
            closure.outcome = (value, None)
            wctx.span("functions", label, "function", start, wctx.now - start,
                      function=closure.name, run=attempt)
        wctx.send(self.ctx.task, ("done", closure.number, attempt),
                  Phantom(RPC_BYTES + _nbytes(closure.outcome[0])))

    def _drive(self, wctx, fn, args, kwargs):
        """Run ``fn`` with the strategy set to this worker whenever its code runs (several
        workers' functions interleave in simulated time)."""
        strategy = self.strategy
        strategy._worker = wctx
        try:
            gen = fn(*args, **kwargs)
        finally:
            strategy._worker = None
        if not inspect.isgenerator(gen):
            return gen
        value, error = None, None
        while True:
            strategy._worker = wctx
            try:
                event = gen.throw(error) if error is not None else gen.send(value)
            except StopIteration as stop:
                return stop.value
            finally:
                strategy._worker = None
            try:
                value, error = (yield event), None
            except Interrupt:
                gen.close()
                raise
            except Exception as failed:  # noqa: BLE001 -- thrown back into the function
                value, error = None, failed

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


def _takes_argument(fn) -> bool:
    try:
        return len(inspect.signature(fn).parameters) > 0
    except (TypeError, ValueError):
        return False


def _for_worker(value, w: int):
    if isinstance(value, PerWorkerValues):
        return value._values[w]
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


def _nbytes(value) -> int:
    if value is None:
        return 0
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return int(np.asarray(value).nbytes)


__all__ = ["ClusterCoordinator", "PerWorkerDataset", "PerWorkerValues", "RemoteValue",
           "SCHEDULE_OVERHEAD_NS"]
