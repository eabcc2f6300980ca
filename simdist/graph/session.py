"""Models tf.compat.v1.Session: run the part of a graph that some fetches need.

``Session()`` is a local session: one simulated process ("/job:localhost/replica:0/task:0")
with its own devices and variables. ``Session(server.target)`` connects to a cluster: its ops
run on the tasks their devices name, and its variables live in those tasks' resource
containers, shared with every other session of the cluster. Each ``run`` places the graph
(once per op), prunes it to what the fetches need, and simulates it: ``last_trace`` holds the
trace of the last run and ``last_placement`` the device of every op.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from simdist.base.errors import AbortedError, InvalidArgumentError, UnavailableError
from simdist.hardware.device_spec import DeviceSpec
from simdist.graph.array_ops import placeholder_not_fed
from simdist.graph._sim.clients import current_client
from simdist.graph._sim.world import world_of
from simdist.graph.config import ConfigProto
from simdist.graph._sim.run_step import MasterRun
from simdist.graph._sim.master import Master
from simdist.graph.graph import Graph, Operation, Tensor, format_shape, get_default_graph
from simdist.graph.indexed_slices import IndexedSlices, IndexedSlicesValue
from simdist.graph.placement import Placer
from simdist.graph.run_metadata import RunOptions, StepStats
from simdist.graph._sim.runtime import Machine, TaskRuntime, direct_session_pools
from simdist.graph.server import connect
from simdist.graph.variables import Variable

_thread_sessions = threading.local()
#: the open sessions of every server (TF's master sessions), which Session.reset closes
_server_sessions: weakref.WeakSet = weakref.WeakSet()


def _default_sessions() -> list:
    """This thread's ``with session:`` / ``as_default()`` sessions (thread-local, as TF's)."""
    if not hasattr(_thread_sessions, "stack"):
        _thread_sessions.stack = []
    return _thread_sessions.stack


def get_default_session():
    if not _default_sessions():
        raise InvalidArgumentError("no default session: use `with tf.Session() as sess:` or "
                                   "pass session= explicitly")
    return _default_sessions()[-1]


class Session:
    """tf.compat.v1.Session(target="", graph=None, config=None); ``machine`` (a simdist
    extension) is the simulated host of a local session; a session on a cluster runs on
    its servers' machines. The network between tasks is the session's own machine's."""

    def __init__(self, target: str = "", graph: Graph | None = None,
                 config: ConfigProto | None = None, machine: Machine | None = None):
        self.graph = graph or get_default_graph()
        self.config = config or ConfigProto()
        self.target = target
        if target == "":
            gpus = self.config.device_count.get("GPU", 0)
            self._local = TaskRuntime("localhost", 0, machine or Machine(gpus=gpus),
                                      self.config)
            self._local.local_pools = direct_session_pools(self.config,
                                                           self._local.machine.cores)
            self.runtimes = {"localhost:0": self._local}
            self.missing: dict = {}
            default_task = ("localhost", 0)
        else:
            self._local = None
            server, self.runtimes, self.missing = connect(target)
            default_task = (server.job_name, server.task_index)

            _server_sessions.add(self)
        self._server = None if target == "" else server
        self._aborted = self._has_run = False
        self.default_task = f"{default_task[0]}:{default_task[1]}"  # where unplaced ops run
        self.hardware = self.runtimes[self.default_task].machine.hardware
        visible = self.runtimes  # TF: with device_filters, the matching tasks only
        if self.config.device_filters:
            visible = {name: rt for name, rt in self.runtimes.items() if name ==
                       self.default_task or _matches(name, self.config.device_filters)}
        self._placer = Placer(visible, default_task, self.config.allow_soft_placement,
                              self.config.log_device_placement)
        self.master = Master(self.default_task)  # TF's master session of this session
        self.closed = False
        self._in_flight: set = set()  # the MasterRuns of this session's runs now waiting
        self._last = threading.local()  # each thread (a queue runner's too) sees its own
        self.run_count = 0

    # -- TF's API ----------------------------------------------------------------------------

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Run the ops needed for ``fetches``; returns their values in the same structure."""
        if self._aborted:
            raise _aborted(self)
        if self.closed:
            raise RuntimeError("Attempted to use a closed Session.")  # TF's class, too
        self._has_run = True  # TF's master session exists from the first run on
        leaves: list = []
        build = _flatten(fetches, leaves, self.graph)
        feeds = self._feeds(feed_dict or {})
        tensors = [t for leaf in leaves for t in _tensors_of(leaf)]
        targets = [leaf for leaf in leaves if isinstance(leaf, Operation)]
        ops = self._needed(tensors, targets, feeds)
        self._check_runtimes()
        options = _run_options(options)
        placement = self._placer.place(self.graph.get_operations())
        client = current_client()
        plan = self.master.client_graph(ops, placement, list(feeds), tensors, targets,
                                        self.runtimes[self.default_task].devices()[0])
        stats = StepStats() if options.trace_level > RunOptions.NO_TRACE else None
        pool = options.inter_op_thread_pool
        pools = self._local.local_pools if self._local is not None else [0]
        if not -1 <= pool < len(pools):  # TF's message
            raise InvalidArgumentError(f"Invalid inter_op_thread_pool: {pool}")
        run = MasterRun(plan, feeds, [t for t in tensors],
                        options.timeout_in_ms or self.config.operation_timeout_in_ms,
                        pool=pool,
                        daemon=client is not None and client.daemon, step_stats=stats)
        world = self.world()
        in_client = client is not None
        if in_client and client.world is not world:
            raise InvalidArgumentError(
                f"client {client.name!r} runs in another simulation than this session's: a "
                "client of simulate_clients uses sessions on the cluster's servers "
                "(Session(server.target), not a local Session())")
        if not in_client and threading.current_thread() is not threading.main_thread():
            raise InvalidArgumentError(
                f"Session.run from the Python thread {threading.current_thread().name!r}, "
                "which simdist does not schedule: simulated time has one clock, so threads "
                "that run sessions must be simulated ones (tf.train.QueueRunner, "
                "tf.simulate_clients), not threading.Thread")
        marks = None if in_client else world.stream_marks()
        if in_client:
            client.task = client.task or self.default_task
            client.run = run
        self._in_flight.add(run)
        try:
            world.wait(run.start(world.tasks))
        finally:
            self._in_flight.discard(run)
            if in_client:
                client.run = None
        self._last.run = run.finish(None if in_client else world.trace_since(marks))
        if run.error is not None:
            raise run.error
        self.run_count += 1
        if run_metadata is not None:
            if stats is not None:
                run_metadata.step_stats = stats
            if options.output_partition_graphs:
                run_metadata.partition_graphs = list(plan.partition_graphs)
        values = self.last_run.values
        return build([_value(leaf, values) for leaf in leaves])

    def world(self):
        """The simulation this session's runs advance (``world.py``)."""
        return world_of(self.runtimes, self.hardware, self if self._local is not None else None)

    @property
    def last_run(self):
        """The ``SessionRun`` of this thread's last ``run`` of this session."""
        return getattr(self._last, "run", None)

    @property
    def last_trace(self):
        return None if self.last_run is None else self.last_run.trace

    @property
    def last_placement(self) -> dict[str, str]:
        """{op name: device} of every op placed so far."""
        return {op.name: device for op, device in self._placer.placed.items()}

    @property
    def placement_log(self) -> list[str]:
        """The log_device_placement lines, whether or not they were printed."""
        return list(self._placer.log_lines)

    def list_devices(self) -> list[str]:
        return self._placer.all_devices()

    def close(self):
        """Close the session: the runs other simulated threads wait on in it are cancelled
        (TF's CancelledError: a local session's blocked op says so, "Dequeue operation was
        cancelled"; a server's master ends the step, "Step was cancelled by an explicit call
        to `Session::Close()`.")."""
        if self._aborted:  # TF: the server has forgotten the session
            raise _aborted(self)
        for run in list(self._in_flight):
            run.abort(run.close_error(local=self._local is not None))
        if current_client() is not None:  # a simulated thread: the others go on running
            self.closed = True
            return
        if self._local is not None and not self.closed:
            self._local.close()
            world = getattr(self, "_world", None)
            if world is not None:
                world.close()
        self.closed = True

    def as_default(self):
        return _DefaultSession(self)

    def __enter__(self):
        _default_sessions().append(self)
        return self

    def __exit__(self, *exc):
        _default_sessions().remove(self)
        self.close()

    @staticmethod
    def reset(target, containers=None, config=None):
        """Free the resources of ``containers`` (all when None) on every task of the
        cluster that ``target`` serves (their variables become uninitialized) and close
        every session on ``target`` that has run (TF's master sessions; one that has not
        run has none): as in TF, their next ``run`` (or ``close``) is an ``AbortedError``.
        Returns None."""
        if target == "":
            raise InvalidArgumentError("Session.reset needs a server target such as "
                                       "'grpc://localhost:2222': a local session's variables "
                                       "are freed when the session closes")
        if not isinstance(target, str) or not target.startswith("grpc://"):
            from simdist.base.errors import NotFoundError  # TF: no session factory for it
            raise NotFoundError("No session factory registered for the given session "
                                f'options: {{target: "{target}"}} Registered factories are '
                                "{GRPC_SESSION, DIRECT_SESSION}.")
        server, runtimes, _ = connect(target)
        for runtime in runtimes.values():
            runtime.resources.reset(containers)
        for session in list(_server_sessions):
            if session._server is server and session._has_run and not session.closed:
                session.closed = session._aborted = True
                _server_sessions.discard(session)

    # -- helpers -------------------------------------------------------------------------------

    def _feeds(self, feed_dict) -> dict:
        feeds = {}
        for key, value in feed_dict.items():
            tensor = _lookup(key, self.graph) if isinstance(key, str) else key
            if isinstance(tensor, Variable):
                tensor = tensor._as_tensor()
            if not isinstance(tensor, Tensor):
                raise InvalidArgumentError(f"feed_dict key {key!r} is not a tensor: feed "
                                           "tensors such as placeholders")
            if tensor.graph is not self.graph:
                raise InvalidArgumentError(f"cannot feed {tensor.name!r}: it is not an element "
                                           "of this session's graph")
            try:
                array = np.asarray(value, dtype=tensor.dtype.as_numpy_dtype)
            except (TypeError, ValueError):
                raise InvalidArgumentError(
                    f"cannot feed {value!r} to tensor {tensor.name!r} of dtype "
                    f"{tensor.dtype.name}") from None
            shape = tensor.shape
            if shape is not None and (array.ndim != len(shape) or any(
                    d is not None and d != a for d, a in zip(shape, array.shape))):
                raise InvalidArgumentError(
                    f"Cannot feed value of shape {tuple(array.shape)} for Tensor "
                    f"'{tensor.name}', which has shape '{format_shape(shape)}'")
            feeds[tensor] = array
        return feeds

    def _needed(self, tensors, targets, feeds) -> list[Operation]:
        needed = set()
        stack = [t.op for t in tensors if t not in feeds] + list(targets)
        while stack:
            op = stack.pop()
            if op in needed:
                continue
            if op.graph is not self.graph:
                raise InvalidArgumentError(f"fetch {op.name!r} is not an element of this "
                                           "session's graph")
            needed.add(op)
            stack.extend(t.op for t in op.inputs if t not in feeds)
            stack.extend(op.control_inputs)
        for op in needed:
            if op.type == "Placeholder" and op.outputs[0] not in feeds:
                raise placeholder_not_fed(op)
        return sorted(needed, key=lambda o: o._id)

    def _check_runtimes(self):
        for op in self.graph.get_operations():
            job = op.device.split("/job:")[1].split("/")[0] if "/job:" in op.device else None
            task = op.device.split("/task:")[1].split("/")[0] if "/task:" in op.device else "0"
            if job and f"{job}:{task}" in self.missing:
                name = f"{job}:{task}"
                raise UnavailableError(
                    f"op {op.name!r} is placed on /job:{job}/task:{task}, but no server runs "
                    f"that task (address {self.missing[name]}): start "
                    f"Server(cluster, {job!r}, {task}) first")
        for runtime in self.runtimes.values():
            if runtime is None or runtime.closed:
                raise UnavailableError("a server of this session's cluster was stopped")


def _matches(task: str, filters) -> bool:
    job, index = task.split(":")
    for text in filters:
        spec = DeviceSpec.from_string(text)
        if spec.job in (None, job) and spec.task in (None, int(index)):
            return True
    return False


def _run_options(options) -> RunOptions:
    if options is None:
        return RunOptions()
    if not isinstance(options, RunOptions):
        raise InvalidArgumentError(f"Session.run options={options!r}: expected a "
                                   "tf.RunOptions")
    return options


def _aborted(session) -> AbortedError:
    return AbortedError(f"Session on {session.target} is not found: Session.reset("
                        f"{session.target!r}) closed it (open a new Session)")


class _DefaultSession:
    def __init__(self, session):
        self.session = session

    def __enter__(self):
        _default_sessions().append(self.session)
        return self.session

    def __exit__(self, *exc):
        _default_sessions().remove(self.session)


def _lookup(name: str, graph: Graph):
    return graph.get_tensor_by_name(name) if ":" in name else graph.get_operation_by_name(name)


def _flatten(fetches, leaves: list, graph):
    """Collect the leaves of a fetch structure; returns a function rebuilding it from values."""
    if isinstance(fetches, (list, tuple)):
        parts = [_flatten(f, leaves, graph) for f in fetches]
        kind = type(fetches)
        return lambda values: kind(part(values) for part in parts)
    if isinstance(fetches, dict):
        parts = {k: _flatten(f, leaves, graph) for k, f in fetches.items()}
        return lambda values: {k: part(values) for k, part in parts.items()}
    leaf = fetches
    if isinstance(leaf, str):
        leaf = _lookup(leaf, graph)
    if isinstance(leaf, Variable):
        leaf = leaf._as_tensor()
    if not isinstance(leaf, (Tensor, Operation, IndexedSlices)):
        raise InvalidArgumentError(
            f"Fetch argument {fetches!r} has invalid type {type(fetches).__name__}, must be a "
            "string or Tensor (or Operation, Variable, IndexedSlices, list, tuple or dict)")
    position = len(leaves)
    leaves.append(leaf)
    return lambda values: values[position]


def _tensors_of(leaf) -> list[Tensor]:
    if isinstance(leaf, IndexedSlices):  # dense_shape may be None, as in TF
        return [t for t in (leaf.values, leaf.indices, leaf.dense_shape) if t is not None]
    return [leaf] if isinstance(leaf, Tensor) else []


def _value(leaf, values):
    if isinstance(leaf, Operation):
        return None
    if isinstance(leaf, IndexedSlices):
        return IndexedSlicesValue(*(values[t] for t in _tensors_of(leaf)))
    value = values[leaf]
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value
