"""Models TF's worker service (``GrpcWorkerService``): what each task of a TF1 job serves.

Every task of a world runs one (a daemon process) that takes each message for the task:
- ``RegisterGraph``: the master's partition graphs for this task, as GraphDefs (pickled
  bytes: every rank runs the same Python); the worker imports them into a graph of its own,
  as TF's ``GraphMgr::Register`` does, and answers;
- ``RunGraph``: run the registered partitions once for a step (an ``Executor``) and answer
  with the step's error, if any, the nodes' times (when traced) and the GPU memory peaks;
- ``AbortStep``: the master saw an error elsewhere: stop this task's part of the step;
- a tensor (or a control edge) from another task's ``_Send``, and the answers to this
  task's own requests: kept in the task's rendezvous, by tag, until someone takes them.

A worker's task may live on another MPI rank than its master: everything here travels as a
message, so a job gives the same trace in one process and over ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simdist.base.errors import CancelledError, InvalidArgumentError, UnavailableError
from simdist.sim.payloads import Phantom
from simdist.sim.resources import Pool
from simdist.sim.wire import decode_header, encode_header, error_fields, unpack_object
from simdist.graph.graph import Graph
from simdist.graph.graph_def import import_graph_def
from simdist.graph._sim.executor import SEND_RECV, Executor, lane_of, nbytes_of


@dataclass(frozen=True)
class RunGraphRequest:
    """What a RunGraph request carries: the graph handle, the step id, the step's
    deadline (ns on the job's clock, or None), whether to trace the nodes' times, and
    whether the run is a daemon thread's (it may be left waiting at the end)."""

    handle: str
    step: str
    deadline: int | None
    trace: bool
    daemon: bool

    def encode(self) -> np.ndarray:
        """As few bytes as TF's proto: the handle's and the step's numbers (both name their
        master, the request's sender), the deadline and two flags."""
        return encode_header([_number(self.handle), _number(self.step), self.deadline,
                              int(self.trace), int(self.daemon)])

    @classmethod
    def decode(cls, array, master: str) -> RunGraphRequest:
        handle, step, deadline, trace, daemon = decode_header(array)
        return cls(f"{master} graph {handle}", f"{master} step {step}", deadline,
                   bool(trace), bool(daemon))


def _number(name: str) -> int:
    """The N of "worker:0 step N" or "worker:0 graph N"."""
    return int(name.rsplit(" ", 1)[1])


class RegisteredGraph:
    """One task's partitions of a master's graph, imported into a graph of the worker's own
    (TF's ``GraphMgr::Item``); ``fetched``: the names of the tensors the client fetches."""

    def __init__(self, graph_defs: list, fetched):
        self.graph = Graph()
        self.ops = []
        for graph_def in graph_defs:
            self.ops += import_graph_def(graph_def, name="", graph=self.graph)
        self.nodes = {n.name: n for g in graph_defs for n in g.node}
        self.devices = [g.node[0].device for g in graph_defs]
        self.fetched = frozenset(fetched)
        self.uses: dict = {}  # tensor -> how many of this task's ops read it
        for op in self.ops:
            if op.type not in SEND_RECV:
                for t in op.inputs:
                    self.uses[t] = self.uses.get(t, 0) + 1
        # a _Send's rendezvous name -> the _Recv node it pairs with on this task
        self.recv_of = {n.attr["tensor_name"]: n.name for n in self.nodes.values()
                        if n.op == "_Recv" and not n.attr["client_terminated"]}


class Rendezvous:
    """Models TF's Rendezvous of one task: the messages that reached it, by (source task,
    tag), until they are taken (a ``_Recv``, or the master waiting for a worker's answer)."""

    def __init__(self, env):
        self.env = env
        self.arrived: dict = {}
        self.waiting: dict = {}

    def put(self, key, msg) -> None:
        event = self.waiting.pop(key, None)
        if event is not None:
            event.succeed(msg)
        else:
            self.arrived[key] = msg

    def get(self, key, desc: str):
        """An event that happens with the message ``key`` (source task, tag) names."""
        event = self.env.event(desc=desc)
        msg = self.arrived.pop(key, None)
        if msg is not None:
            event.succeed(msg)
        else:
            self.waiting[key] = event
        return event


class WorkerService:
    """The worker service of one task: registered graphs, the steps it runs, its rendezvous."""

    def __init__(self, ctx, runtime, pools):
        self.ctx, self.runtime, self.pools = ctx, runtime, pools
        self.pool = pools[0]  # what a RunGraph from another task's master runs on
        self._caller = None  # RunOptions.inter_op_thread_pool -1: the caller's thread
        self.rendezvous = Rendezvous(ctx.env)
        self.graphs: dict[str, RegisteredGraph] = {}
        self.steps: dict[str, Executor] = {}  # step id -> this task's part of it, running
        self.aborted: set = set()  # steps the master aborted before their request came
        self.objects: dict = {}  # (tag) -> a Python object sent within this process
        ctx.process(self._serve(), name=f"worker service {ctx.name}", daemon=True)

    def _serve(self):
        ctx = self.ctx
        while True:
            msg = yield ctx.recv()
            tag = msg.tag
            if tag.startswith("RegisterGraph ("):
                self._register(msg)
            elif tag.startswith("RunGraph ("):
                request = RunGraphRequest.decode(msg.payload, msg.src)
                ctx.process(self._run_graph(msg.src, request), daemon=request.daemon,
                            name=tag)
            elif tag.startswith("AbortStep ("):
                step = tag[len("AbortStep ("):-1]
                executor = self.steps.get(step)
                if executor is None:
                    self.aborted.add(step)
                else:
                    executor.abort(CancelledError(f"step {step} was aborted by its master"))
            else:
                self.rendezvous.put((msg.src, tag), msg)

    def register_graph(self, handle: str, graph_defs: list, fetched) -> None:
        self.graphs[handle] = RegisteredGraph(graph_defs, fetched)

    def _register(self, msg):
        handle = msg.tag[len("RegisterGraph ("):-1]
        try:
            item = unpack_object(msg.payload)
            self.register_graph(handle, item["graphs"], item["fetched"])
            answer = {}
        except Exception as error:  # noqa: BLE001 -- the master raises it in its client
            answer = {"e": error_fields(error)}
        self.ctx.send(msg.src, f"RegisterGraph response ({handle})", encode_header(answer))

    def _run_graph(self, master: str, request: RunGraphRequest):
        """A worker's part of one step: run its partitions and answer the master."""
        ctx = self.ctx
        start = ctx.now
        if request.step in self.aborted:
            self.aborted.discard(request.step)
            executor = None
            error = CancelledError(f"step {request.step} was aborted by its master")
        elif self.runtime.down:
            executor = None
            error = UnavailableError(f"task {ctx.name} is unavailable: it failed and has "
                                     "not restarted")
        else:
            try:
                executor = self.run(request)
            except InvalidArgumentError as missing:
                executor, error = None, missing
            else:
                yield from executor.run()
                error = executor.error
                self.span(request, start)
        answer = {"p": self.peaks()}
        if error is not None:
            answer["e"] = error_fields(error)
        if executor is not None and executor.stats:
            answer["st"] = executor.stats
        ctx.send(master, f"RunGraph response ({request.step})", encode_header(answer))

    def run(self, request: RunGraphRequest, feeds: dict | None = None,
            pool: int = 0) -> Executor:
        """This task's Executor of step ``request.step`` (not started), its ops on inter-op
        pool ``pool`` of the task (-1: one thread, the caller's)."""
        graph = self.graphs.get(request.handle)
        if graph is None:
            raise InvalidArgumentError(f"graph handle {request.handle!r} is not registered "
                                       f"with {self.ctx.name}'s worker")
        if pool == -1 and self._caller is None:
            self._caller = Pool(self.ctx.env, 1, "caller thread")
        executor = Executor(self, graph, request.step, request.deadline, request.daemon,
                            feeds, request.trace,
                            self._caller if pool == -1 else self.pools[pool])
        self.steps[request.step] = executor
        return executor

    def span(self, request: RunGraphRequest, start: int) -> None:
        """This task's part of the step, on its "RunGraph" lane."""
        self.steps.pop(request.step, None)
        devices = self.graphs[request.handle].devices
        self.ctx.span("RunGraph", f"RunGraph {request.step}", "partition", start,
                      self.ctx.now - start, devices=", ".join(lane_of(d) for d in devices))

    def peaks(self) -> dict:
        return {device: a.peak for device, a in self.runtime.allocators.items()}

    # -- values between tasks ---------------------------------------------------------------

    def payload_of(self, value, tag):
        """What a ``_Send`` tagged ``tag`` puts in its message: a tensor's array; anything
        else (a variable sent by reference, a resource) its size only, the object left in
        this process for its receiver (which, on another MPI rank, refuses it)."""
        if isinstance(value, np.ndarray) and not value.dtype.hasobject:
            return value
        if isinstance(value, (np.generic, int, float, bool)):
            return np.asarray(value)
        _OBJECTS[(self.ctx.name, tag)] = value
        return Phantom(nbytes_of(value))

    def payload_value(self, msg, what: str):
        """The value a ``_Recv`` takes from ``msg`` (``what``: the tensor it stands for)."""
        if not isinstance(msg.payload, Phantom):
            return msg.payload
        value = _OBJECTS.pop((msg.src, msg.tag), _OBJECTS)
        if value is _OBJECTS:
            raise InvalidArgumentError(
                f"{what} from {msg.src} to {self.ctx.name} is not a tensor (a variable used "
                "by reference, a resource): it cannot cross MPI ranks; place the ops that use "
                "it on its own task")
        return value


#: (sending task, tag) -> a Python object a _Send left for its _Recv in this process
_OBJECTS: dict = {}
