"""The simulated time of a TF1 job: one simulation that outlives each ``Session.run``.

On TensorFlow a job's processes keep running between two ``Session.run`` calls: a queue
runner's thread goes on filling its queue, a ``tf.data`` prefetch goes on reading, and
another client's session goes on training. simdist keeps one ``World`` per job for that: a
local session has its own; the sessions of a cluster share the world of its running
servers. A ``Session.run`` starts its ops in the world and advances the world's simulated
time until the run is over; whatever else lives there (client threads of
``simulate_clients``, queue runners) advances with it. So a run's trace holds what happened
during the run, on the world's clock: the first run of a world starts at 0 ns, the next
where the previous one ended.
"""

from __future__ import annotations

import contextlib

from simdist.hardware.cluster import ClusterSpec
from simdist.base.errors import InvalidArgumentError
from simdist.sim.scheduler import Simulation
from simdist.graph._sim.clients import Client, current_client
from simdist.graph._sim.executor import SimTasks

_CLUSTER_WORLDS: dict[tuple, World] = {}
_TRANSPORT: list = [None]  # the transport of the worlds made now (over_ranks), or None


@contextlib.contextmanager
def over_ranks(transport):
    """Make the cluster worlds of this block over ``transport`` (an ``MPITransport``): each
    rank simulates its own tasks (``World.is_local``); the ranks advance time together."""
    _TRANSPORT[0] = transport
    try:
        yield
    finally:
        _TRANSPORT[0] = None
        forget_cluster_worlds()


class World:
    """A simulation of the tasks ``runtimes`` names ({"job:index": TaskRuntime})."""

    def __init__(self, runtimes: dict, hardware):
        self.runtimes = runtimes
        self.tasks = SimTasks(runtimes)
        self.clients: list[Client] = []
        self.broken = False
        self._back: dict[str, list] = {}  # task -> events to trigger when it restarts
        jobs: dict = {}
        for name in runtimes:
            job, index = name.split(":")
            jobs.setdefault(job, {})[int(index)] = f"sim:{name}"

        def main(ctx):  # every task's program: nothing, until a session runs ops there
            self.tasks.add(ctx)
            return iter_nothing()
        self.transport = _TRANSPORT[0]
        self.simulation = Simulation(ClusterSpec(jobs), main, hardware=hardware,
                                     transport=self.transport)
        self.client_errors: list = []  # (task, error fields) of clients that failed, over ranks

    @property
    def over_ranks(self) -> bool:
        return self.transport is not None and self.transport.size > 1

    def is_local(self, task: str) -> bool:
        """Whether ``task`` ("job:index") is simulated by this rank."""
        simulation = self.simulation
        return simulation.rank_of[simulation.names.index(task)] == simulation.transport.rank

    @property
    def env(self):
        return self.simulation.env

    def wait(self, event):
        """Block the caller until ``event`` happens and return its value: a client thread
        waits in simulated time; plain Python advances the world until then (with None:
        until nothing is left to run but daemons)."""
        client = current_client()
        if client is not None:
            return client.wait(event)
        try:
            self.simulation.advance(until=event)
        except BaseException:
            self.broken = True  # its processes were left half way: start afresh next time
            raise
        return None if event is None else event.value

    def start_client(self, name: str, fn, daemon: bool = False, task: str | None = None,
                     enter=None, thread: bool = False) -> Client:
        """Start ``fn()`` as a client program (a thread of the job) in this world; a
        ``daemon`` one may still be waiting when everything else has ended (it is then
        abandoned, as a Python daemon thread dies with its process). ``task``: the task
        whose process runs it (else the task of its first session); ``enter``: called
        whenever the client's thread takes control (a process's own argv, environment);
        ``thread``: a thread a program started (a QueueRunner's), whose uncaught error ends
        that thread only, as Python's threads do, instead of the run."""
        client = Client(name, fn, self, daemon, task, enter, thread)
        self.clients.append(client)
        client.proc = self.env.process(client.body(), name=f"client {name}", order=0,
                                       daemon=daemon)
        return client

    def schedule_failure(self, task: str, at_ns: int, down_ns: int | None, restart=None):
        """Task ``task`` ("job:index") fails at ``at_ns`` on this world's clock: its process
        dies (the client programs and threads running there end, their runs cancelled),
        its ops and everything waiting on its resources fail with ``UnavailableError`` and
        its variables are lost. It restarts ``down_ns`` later (never with None), running
        ``restart`` (a client function, e.g. the worker's program again) if given. Both are
        instants on the task's "faults" lane. Over MPI ranks every rank calls it: the
        task's own rank fails it, the others only learn when it is down and back (what a
        master's RPCs to it would find out), for their sessions to wait as TF's do."""
        from simdist.base.errors import UnavailableError

        runtime = self.runtimes.get(task)
        if runtime is None:
            raise InvalidArgumentError(f"schedule_failure: task {task!r} is not in this "
                                       f"cluster: its tasks are {sorted(self.runtimes)}")

        local = not self.over_ranks or self.is_local(task)

        def failure():
            yield self.env.timeout(max(0, at_ns - self.env.now))
            ctx = self.tasks.contexts.get(task)
            error = UnavailableError(f"task {task} failed (injected at {at_ns} ns)")
            if local:
                ctx.instant("faults", "task failed", "fault")
                for client in list(self.clients):
                    if client.task == task:
                        client.kill(error)
            runtime.fail(error)
            if down_ns is not None:
                yield self.env.timeout(down_ns)
                runtime.restart()
                if local:
                    ctx.instant("faults", "task restarted", "fault")
                for event in self._back.pop(task, []):
                    event.succeed()
                if local and restart is not None:
                    self.start_client(f"{task} (restarted)", restart, task=task)
        self.env.process(failure(), name=f"failure of {task}", daemon=True)

    def task_back(self, task: str):
        """An event that happens when the failed task ``task`` restarts."""
        event = self.env.event(desc=f"wait for {task} to restart")
        self._back.setdefault(task, []).append(event)
        return event

    def trace_since(self, marks: dict):
        """The trace of what every task recorded after ``marks`` (``stream_marks()``), cut
        where its first capped stream stopped keeping records (a capped stream's start
        beside the others' whole records would say nothing of the gap); the metadata's
        "truncated" then names the capped streams ("full"). Over ranks every rank calls it
        and rank 0 gets the trace (the others None)."""
        tracer = self.simulation.tracer
        streams = {key: stream[marks.get(key, 0):] for key, stream in tracer.streams.items()}
        cuts = tracer.cuts()
        end = self.end_time()
        if self.over_ranks:
            parts = self.transport.gather((streams, cuts))
            if self.transport.rank != 0:
                return None
            streams, cuts = {}, {}
            for part_streams, part_cuts in parts:
                streams.update(part_streams)
                cuts.update(part_cuts)
        trace = self.simulation.build_trace(streams, end,
                                            min(cuts.values(), default=None))
        if cuts:
            trace.metadata["truncated"]["full"] = sorted(cuts)
        return trace

    def end_time(self) -> int:
        """The job's clock now: the latest of every rank's."""
        if self.over_ranks:
            return self.transport.allreduce(self.env.now, "max")
        return self.env.now

    def stream_marks(self) -> dict:
        return {key: len(stream) for key, stream in self.simulation.tracer.streams.items()}

    def close(self):
        """End the threads of clients left waiting (a ps in ``server.join()``)."""
        for client in self.clients:
            client.abandon()
        self.clients.clear()


def iter_nothing():
    return
    yield


def world_of(runtimes: dict, hardware, local_owner=None) -> World:
    """The world of a local session (``local_owner``: the session) or of the cluster whose
    running tasks ``runtimes`` names; a new one when there is none or it broke."""
    if local_owner is not None:
        world = getattr(local_owner, "_world", None)
        if world is None or world.broken:
            if world is not None:
                world.close()
            world = local_owner._world = World(runtimes, hardware)
        return world
    key = tuple(sorted((name, id(runtime)) for name, runtime in runtimes.items()))
    world = _CLUSTER_WORLDS.get(key)
    if world is None or world.broken:
        if world is not None:
            world.close()
        world = _CLUSTER_WORLDS[key] = World(runtimes, hardware)
    return world


def forget_cluster_worlds(runtime=None):
    """Drop the worlds of clusters that ``runtime`` (every runtime when None) belongs to:
    its server stopped."""
    for key in list(_CLUSTER_WORLDS):
        if runtime is None or any(ident == id(runtime) for _, ident in key):
            _CLUSTER_WORLDS.pop(key).close()
