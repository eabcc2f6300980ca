"""Models TF's ``MasterSession::Run``: one ``Session.run`` carried out by its tasks' workers.

The master registers the plan's partition graphs with each task's worker once (TF's
``RegisterGraph``: a GraphDef message to a worker on another task, a call to its own), then,
every step, sends each worker a ``RunGraph`` request, runs its own partitions (the client's
feeds enter and its fetches leave there) and waits for every answer. The first error a
worker reports is the step's: the master tells the others to abort the step (TF's
``AbortStep``), waits for their answers and hands the error to the client.
"""

from __future__ import annotations

from simdist.base.errors import CancelledError, InvalidArgumentError, UnimplementedError
from simdist.sim.payloads import Phantom
from simdist.sim.wire import RPC_BYTES, decode_header, pack_object, rebuild_error
from simdist.graph._sim.executor import SessionRun
from simdist.graph._sim.kernel_context import cancelled_kind
from simdist.graph._sim.worker import RunGraphRequest


class MasterRun:
    """One ``Session.run`` of the master's plan ``plan`` (``master.ClientGraph``)."""

    def __init__(self, plan, feeds: dict, fetches: list, timeout_ms: int = 0,
                 daemon: bool = False, step_stats=None, pool: int = 0):
        self.plan, self.feeds, self.fetches = plan, feeds, fetches
        self.pool = pool  # RunOptions.inter_op_thread_pool: the master task's pool to use
        self.timeout_ns = timeout_ms * 1_000_000  # ConfigProto.operation_timeout_in_ms
        self.daemon = daemon  # a run of a daemon thread: it may be left waiting at the end
        self.step_stats = step_stats  # a StepStats to fill (RunOptions.trace_level), or None
        self.step = None  # "master step N": the run's step id, in its messages' tags
        self.error = None  # the first error of the run, raised by the session
        self.executor = None  # the master task's own part of the step
        self.answered: set = set()  # the workers that have answered this step's RunGraph
        self.peaks: dict = {}

    def start(self, tasks):
        """Start this run inside a running simulation; returns the event of its end. Its step
        id is unique in the job (TF: a random 64-bit id): the master task's count of steps."""
        master = self.plan.master
        tasks.steps[master] = step = tasks.steps.get(master, 0) + 1
        self.step, self.tasks = f"{master} step {step}", tasks
        if master not in tasks.contexts:  # its server lives on another MPI rank
            raise UnimplementedError(
                f"a session on {master}'s server (its target) from a client on another MPI "
                f"rank: under mpiexec simdist runs a session's master on its client's rank; "
                f"open the session on a server of this rank (the task's own server.target), "
                f"or run in one process")
        self.ctx = ctx = tasks.contexts[master]
        self.start_time = ctx.now
        return ctx.process(self._run(), name=f"RunGraph ({self.step})", daemon=self.daemon)

    def finish(self, trace=None) -> SessionRun:
        """The result of the run, once it has ended (``trace``: what happened meanwhile); a
        failed run has no values (the session raises ``error``)."""
        fetched = {} if self.error is not None else self.executor.fetched
        values = {t: fetched[t.name] for t in self.fetches} if self.error is None else {}
        return SessionRun(values, trace, self.start_time, self.ctx.now, self.peaks)

    def abort(self, error):
        """End the run with ``error`` from outside (its client's process died, or another
        thread closed its session)."""
        self._fail(error)

    def close_error(self, local: bool) -> CancelledError:
        """The error of this run when its session is closed while it waits (TF 2.21): a local
        session cancels the blocked op itself (its own message: "Dequeue operation was
        cancelled"); a session on a server ends the step at its master."""
        op = None if self.executor is None else self.executor.blocked_op()
        if not local or op is None:
            return CancelledError("Step was cancelled by an explicit call to "
                                  "`Session::Close()`.")
        return CancelledError(f"{cancelled_kind(op.type)} operation was cancelled\n\t "
                              f"[[{{{{node {op.name}}}}}]]")

    # -- the master's process --------------------------------------------------------------

    def _run(self):
        plan, tasks, ctx = self.plan, self.tasks, self.ctx
        worker, remote = tasks.workers[plan.master], plan.tasks[1:]
        handle = tasks.handle(plan)
        deadline = self.start_time + self.timeout_ns if self.timeout_ns > 0 else None
        request = RunGraphRequest(handle, self.step, deadline, self.step_stats is not None,
                                  self.daemon)
        if (handle, plan.master) not in tasks.registered:
            worker.register_graph(handle, plan.partitions_of(plan.master), plan.fetched)
            tasks.registered.add((handle, plan.master))
        yield from self._register(handle, [t for t in remote
                                           if (handle, t) not in tasks.registered])
        if self.error is not None:
            return
        for task in remote:
            ctx.send(task, f"RunGraph ({self.step})", request.encode())
        self.executor = executor = worker.run(request, {t.name: v for t, v in
                                                        self.feeds.items()}, self.pool)
        start = ctx.now
        own = ctx.process(executor.run(), name=f"RunGraph ({self.step}) here",
                          daemon=self.daemon)
        waiting = {task: worker.rendezvous.get((task, f"RunGraph response ({self.step})"),
                                               f"RunGraph response of {task} ({self.step})")
                   for task in remote}
        answers = {}
        while waiting or own.is_alive:
            yield ctx.env.any_of(list(waiting.values()) + ([own] if own.is_alive else []))
            for task, event in list(waiting.items()):
                if event.triggered:
                    del waiting[task]
                    self.answered.add(task)
                    answers[task] = answer = decode_header(event.value.payload)
                    if "e" in answer:
                        self._fail(rebuild_error(answer["e"]))
            if not own.is_alive and executor.error is not None:
                self._fail(executor.error)
        worker.span(request, start)
        self.peaks = worker.peaks()
        stats = [executor.stats] + [answers[t].get("st", []) for t in remote]
        for task in remote:
            self.peaks.update(answers[task]["p"])
        if self.step_stats is not None:
            for records in stats:
                for device, node, op_type, start, end in records or ():
                    self.step_stats.record(device, node, op_type, start, end)

    def _register(self, handle: str, tasks: list):
        """``RegisterGraph`` with each worker of ``tasks``, and wait for their answers."""
        if not tasks:
            return
        ctx, worker = self.ctx, self.tasks.workers[self.plan.master]
        try:
            payloads = {task: pack_object({"graphs": self.plan.partitions_of(task),
                                           "fetched": self.plan.fetched},
                                          f"the partition graph of {task}")
                        for task in tasks}
        except InvalidArgumentError as error:
            self.error = error
            return
        for task in tasks:
            ctx.send(task, f"RegisterGraph ({handle})", payloads[task])
        for task in tasks:
            msg = yield worker.rendezvous.get((task, f"RegisterGraph response ({handle})"),
                                              f"RegisterGraph response of {task}")
            answer = decode_header(msg.payload)
            if "e" in answer:
                self.error = self.error or rebuild_error(answer["e"])
            else:
                self.tasks.registered.add((handle, task))

    def _fail(self, error):
        """The step's first error: stop the master's part and tell the workers that have not
        answered yet to abort theirs."""
        if self.error is not None:
            return
        self.error = error
        if self.executor is None:
            return
        self.executor.abort(error)
        for task in self.plan.tasks[1:]:
            if task not in self.answered:
                self.ctx.send(task, f"AbortStep ({self.step})", Phantom(RPC_BYTES))
