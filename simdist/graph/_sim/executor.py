"""Models TF's workers running the master's partitions of one ``Session.run`` in simulated time.

The master (``master.py``) sends a RunGraph request to every task with a partition and waits
for each one's response; a worker runs its partitions when the request arrives. Every op is
a process on its task: it waits for its inputs and control inputs, takes a thread of the
task's inter-op pool, runs its numpy kernel, and occupies its device's stream for the time
the roofline cost model gives (one op at a time per device; a CPU op is spread over the
intra-op threads). Every edge between two devices is a ``_Send``/``_Recv`` pair: inside a
task over the machine's link (PCIe for a GPU, shared memory between CPU devices), between
tasks a message (``ctx.send`` / ``ctx.recv``) tagged with the edge's rendezvous name and the
step. Both appear in the trace, as does each task's part of the step ("RunGraph" lane).

A kernel may block (TF's asynchronous kernels: a queue's dequeue, an accumulator's take):
it returns a generator, which runs as a simulated process that waits on the runtime's
resources (``simdist.sim.resources``) while other ops, sessions and tasks go on; the op gives
its inter-op thread back meanwhile, as an AsyncOpKernel does.
"""

from __future__ import annotations

import inspect

import numpy as np

from simdist.hardware.device_spec import DeviceSpec
from simdist.sim.core import Interrupt
from simdist.base.errors import CancelledError, UnavailableError
from simdist.sim.network import EXECUTOR_FLOW_SPACE, flow_id
from simdist.sim.payloads import Phantom
from simdist.sim.resources import Pool
from simdist.graph.registry import REF_INPUT_OPS, op_def
from simdist.graph.variables import Ref
from simdist.graph._sim.kernel_context import KernelContext
from simdist.graph._sim.master import task_of as _task

#: the bytes of a RunGraph request or response without tensors (the RPC's header)
RPC_BYTES = 64


class SimTasks:
    """The simulated TF tasks of one simulation: each one's context (its device streams and
    ports) and inter-op thread pool, shared by every ``Session.run`` of that simulation."""

    def __init__(self, runtimes: dict):
        self.runtimes = runtimes
        self.contexts: dict = {}
        self.pools: dict[str, Pool] = {}
        self.steps: dict[str, int] = {}  # master task -> steps it started

    def add(self, ctx):
        runtime = self.runtimes[ctx.name]
        self.contexts[ctx.name] = ctx
        self.pools[ctx.name] = Pool(ctx.env, runtime.inter_op_threads(), "inter-op thread")


def _lane(device: str) -> str:
    spec = DeviceSpec.from_string(device)
    return f"{spec.device_type}:{spec.device_index}"


def _nbytes(value) -> int:
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, Ref):
        return value.nbytes
    return 0


class SessionRun:
    """What one ``Session.run`` gave: values by tensor, the trace of what happened in its job
    meanwhile (None for a run of a ``simulate_clients`` client, whose trace is the whole
    simulation's), its start and end time on the job's clock, and the peak GPU memory."""

    def __init__(self, values, trace, start_time, end_time, peak_memory):
        self.values, self.trace, self.peak_memory = values, trace, peak_memory
        self.start_time, self.end_time = start_time, end_time

    @property
    def duration(self) -> int:
        """How long the run took, ns."""
        return self.end_time - self.start_time


class Executor:
    """Runs the master's plan of one ``Session.run`` (``master.ClientGraph``) once."""

    def __init__(self, graph, runtimes, feeds, fetches, timeout_ms: int = 0,
                 daemon: bool = False, step_stats=None):
        self.graph = graph  # the master's ClientGraph of this kind of run (master.py)
        self.ops, self.placement, self.runtimes = graph.ops, graph.placement, runtimes
        self.client = graph.client_device
        self.step_stats = step_stats  # a StepStats to fill (RunOptions.trace_level), or None
        self.daemon = daemon  # a run of a daemon thread: it may be left waiting at the end
        self.feeds, self.fetches = feeds, fetches
        self.timeout_ns = timeout_ms * 1_000_000  # ConfigProto.operation_timeout_in_ms
        self.tags: dict = {}
        self.values: dict = {}
        self.state = None
        self.step = None  # "master step N": the run's step id, in its messages' tags
        self.procs: list = []  # every process of the run
        self.blocking: dict = {}  # op process -> the KernelContext of its waiting kernel
        self.error = None  # the first error of the run, raised by the session

    def start(self, tasks: SimTasks):
        """Start this run inside a running simulation; returns the event of its end: the
        master has every worker's RunGraph response. Its step id is unique in the job (TF:
        a random 64-bit id): the master task's count of the steps it started."""
        self.tasks = tasks
        master = self.graph.master
        tasks.steps[master] = step = tasks.steps.get(master, 0) + 1
        self.step = f"{master} step {step}"
        self.start_time = tasks.contexts[master].now
        procs = [tasks.contexts[name].process(self._run_graph(tasks.contexts[name]),
                                              name=f"RunGraph ({self.step})",
                                              daemon=self.daemon)
                 for name in self.graph.tasks]
        return procs[0]

    def finish(self, trace=None) -> SessionRun:
        """The result of the run, once it has ended (``trace``: what happened meanwhile); a
        failed run has no values (the session raises ``error``)."""
        values = {} if self.error is not None else {t: self._value_of(t) for t in self.fetches}
        peak = {d: a.peak for rt in self.runtimes.values() for d, a in rt.allocators.items()}
        end = self.tasks.contexts[self.graph.master].now
        return SessionRun(values, trace, self.start_time, end, peak)

    def _value_of(self, tensor):
        if tensor in self.feeds:
            return self.feeds[tensor]
        value = self.values[(tensor, self.client)] if self.placement[tensor.op] == self.client \
            else self.received[self.graph.input_edge(tensor, self.client, None)]
        return value.read(tensor.op) if isinstance(value, Ref) else value

    # -- the simulated program of every task ------------------------------------------------

    def _setup(self, env):
        self.done = {op: env.event(desc=f"op {op.name}") for op in self.ops}
        self.pending_uses: dict = {}
        for op in self.ops:
            for t in op.inputs:
                if t not in self.feeds:
                    key = (t, self.placement[t.op])
                    self.pending_uses[key] = self.pending_uses.get(key, 0) + 1
        self.arrived = {e: env.event(desc=f"Recv {e.tensor_name}") for e in self.graph.edges}
        self.received: dict = {}  # edge -> the value its _Recv got
        self.remote_in: dict = {}  # task -> the edges that reach it from another task
        for e in self.graph.edges:
            if e.crosses_tasks:
                self.remote_in.setdefault(_task(e.dst_device), []).append(e)
        self.state = env

    def _run_graph(self, ctx):
        """One task's part of the step: a worker waits for the master's RunGraph request,
        runs its partitions and answers; the master sends the requests, runs its own
        partitions (and the client's feeds and fetches) and waits for every answer."""
        master, workers = self.graph.master, self.graph.tasks[1:]
        tag = f"RunGraph ({self.step})"
        if ctx.name == master:
            for task in workers:
                ctx.send(task, tag, Phantom(RPC_BYTES))
        else:
            yield ctx.recv(master, tag)
        start = ctx.now
        if self.state is None:
            self._setup(ctx.env)
        yield from self._partitions(ctx)
        ctx.span("RunGraph", f"RunGraph {self.step}", "partition", start, ctx.now - start,
                 devices=", ".join(_lane(d) for d in self.graph.devices()
                                   if _task(d) == ctx.name))
        answer = f"RunGraph response ({self.step})"
        if ctx.name != master:
            ctx.send(master, answer, Phantom(RPC_BYTES))
            return
        for task in workers:
            yield ctx.recv(task, answer)

    def _partitions(self, ctx):
        """Run the partitions of ``ctx``'s task: a process per op and per Recv."""
        procs = [ctx.process(self._guarded(self._recv(ctx, e)), name=e.recv_name,
                             daemon=self.daemon) for e in self.remote_in.get(ctx.name, [])]
        procs += [ctx.process(self._guarded(self._run_op(ctx, op)), name=op.name,
                              daemon=self.daemon)
                  for op in self.ops if _task(self.placement[op]) == ctx.name]
        self.procs += procs
        if ctx.name == self.graph.master:
            for t, value in self.feeds.items():  # the client's _Recv nodes: the fed values
                self.values[(t, self.client)] = value
                self._send_edges(ctx, t, self.client)
        if procs:
            yield ctx.env.all_of(procs)
        if ctx.name == self.graph.master and self.error is None:  # the fetches' _Send nodes
            fetched = [self.arrived[e] for t in self.fetches
                       if (e := self.graph.edge_to.get((t, self.client, None))) is not None]
            if fetched:
                yield ctx.env.all_of(fetched)

    def _tag(self, edge) -> str:
        return f"{edge.tensor_name} ({self.step})"

    def _recv(self, ctx, edge):
        """A ``_Recv`` of a tensor (or a control edge) from another task."""
        msg = yield ctx.recv(_task(edge.src_device), self._tag(edge))
        if not edge.control:
            item, dst = edge.item, edge.dst_device
            value = msg.payload if not isinstance(msg.payload, Phantom) else \
                self.values[(item, edge.src_device)]
            self.received[edge] = value
            lane = _lane(dst) + " recv"
            ctx.span(lane, f"Recv {item.name}", "recv", msg.sent_at, ctx.now - msg.sent_at,
                     bytes=msg.nbytes, src=edge.src_device, key=edge.tensor_name)
            self._stat(dst, edge.recv_name, "_Recv", msg.sent_at, ctx.now)
        self.arrived[edge].succeed()

    def _run_op(self, ctx, op):
        device = self.placement[op]
        runtime = self.runtimes[ctx.name]
        waits = []
        for t in op.inputs:
            if self.graph.source_device(t) != device:
                waits.append(self.arrived[self.graph.input_edge(t, device, op)])
            elif t not in self.feeds:
                waits.append(self.done[t.op])
        for c in op.control_inputs:
            if c in self.done:
                same = self.placement[c] == device
                waits.append(self.done[c] if same else
                             self.arrived[self.graph.input_edge(c, device, None)])
        if waits:
            yield ctx.env.all_of(waits)
        if runtime.down:
            raise UnavailableError(f"task {ctx.name} is unavailable: it failed and has not "
                                   f"restarted (op {op.name})")
        pool = self.tasks.pools[ctx.name]
        held = yield from _take_thread(pool)
        try:
            outs = yield from self._compute(ctx, op, device, runtime, pool, held)
        finally:
            if held[0]:
                pool.release()
        for t, value in zip(op.outputs, outs):
            self.values[(t, device)] = value
        self._free_inputs(op, device, runtime)
        self.done[op].succeed()
        self._send_outputs(ctx, op, device)

    def _compute(self, ctx, op, device, runtime, pool, held):
        """Run ``op``'s kernel and occupy its device; ``held[0]`` says whether the op holds
        a thread of the inter-op ``pool`` (an asynchronous kernel gives it back meanwhile)."""
        args = []
        for t in op.inputs:
            value = self.values[(t, device)] if self.graph.source_device(t) == device else \
                self.received[self.graph.input_edge(t, device, op)]
            if isinstance(value, Ref) and op.type not in REF_INPUT_OPS:
                value = value.read(op)
            args.append(value)
        definition = op_def(op.type)
        deadline = self.start_time + self.timeout_ns if self.timeout_ns > 0 else None
        kernel_ctx = KernelContext(runtime, ctx, deadline)
        outs = definition.compute(op, args, kernel_ctx)
        if inspect.isgenerator(outs):  # an asynchronous kernel: wait without a thread
            pool.release()
            held[0] = False
            began = ctx.now
            self.blocking[ctx.env.active_process] = kernel_ctx
            outs = yield ctx.process(outs, name=f"{op.name} ({op.type})", daemon=self.daemon)
            del self.blocking[ctx.env.active_process]
            if ctx.now > began:
                ctx.span(_lane(device) + " waits", op.name, "wait", began, ctx.now - began,
                         type=op.type)
            held[0] = (yield from _take_thread(pool))[0]
        allocator = runtime.allocators.get(device)
        if allocator is not None:
            self._allocate(op, outs, allocator)
        flops = definition.flops(op, args, outs)
        nbytes = sum(_nbytes(v) for v in list(args) + list(outs))
        spec = DeviceSpec.from_string(device)
        if spec.device_type == "GPU":
            duration = runtime.machine.gpu_profile.compute_time_ns(flops, nbytes)
        else:
            threads = runtime.intra_op_threads()
            duration = runtime.machine.cpu_profile.compute_time_ns(flops / threads,
                                                                   nbytes // threads)
        lane = _lane(device)
        start = ctx.occupy(lane, duration)
        cat = "variable" if definition.stateful else "compute"
        ctx.span(lane, op.name, cat, start, duration, type=op.type, flops=flops, bytes=nbytes)
        self._stat(device, op.name, op.type, start, start + duration)
        yield ctx.timeout(start + duration - ctx.now)
        return outs

    # -- a run that fails ------------------------------------------------------------------

    def _guarded(self, body):
        """An op's (or a Recv's) process: an error ends the whole run, as in TF (the first
        error is the run's; the other processes of the run are stopped)."""
        try:
            yield from body
        except Interrupt:
            return
        except BaseException as error:  # handed to the session, which raises it
            self._fail(error)

    def abort(self, error):
        """End the run with ``error`` from outside (its client's process died)."""
        self._fail(error)

    def _fail(self, error):
        if self.error is not None:
            return
        self.error = error
        active = self.procs[0].env.active_process if self.procs else None
        for proc, kernel_ctx in list(self.blocking.items()):
            if kernel_ctx.pending is not None:  # its kernel waits on a resource: withdraw it
                store, request = kernel_ctx.pending
                store.cancel(request, CancelledError("the run was cancelled: " + str(error)))
        for proc in self.procs:
            if proc.is_alive and proc is not active and proc not in self.blocking:
                proc.interrupt("the run failed")

    def _allocate(self, op, outs, allocator):
        for t, value in zip(op.outputs, outs):
            if isinstance(value, np.ndarray):
                allocator.allocate(value.nbytes, f"output {t.name}", value.shape, t.dtype.name)
        if op.type in REF_INPUT_OPS and op.inputs:
            ref = self.values.get((op.inputs[0], self.placement[op.inputs[0].op]))
            persistent = allocator.__dict__.setdefault("persistent", {})
            if isinstance(ref, Ref) and ref.key not in persistent:
                value = ref.resources.lookup(ref.key)
                if value is not None:
                    allocator.allocate(value.nbytes, f"variable {ref.op.name}", value.shape,
                                       str(value.dtype))
                    persistent[ref.key] = value.nbytes

    def _free_inputs(self, op, device, runtime):
        for t in op.inputs:
            if t in self.feeds:
                continue
            key = (t, self.placement[t.op])
            self.pending_uses[key] -= 1
            if self.pending_uses[key] == 0 and t not in self.fetches:
                allocator = self.runtimes[_task(key[1])].allocators.get(key[1])
                value = self.values.get(key)
                if allocator is not None and isinstance(value, np.ndarray):
                    allocator.free(value.nbytes)

    def _send_outputs(self, ctx, op, device):
        for t in op.outputs:
            self._send_edges(ctx, t, device)
        self._send_edges(ctx, op, device)

    def _send_edges(self, ctx, item, device):
        """The ``_Send`` nodes of ``item`` (a tensor, or an op's control edges) once it is
        ready on ``device``: another task gets a message (a snapshot of the value, as TF's
        Send takes); another device of this task a copy over the machine's link."""
        for edge in self.graph.edges_from.get(item, ()):
            dst = edge.dst_device
            if _task(dst) == ctx.name:
                if edge.control:
                    self.arrived[edge].succeed()
                else:
                    self._transfer_in_task(ctx, edge)
                continue
            if edge.control:
                ctx.send(_task(dst), self._tag(edge), None)
            elif edge.after:  # a read that waits for the reader's control inputs
                self.procs.append(ctx.process(self._guarded(self._read_later(ctx, edge)),
                                              name=edge.send_name, daemon=self.daemon))
            else:
                self._send(ctx, edge)

    def _read_later(self, ctx, edge):
        device = edge.src_device
        yield ctx.env.all_of([self.done[c] if self.placement[c] == device else
                              self.arrived[self.graph.input_edge(c, device, None)]
                              for c in edge.after])
        self._send(ctx, edge)

    def _send(self, ctx, edge):
        """A ``_Send`` to another task: the value now (a variable's, read now)."""
        item, device, dst = edge.item, edge.src_device, edge.dst_device
        value = self.values[(item, device)]
        if isinstance(value, Ref) and edge not in self.graph.by_reference:
            value = value.read(self.graph.first_reader[edge])
        payload = value if isinstance(value, np.ndarray) else Phantom(_nbytes(value))
        ctx.send(_task(dst), self._tag(edge), payload)
        ctx.span(_lane(device) + " send", f"Send {item.name}", "send", ctx.now, 0,
                 bytes=_nbytes(value), dst=dst, key=edge.tensor_name)
        self._stat(device, edge.send_name, "_Send", ctx.now, ctx.now)

    def _stat(self, device, node, op_type, start, end):
        if self.step_stats is not None:
            self.step_stats.record(device, node, op_type, start, end)

    def _transfer_in_task(self, ctx, edge):
        """A Send/Recv pair between two devices of one task, over the machine's link (PCIe
        when a GPU takes part, shared memory between CPU devices): ``ctx.transfer``."""
        tensor, src, dst = edge.item, edge.src_device, edge.dst_device
        runtime = self.runtimes[ctx.name]
        gpu = "GPU" in src or "GPU" in dst
        link = runtime.machine.gpu_link if gpu else runtime.machine.host_link
        value = self.values[(tensor, src)]
        nbytes = _nbytes(value)

        def arrived(start, ser, rx_start, arrival):
            src_lane, dst_lane = _lane(src) + " send", _lane(dst) + " recv"
            ctx.span(src_lane, f"Send {tensor.name}", "send", start, ser, bytes=nbytes,
                     link=link.name, dst=dst)
            ctx.span(dst_lane, f"Recv {tensor.name}", "recv", start, arrival - start,
                     bytes=nbytes, link=link.name, src=src)
            self._stat(src, edge.send_name, "_Send", start, start + ser)
            self._stat(dst, edge.recv_name, "_Recv", start, arrival)
            tag = self.tags.setdefault((tensor, dst), len(self.tags))
            ctx.tracer.flow(ctx.name, flow_id(EXECUTOR_FLOW_SPACE, tag), f"{tensor.name}",
                            "message", ctx.name, src_lane, start, ctx.name, dst_lane, arrival,
                            {"bytes": nbytes})
            ctx.timeout(arrival - ctx.now).callbacks.append(lambda event: delivered())

        def delivered():
            self.received[edge] = value
            self.arrived[edge].succeed()
        ctx.transfer(link, src, dst, nbytes, arrived)


def _take_thread(pool):
    """Wait for a thread of ``pool``; returns [True] (the op now holds it). A process stopped
    while it waits gives the thread back as soon as it is granted."""
    request = pool.acquire()
    try:
        yield request
    except Interrupt:
        pool.cancel(request)
        raise
    return [True]
