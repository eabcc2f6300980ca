"""Several TF1 client programs at once, against one simulated cluster.

In a real between-graph job every task runs its own Python client: a script that builds a
graph and calls ``Session.run`` again and again, while the parameter servers sit in
``server.join()``. ``simulate_clients`` runs such client functions, unchanged, in one
simulation: each client is a simulated process, and its ``Session.run`` (or
``server.join()``) blocks that client in simulated time while the other clients, their ops
and the network go on. So a client waiting on a queue another client fills, or on a token
the chief hands out, waits just as it would on TensorFlow.

How: each client function runs on a Python thread of its own, but never two at once: the
simulation hands control to a client thread and waits until the thread blocks in a
``Session.run`` (or ends), then runs simulated time until that run is over. The order is
the simulation's, so a run is deterministic like every other simdist run.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass

from simdist.base.errors import InvalidArgumentError
from simdist.sim.core import Interrupt, SimulationDeadlock
from simdist.sim.wire import error_fields, rebuild_error

_local = threading.local()


def current_client() -> Client | None:
    """The client whose thread is running now, or None outside ``simulate_clients``."""
    return getattr(_local, "client", None)


class _Abandoned(BaseException):
    """Unwinds a client thread whose simulation has ended (e.g. a ps in server.join())."""


class _Killed(BaseException):
    """Unwinds a client thread whose task failed: its process died (``Client.kill``)."""


class Client:
    """One client program: a function run on its own thread, one step at a time."""

    def __init__(self, name: str, fn, world, daemon: bool = False, task: str | None = None,
                 enter=None, thread: bool = False):
        self.name, self.fn, self.world = name, fn, world
        self.thread = thread  # a program's own thread: its error ends it alone (``_run``)
        self.enter = enter  # called on the client's thread whenever it takes control
        self.daemon = daemon  # a daemon thread (TF's daemon=True) may be left waiting
        self.task = task  # the task whose process runs it ("job:index"), once known
        self.run = None  # the MasterRun of the Session.run it waits on, if any
        self.killed = False
        self._go = threading.Semaphore(0)  # the simulation lets the thread run
        self._back = threading.Semaphore(0)  # the thread gives control back
        self._waits_on = None
        self._resume = (True, None)  # (ok, value or exception) for the thread's next step
        self._abandoned = False
        self.finished = False
        self.result = self.error = None
        self.proc = None  # its process in the world, once started
        self._thread = threading.Thread(target=self._run, name=f"simdist client {name}",
                                        daemon=True)

    @property
    def env(self):
        """The simulation this client runs in."""
        return self.world.env

    def is_alive(self) -> bool:
        """threading.Thread's: has the client not ended yet?"""
        return not self.finished

    def join(self, timeout=None):
        """threading.Thread's: wait (in simulated time) until the client has ended, or for
        ``timeout`` seconds."""
        events = [self.proc]
        if timeout is not None:
            events.append(self.env.timeout(int(round(float(timeout) * 1e9))))
        self.world.wait(self.env.any_of(events))
        if timeout is not None:
            events[1].cancel()

    def body(self):
        """The simulated process of this client (a generator run by the kernel)."""
        self._thread.start()
        while True:
            self._go.release()
            self._back.acquire()  # the thread runs until it waits on an event or ends
            if self.finished:
                if self.error is not None and self.thread:
                    # Python's threading.excepthook: the thread ends, printing its error
                    first = str(self.error).split("\n")[0]
                    print(f"Exception in thread {self.name}: {type(self.error).__name__}: "
                          f"{first}", file=sys.stderr)
                    return None
                if self.error is not None:
                    if self.world.over_ranks:  # the others learn of it at the end (all ranks)
                        self.world.client_errors.append((self.task or self.name,
                                                         error_fields(self.error)))
                        return None
                    raise self.error
                return self.result
            try:
                self._resume = (True, (yield self._waits_on))
            except Interrupt as interrupt:
                if not isinstance(interrupt.cause, _Killed):
                    raise
                self._resume = (False, interrupt.cause)
            except BaseException as error:  # the awaited event failed: raise it in the client
                self._resume = (False, error)

    def wait(self, event):
        """Block this client's thread until ``event`` happens; returns its value."""
        if self._abandoned:  # e.g. a `finally:` that waits again while the thread unwinds
            raise _Abandoned()
        if self.killed:
            raise _Killed()
        self._waits_on = event
        self._back.release()
        self._go.acquire()
        if self.enter is not None:
            self.enter()
        ok, value = self._resume
        if not ok:
            raise value
        return value

    def kill(self, error):
        """Its task's process died: the client's Session.run is cancelled with ``error`` and
        its thread unwinds (``_Killed``), ending without a result."""
        if self.finished or self.killed or self.proc is None or not self.proc.is_alive:
            return
        self.killed = True
        if self.run is not None:
            self.run.abort(error)
        self.proc.interrupt(_Killed())

    def abandon(self):
        """End the thread of a client the simulation left waiting (a ps in join())."""
        if self._thread.is_alive() and not self.finished:
            self._abandoned = True
            self._resume = (False, _Abandoned())
            self._go.release()
            self._thread.join()

    def _run(self):
        self._go.acquire()
        _local.client = self
        try:
            if self.enter is not None:
                self.enter()
            self.result = self.fn()
        except (_Abandoned, _Killed):
            pass
        except BaseException as error:  # handed to the simulation, which raises it
            self.error = error
        self.finished = True
        self._back.release()


@dataclass
class ClientsResult:
    """What ``simulate_clients`` returns: each client's return value, the trace of the
    simulation while they ran, and when they started and ended on the job's clock (ns)."""

    returns: dict
    trace: object
    start_time: int
    end_time: int


def simulate_clients(clients: dict, enters: dict | None = None,
                     tasks: dict | None = None) -> ClientsResult:
    """Run ``clients`` ({name: function of no arguments}) at once on the running servers'
    cluster, in the simulation its sessions share; each client's sessions must use those
    servers' targets. ``enters`` ({name: function}): called whenever that client's thread
    takes control (``Client.enter``); ``tasks`` ({name: "job:index"}): the task whose
    process runs each client. In a world over MPI ranks (``world.over_ranks``) a rank runs
    the clients of its own tasks only: rank 0 gets every client's return and the trace
    (the others their own clients' returns and None), and a client's error is raised on
    every rank once the job has ended.

    A client that is still in ``server.join()`` when nothing else is left to run ends
    there (a ps task's server); one that waits on anything else is a deadlock, reported
    with every blocked process and what it waits on.
    """
    from simdist.graph.server import cluster_of_running_servers
    from simdist.graph._sim.world import world_of

    if not isinstance(clients, dict) or not clients or not all(
            callable(fn) for fn in clients.values()):
        raise InvalidArgumentError(
            f"simulate_clients takes a dict {{name: function}} of at least one client, got "
            f"{clients!r}")
    if current_client() is not None:
        raise InvalidArgumentError("simulate_clients cannot be called from inside a client")
    _, runtimes = cluster_of_running_servers()
    world = world_of(runtimes, next(iter(runtimes.values())).machine.hardware)
    marks, start = world.stream_marks(), world.env.now
    enters, tasks = enters or {}, tasks or {}
    started = [world.start_client(str(name), fn, enter=enters.get(name), task=tasks.get(name))
               for name, fn in clients.items()
               if name not in tasks or not world.over_ranks or world.is_local(tasks[name])]
    try:
        try:
            world.wait(None)
        except SimulationDeadlock:
            if world.over_ranks:  # a client's error on some rank may be why
                _raise_client_errors(world)
            raise
        if world.over_ranks:
            _raise_client_errors(world)
    finally:
        for client in started:
            client.abandon()
    returns = {client.name: client.result for client in started}
    if world.over_ranks:  # rank 0 gets every client's, the others their own
        parts = world.transport.gather(returns)
        if world.transport.rank == 0:
            returns = {name: part[name] for name in clients for part in parts
                       if name in part}
    return ClientsResult(returns, world.trace_since(marks), start, world.end_time())


def _raise_client_errors(world) -> None:
    """Over MPI ranks, on every rank: the first client error of any rank (in task order)."""
    errors = [e for part in world.transport.allgather(world.client_errors) for e in part]
    if errors:
        order = world.simulation.names
        task, fields = min(errors, key=lambda e: (order.index(e[0]) if e[0] in order
                                                  else len(order), e[0]))
        raise rebuild_error(fields)
