"""Models TF's Executor: one task's partition graphs of one step, run in simulated time.

A worker (``worker.py``) builds its partitions from the GraphDefs the master registered and
runs them once per RunGraph request. Every node is a process on the task: an op waits for
its inputs and control inputs, takes a thread of the task's inter-op pool, runs its numpy
kernel, and occupies its device's stream for the time the roofline cost model gives (one op
at a time per device; a CPU op is spread over the intra-op threads). A ``_Send``/``_Recv``
pair between two devices of the task is a copy over the machine's link (PCIe for a GPU,
shared memory between CPU devices); between tasks a ``_Send`` is a message tagged with the
rendezvous name and the step, which the ``_Recv`` takes from its task's rendezvous. A
client-terminated ``_Recv`` is a fed value, a client-terminated ``_Send`` a fetched one.

A kernel may block (TF's asynchronous kernels: a queue's dequeue, an accumulator's take):
it returns a generator, which runs as a simulated process that waits on the runtime's
resources (``simdist.sim.resources``) while other ops, sessions and tasks go on; the op gives
its inter-op thread back meanwhile, as an AsyncOpKernel does.
"""

from __future__ import annotations

import inspect

import numpy as np

from simdist.base.errors import CancelledError, UnavailableError
from simdist.hardware.device_spec import DeviceSpec
from simdist.sim.core import Interrupt
from simdist.sim.network import EXECUTOR_FLOW_SPACE, flow_id
from simdist.sim.payloads import Phantom
from simdist.sim.resources import Pool
from simdist.graph.registry import REF_INPUT_OPS, op_def
from simdist.graph.variables import Ref
from simdist.graph._sim.kernel_context import KernelContext
from simdist.graph._sim.master import task_of

SEND_RECV = ("_Send", "_Recv")


class SimTasks:
    """The simulated TF tasks of one simulation on this rank: each one's context (its device
    streams and ports), inter-op thread pool and worker service, shared by every
    ``Session.run`` of that simulation."""

    def __init__(self, runtimes: dict):
        self.runtimes = runtimes
        self.contexts: dict = {}
        self.pools: dict[str, Pool] = {}
        self.workers: dict = {}  # task -> its WorkerService (worker.py)
        self.steps: dict[str, int] = {}  # master task -> steps it started
        self.graphs: dict[str, int] = {}  # master task -> graph handles it gave
        self.registered: set = set()  # (handle, task): registered with that task's worker

    def add(self, ctx):
        from simdist.graph._sim.worker import WorkerService

        runtime = self.runtimes[ctx.name]
        self.contexts[ctx.name] = ctx
        pools = [Pool(ctx.env, size, "inter-op thread") for size in runtime.inter_op_pools()]
        self.pools[ctx.name] = pools[0]
        self.workers[ctx.name] = WorkerService(ctx, runtime, pools)

    def handle(self, plan) -> str:
        """The graph handle of ``plan`` in this simulation (TF's, given at RegisterGraph):
        its master task's count of the plans it registered."""
        handle = plan.handles.get(self)
        if handle is None:
            self.graphs[plan.master] = count = self.graphs.get(plan.master, 0) + 1
            handle = plan.handles[self] = f"{plan.master} graph {count}"
        return handle


def lane_of(device: str) -> str:
    spec = DeviceSpec.from_string(device)
    return f"{spec.device_type}:{spec.device_index}"


def nbytes_of(value) -> int:
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
    """Runs the partitions ``graph`` (a ``worker.RegisteredGraph``) of one task for step
    ``step``: ``feeds`` {tensor name: value} for the client's ``_Recv`` nodes; after the
    run, ``fetched`` {tensor name: value} holds what the client's ``_Send`` nodes got,
    ``stats`` the nodes' times (when ``trace``) and ``error`` the first error."""

    def __init__(self, worker, graph, step: str, deadline: int | None, daemon: bool,
                 feeds: dict | None = None, trace: bool = False, pool=None):
        self.worker, self.graph, self.step = worker, graph, step
        self.ctx, self.runtime = worker.ctx, worker.runtime
        self.pool = worker.pool if pool is None else pool  # its inter-op threads
        self.deadline, self.daemon, self.feeds = deadline, daemon, feeds or {}
        env = self.ctx.env
        self.done = {op: env.event(desc=f"op {op.name}") for op in graph.ops}
        self.values: dict = {}  # imported Tensor -> its value on this task
        self.pending_uses = dict(graph.uses)
        self.local: dict = {}  # tensor name -> event of a copy between this task's devices
        self.fetched: dict = {}
        self.stats = [] if trace else None
        self.error = None
        self.procs: list = []
        self.blocking: dict = {}  # op process -> the KernelContext of its waiting kernel
        self.tags: dict = {}

    def run(self):
        """The task's part of the step: a process per node; ends when all have ended."""
        ctx = self.ctx
        self.procs = [ctx.process(self._guarded(self._node(op)), name=op.name,
                                  daemon=self.daemon) for op in self.graph.ops]
        if self.procs:
            yield ctx.env.all_of(self.procs)
        for name, (value, tensor) in self.fetched.items():  # a variable: its value at the end
            self.fetched[name] = value.read(tensor.op) if isinstance(value, Ref) else value

    def _node(self, op):
        waits = [self.done[t.op] for t in op.inputs] + [self.done[c] for c in op.control_inputs]
        if waits:
            yield self.ctx.env.all_of(waits)
        if op.type == "_Recv":
            yield from self._recv(op)
        elif op.type == "_Send":
            self._send(op)
        else:
            yield from self._run_op(op)
        self.done[op].succeed()

    # -- _Recv and _Send -----------------------------------------------------------------

    def _recv(self, op):
        attr, ctx = self.graph.nodes[op.name].attr, self.ctx
        name = attr["tensor_name"]
        if attr["client_terminated"]:  # a fed value
            self.values[op.outputs[0]] = self.feeds[name]
            return
        if task_of(attr["send_device"]) == ctx.name:  # a copy between two devices here
            value = yield self._local_event(name)
        else:
            tag = f"{name} ({self.step})"
            msg = yield self.worker.rendezvous.get((task_of(attr["send_device"]), tag),
                                                   f"Recv {attr['_item']} ({self.step})")
            value = self.worker.payload_value(msg, attr["_item"])
            if op.outputs:
                dst = attr["recv_device"]
                ctx.span(lane_of(dst) + " recv", f"Recv {attr['_item']}", "recv", msg.sent_at,
                         ctx.now - msg.sent_at, bytes=msg.nbytes, src=attr["send_device"],
                         key=name)
                self._stat(dst, op.name, "_Recv", msg.sent_at, ctx.now)
        if op.outputs:
            self.values[op.outputs[0]] = value

    def _local_event(self, name: str):
        event = self.local.get(name)
        if event is None:
            event = self.local[name] = self.ctx.env.event(desc=f"Recv {name} ({self.step})")
        return event

    def _send(self, op):
        attr, ctx = self.graph.nodes[op.name].attr, self.ctx
        tensor = op.inputs[0] if op.inputs else None
        value = None if tensor is None else self.values[tensor]
        if attr["client_terminated"]:  # a fetched value
            self.fetched[attr["tensor_name"]] = (value, tensor)
            return
        dst = attr["recv_device"]
        if task_of(dst) == ctx.name:
            if tensor is None:
                self._local_event(attr["tensor_name"]).succeed()
            else:
                self._transfer_in_task(op, attr, value)
            return
        tag = f"{attr['tensor_name']} ({self.step})"
        if tensor is None:  # a control edge
            ctx.send(task_of(dst), tag, None)
            return
        if isinstance(value, Ref) and not attr.get("_by_reference"):
            value = value.read(attr["_reader"])  # TF's Send reads the variable now
        ctx.send(task_of(dst), tag, self.worker.payload_of(value, tag))
        device = attr["send_device"]
        ctx.span(lane_of(device) + " send", f"Send {attr['_item']}", "send", ctx.now, 0,
                 bytes=nbytes_of(value), dst=dst, key=attr["tensor_name"])
        self._stat(device, op.name, "_Send", ctx.now, ctx.now)

    def _transfer_in_task(self, op, attr, value):
        """A Send/Recv pair between two devices of one task, over the machine's link (PCIe
        when a GPU takes part, shared memory between CPU devices): ``ctx.transfer``."""
        ctx, src, dst, item = self.ctx, attr["send_device"], attr["recv_device"], attr["_item"]
        gpu = "GPU" in src or "GPU" in dst
        link = self.runtime.machine.gpu_link if gpu else self.runtime.machine.host_link
        nbytes = nbytes_of(value)
        recv_name = self.graph.recv_of[attr["tensor_name"]]

        def arrived(start, ser, rx_start, arrival):
            src_lane, dst_lane = lane_of(src) + " send", lane_of(dst) + " recv"
            ctx.span(src_lane, f"Send {item}", "send", start, ser, bytes=nbytes,
                     link=link.name, dst=dst)
            ctx.span(dst_lane, f"Recv {item}", "recv", start, arrival - start,
                     bytes=nbytes, link=link.name, src=src)
            self._stat(src, op.name, "_Send", start, start + ser)
            self._stat(dst, recv_name, "_Recv", start, arrival)
            tag = self.tags.setdefault((item, dst), len(self.tags))
            ctx.tracer.flow(ctx.name, flow_id(EXECUTOR_FLOW_SPACE, tag), item, "message",
                            ctx.name, src_lane, start, ctx.name, dst_lane, arrival,
                            {"bytes": nbytes})
            ctx.timeout(arrival - ctx.now).callbacks.append(
                lambda event: self._local_event(attr["tensor_name"]).succeed(value))
        ctx.transfer(link, src, dst, nbytes, arrived)

    # -- ops -------------------------------------------------------------------------------

    def _run_op(self, op):
        ctx, runtime = self.ctx, self.runtime
        held = yield from _take_thread(self.pool)
        try:
            if runtime.down:  # its process died (while the op waited for a thread, too)
                raise UnavailableError(f"task {ctx.name} is unavailable: it failed and has "
                                       f"not restarted (op {op.name})")
            outs = yield from self._compute(op, held)
        finally:
            if held[0]:
                self.pool.release()
        for t, value in zip(op.outputs, outs):
            self.values[t] = value
        self._free_inputs(op)

    def _compute(self, op, held):
        """Run ``op``'s kernel and occupy its device; ``held[0]`` says whether the op holds
        a thread of the inter-op pool (an asynchronous kernel gives it back meanwhile)."""
        ctx, runtime, pool, device = self.ctx, self.runtime, self.pool, op.device
        args = []
        for t in op.inputs:
            value = self.values[t]
            if isinstance(value, Ref) and op.type not in REF_INPUT_OPS:
                value = value.read(op)
            args.append(value)
        definition = op_def(op.type)
        kernel_ctx = KernelContext(runtime, ctx, self.deadline)
        outs = definition.compute(op, args, kernel_ctx)
        if inspect.isgenerator(outs):  # an asynchronous kernel: wait without a thread
            pool.release()
            held[0] = False
            began = ctx.now
            self.blocking[ctx.env.active_process] = kernel_ctx
            outs = yield ctx.process(outs, name=f"{op.name} ({op.type})", daemon=self.daemon)
            del self.blocking[ctx.env.active_process]
            if ctx.now > began:
                ctx.span(lane_of(device) + " waits", op.name, "wait", began, ctx.now - began,
                         type=op.type)
            held[0] = (yield from _take_thread(pool))[0]
        allocator = runtime.allocators.get(device)
        if allocator is not None:
            self._allocate(op, outs, allocator)
        flops = definition.flops(op, args, outs)
        nbytes = sum(nbytes_of(v) for v in list(args) + list(outs))
        if DeviceSpec.from_string(device).device_type == "GPU":
            duration = runtime.machine.gpu_profile.compute_time_ns(flops, nbytes)
        else:
            threads = runtime.intra_op_threads()
            duration = runtime.machine.cpu_profile.compute_time_ns(flops / threads,
                                                                   nbytes // threads)
        lane = lane_of(device)
        start = ctx.occupy(lane, duration)
        cat = "variable" if definition.stateful else "compute"
        ctx.span(lane, op.name, cat, start, duration, type=op.type, flops=flops, bytes=nbytes)
        self._stat(device, op.name, op.type, start, start + duration)
        yield ctx.timeout(start + duration - ctx.now)
        return outs

    def _allocate(self, op, outs, allocator):
        for t, value in zip(op.outputs, outs):
            if isinstance(value, np.ndarray):
                allocator.allocate(value.nbytes, f"output {t.name}", value.shape, t.dtype.name)
        if op.type in REF_INPUT_OPS and op.inputs:
            ref = self.values.get(op.inputs[0])
            persistent = allocator.__dict__.setdefault("persistent", {})
            if isinstance(ref, Ref) and ref.key not in persistent:
                value = ref.resources.lookup(ref.key)
                if value is not None:
                    allocator.allocate(value.nbytes, f"variable {ref.op.name}", value.shape,
                                       str(value.dtype))
                    persistent[ref.key] = value.nbytes

    def _free_inputs(self, op):
        for t in op.inputs:
            if t.op.type in SEND_RECV:
                continue
            self.pending_uses[t] -= 1
            if self.pending_uses[t] == 0 and t.name not in self.graph.fetched:
                allocator = self.runtime.allocators.get(t.op.device)
                value = self.values.get(t)
                if allocator is not None and isinstance(value, np.ndarray):
                    allocator.free(value.nbytes)

    def _stat(self, device, node, op_type, start, end):
        if self.stats is not None:
            self.stats.append([device, node, op_type, start, end])

    # -- a run that fails ------------------------------------------------------------------

    def _guarded(self, body):
        """A node's process: an error ends the task's part of the step, as in TF (the first
        error is the step's; the other processes of the step here are stopped)."""
        try:
            yield from body
        except Interrupt:
            return
        except BaseException as error:  # handed to the master, which raises it
            self.abort(error)

    def blocked_op(self):
        """The op whose kernel waits on a resource (a queue, an accumulator), or None."""
        return next((k.pending_op for k in self.blocking.values() if k.pending is not None),
                    None)

    def abort(self, error):
        """End this part of the step with ``error`` (the first one kept): a waiting kernel's
        request is withdrawn, every other process of the step stopped."""
        if self.error is not None:
            return
        self.error = error
        active = self.ctx.env.active_process
        for proc, kernel_ctx in list(self.blocking.items()):
            if kernel_ctx.pending is not None:  # its kernel waits on a resource: withdraw it
                store, request = kernel_ctx.pending
                store.cancel(request, CancelledError("the run was cancelled: " + str(error)))
        for proc in self.procs:
            if proc.is_alive and proc is not active and proc not in self.blocking:
                proc.interrupt("the run failed")


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
