"""A worker task's ``tf.distribute.Server`` in TF2 parameter-server training: it runs the
functions the coordinator names in its "run" messages and replies with their outcome.

A "run" message (tag ``("run", closure, attempt)``) carries the function's registered name
and its arguments (``simdist/distribute/rpc.py``); the worker looks the function up in its
own rank's registry (every rank runs the same program, which registers the same functions),
resolves a per-worker iterator to its own (built here from the registered dataset function,
as TF builds per-worker datasets on the worker), runs it and sends ``("done", closure,
attempt)`` with the value's arrays, or the error's class and message; when the coordinator
fetches values (TF's ``remote_value_fetch``) the worker keeps a value and answers its
"fetch" with it. A "cancel" message
stops a function the coordinator cancelled; a failure stops it and loses the worker's
iterators, rebuilt from their start when the worker is back.
"""

from __future__ import annotations

import inspect

from simdist.base.errors import InvalidArgumentError, NotFoundError, OutOfRangeError
from simdist.distribute.rpc import decode, encode
from simdist.distribute.strategy import InputContext
from simdist.hardware.cluster import ClusterSpecError, chief_task
from simdist.sim.core import Interrupt
from simdist.sim.wire import decode_header, error_fields


class WorkerIterator:
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


def takes_argument(fn) -> bool:
    try:
        return len(inspect.signature(fn).parameters) > 0
    except (TypeError, ValueError):
        return False


class WorkerServer:
    """One worker task's server: its iterators and the functions it runs."""

    def __init__(self, cluster, ctx):
        self.cluster, self.ctx = cluster, ctx
        self.iterators: dict = {}  # iterator number -> WorkerIterator (lost when it fails)
        self.running: dict = {}  # (closure, attempt) -> the process running it
        self.kept: dict = {}  # (closure, attempt) -> a value the coordinator will fetch
        try:
            self.coordinator = chief_task(ctx.cluster).name
        except ClusterSpecError:
            self.coordinator = None

    def join(self):
        """``server.join()``: serve until the run ends (a daemon)."""
        self.ctx.process(self._serve(), name="worker server", daemon=True)
        return None
        yield  # a generator, as every task's main

    def lose(self) -> None:
        for proc in list(self.running.values()):
            if proc.is_alive:
                proc.interrupt("task failed")
        self.running.clear()
        self._had_iterators = bool(self.iterators)
        self.iterators.clear()
        self.kept.clear()

    def restart(self) -> None:
        if getattr(self, "_had_iterators", False):
            self.ctx.instant("faults", "per-worker datasets rebuilt", "fault")

    def _serve(self):
        ctx = self.ctx
        state = self.cluster.states[ctx.name]
        while True:
            msg = yield ctx.recv(src=self.coordinator, tag=None)
            if not state.up or msg.sent_at < state.failed_at:
                continue  # sent to a task that was down, or before it failed: lost
            kind, number, attempt = msg.tag
            if kind == "run":
                self.running[number, attempt] = ctx.process(
                    self._run(msg, number, attempt), name=f"run {number}.{attempt}")
            elif kind == "fetch":  # TF's remote_value_fetch: the kept value, copied
                value = self.kept.pop((number, attempt), None)
                ctx.send(msg.src, ("value", number, attempt), encode({}, value))
            elif kind == "cancel":
                proc = self.running.pop((number, attempt), None)
                if proc is not None and proc.is_alive:
                    proc.interrupt("cancelled")

    def _run(self, msg, number: int, attempt: int):
        """Run one function; reply with its outcome (a process of this task)."""
        ctx = self.ctx
        start = ctx.now
        header = decode_header(msg.payload[0])
        fn = self.cluster.functions.get(header["f"])
        name = f"{getattr(fn, '__name__', header['f'])}#{number}"
        label = name if attempt == 1 else f"{name} (run {attempt})"
        value, error = None, None
        try:
            if fn is None:
                raise NotFoundError(f"function {header['f']!r} is not registered on "
                                    f"{ctx.name}'s rank: register it with cluster.register(fn) "
                                    "in code every rank runs")
            _, call = decode(msg.payload, self._iterator)
            value = yield from self._drive(fn, call["a"], call["k"])
        except Interrupt as stop:
            ctx.span("functions", label, "function", start, ctx.now - start, function=name,
                     run=attempt, ended=f"{stop.cause}")
            return
        except Exception as failed:  # noqa: BLE001 -- the function's error, for the coordinator
            error = failed
        more = {} if error is None else {"error": type(error).__name__}
        ctx.span("functions", label, "function", start, ctx.now - start, function=name,
                 run=attempt, **more)
        self.running.pop((number, attempt), None)
        keep = error is None and value is not None and "keep" in header
        try:
            payload = encode({} if error is None else {"e": error_fields(error)}, value,
                             f"the value of {name}")
            if keep:  # the value stays here until the coordinator fetches it
                self.kept[number, attempt], payload = value, encode({"kept": 1})
        except InvalidArgumentError as bad:
            payload = encode({"e": error_fields(bad)})
        ctx.send(msg.src, ("done", number, attempt), payload)

    def _iterator(self, ref):
        """This worker's iterator of a per-worker dataset (built on first use)."""
        it = self.iterators.get(ref.number)
        if it is None:
            fn = self.cluster.functions.get(ref.dataset)
            if fn is None:
                raise NotFoundError(f"dataset function {ref.dataset!r} is not registered on "
                                    f"{self.ctx.name}'s rank")
            spec = self.ctx.cluster
            context = InputContext(spec.num_tasks("worker"), self.ctx.task_id, 1)
            dataset = fn(context) if takes_argument(fn) else fn()
            it = self.iterators[ref.number] = WorkerIterator(iter(dataset), self.ctx.task_id)
        return it

    def _drive(self, fn, args, kwargs):
        """Run ``fn`` with this rank's strategies set to this worker whenever its code runs
        (several workers' functions interleave in simulated time)."""
        strategies, ctx = self.cluster.strategies, self.ctx

        def enter():
            for s in strategies:
                s._worker = ctx

        def leave():
            for s in strategies:
                s._worker = None
        enter()
        try:
            gen = fn(*args, **kwargs)
        finally:
            leave()
        if not inspect.isgenerator(gen):
            return gen
        value, error = None, None
        while True:
            enter()
            try:
                event = gen.throw(error) if error is not None else gen.send(value)
            except StopIteration as stop:
                return stop.value
            finally:
                leave()
            try:
                value, error = (yield event), None
            except Interrupt:
                gen.close()
                raise
            except Exception as failed:  # noqa: BLE001 -- thrown back into the function
                value, error = None, failed


__all__ = ["WorkerIterator", "WorkerServer", "takes_argument"]
