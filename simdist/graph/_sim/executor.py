"""Models TF's executor: runs the placed subgraph of one ``Session.run`` in simulated time.

Every op is a process on its task: it waits for its inputs and control inputs, takes a
thread of the task's inter-op pool, runs its numpy kernel, and occupies its device's stream
for the time the roofline cost model gives (one op at a time per device; a CPU op is spread
over the intra-op threads). Every edge between two devices is a Send/Recv pair: inside a
task over the machine's link (PCIe for a GPU, shared memory between CPU devices), between
tasks over the network with ``ctx.send`` / ``ctx.recv``. Both appear in the trace.

A kernel may block (TF's asynchronous kernels: a queue's dequeue, an accumulator's take):
it returns a generator, which runs as a simulated process that waits on the runtime's
resources (``simdist.sim.resources``) while other ops, sessions and tasks go on; the op gives
its inter-op thread back meanwhile, as an AsyncOpKernel does.

A run starts in the simulation of its job (``world.py``), next to whatever else runs there
(other clients' runs, queue runners), and ends when its last op has.
"""

from __future__ import annotations

import inspect

import numpy as np

from simdist.hardware.device_spec import DeviceSpec
from simdist.sim.core import Interrupt
from simdist.base.errors import (CancelledError, DeadlineExceededError, OutOfRangeError,
                                 UnavailableError)
from simdist.sim.network import EXECUTOR_FLOW_SPACE, flow_id
from simdist.sim.payloads import Phantom
from simdist.sim.resources import Pool
from simdist.graph.graph import Tensor
from simdist.graph.registry import REF_INPUT_OPS, op_def
from simdist.graph.variables import Ref


class SimTasks:
    """The simulated TF tasks of one simulation: each one's context (its device streams and
    ports) and inter-op thread pool, shared by every ``Session.run`` of that simulation."""

    def __init__(self, runtimes: dict):
        self.runtimes = runtimes
        self.contexts: dict = {}
        self.pools: dict[str, Pool] = {}
        self.runs = 0

    def add(self, ctx):
        runtime = self.runtimes[ctx.name]
        self.contexts[ctx.name] = ctx
        self.pools[ctx.name] = Pool(ctx.env, runtime.inter_op_threads(), "inter-op thread")


def _lane(device: str) -> str:
    spec = DeviceSpec.from_string(device)
    return f"{spec.device_type}:{spec.device_index}"


def _task(device: str) -> str:
    spec = DeviceSpec.from_string(device)
    return f"{spec.job}:{spec.task}"


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
        self.values, self.trace = values, trace
        self.start_time, self.end_time = start_time, end_time
        self.peak_memory = peak_memory

    @property
    def duration(self) -> int:
        """How long the run took, ns."""
        return self.end_time - self.start_time


class Executor:
    """Runs ``ops`` (topologically sorted, all placed) once."""

    def __init__(self, ops, placement, runtimes, feeds, fetches, timeout_ms: int = 0,
                 daemon: bool = False):
        self.ops, self.placement, self.runtimes = ops, placement, runtimes
        self.daemon = daemon  # a run of a daemon thread: it may be left waiting at the end
        self.feeds, self.fetches = feeds, fetches
        self.timeout_ns = timeout_ms * 1_000_000  # ConfigProto.operation_timeout_in_ms
        self.tags: dict = {}
        self.values: dict = {}
        self.state = None
        self.run_id = None  # the run's number in its world: it tags its messages
        self.procs: list = []  # every process of the run
        self.blocking: dict = {}  # op process -> the KernelContext of its waiting kernel
        self.error = None  # the first error of the run, raised by the session

    def start(self, tasks: SimTasks):
        """Start this run inside a running simulation; returns the event of its end."""
        self.tasks = tasks
        tasks.runs += 1
        self.run_id = tasks.runs
        contexts = [tasks.contexts[name] for name in self.runtimes]
        self.start_time = contexts[0].now
        procs = [ctx.process(self._main(ctx), name=f"Session.run {self.run_id}",
                             daemon=self.daemon) for ctx in contexts]
        return contexts[0].env.all_of(procs)

    def finish(self, trace=None) -> SessionRun:
        """The result of the run, once it has ended (``trace``: what happened meanwhile); a
        failed run has no values (the session raises ``error``)."""
        values = {} if self.error is not None else {t: self._value_of(t) for t in self.fetches}
        peak = {d: a.peak for rt in self.runtimes.values() for d, a in rt.allocators.items()}
        end = self.tasks.contexts[next(iter(self.runtimes))].now
        return SessionRun(values, trace, self.start_time, end, peak)

    def _value_of(self, tensor):
        if tensor in self.feeds:
            return self.feeds[tensor]
        value = self.values[(tensor, self.placement[tensor.op])]
        return value.read(tensor.op) if isinstance(value, Ref) else value

    # -- the simulated program of every task ------------------------------------------------

    def _setup(self, env):
        self.done = {op: env.event(desc=f"op {op.name}") for op in self.ops}
        self.arrived: dict = {}
        self.pending_uses: dict = {}
        needed = set(self.ops)
        self.remote_in: dict = {name: [] for name in self.runtimes}
        for op in self.ops:
            device = self.placement[op]
            for t in op.inputs:
                if t in self.feeds:
                    continue
                src = self.placement[t.op]
                key = (t, src)
                self.pending_uses[key] = self.pending_uses.get(key, 0) + 1
                if src != device and (t, device) not in self.arrived:
                    self.arrived[(t, device)] = env.event(desc=f"Recv {t.name} on {device}")
                    if _task(src) != _task(device):
                        self.remote_in[_task(device)].append((t, src, device))
            for c in op.control_inputs:
                if c in needed and _task(self.placement[c]) != _task(device) \
                        and (c, _task(device)) not in self.arrived:
                    self.arrived[(c, _task(device))] = env.event(desc=f"control {c.name}")
                    self.remote_in[_task(device)].append((c, self.placement[c], device))
        self.state = env

    def _main(self, ctx):
        if self.state is None:
            self._setup(ctx.env)
        procs = [ctx.process(self._guarded(self._recv(ctx, item, src, dst)),
                             name=f"Recv {item.name}", daemon=self.daemon)
                 for item, src, dst in self.remote_in[ctx.name]]
        procs += [ctx.process(self._guarded(self._run_op(ctx, op)), name=op.name,
                              daemon=self.daemon)
                  for op in self.ops if _task(self.placement[op]) == ctx.name]
        self.procs += procs
        if procs:
            yield ctx.env.all_of(procs)

    def _tag(self, item, dst) -> str:
        return f"{item.name} -> {dst} (run {self.run_id})"

    def _recv(self, ctx, item, src, dst):
        is_tensor = isinstance(item, Tensor)
        msg = yield ctx.recv(_task(src), self._tag(item, dst if is_tensor else _task(dst)))
        if is_tensor:
            value = msg.payload if not isinstance(msg.payload, Phantom) else \
                self.values[(item, src)]
            self.values[(item, dst)] = value
            lane = _lane(dst) + " recv"
            ctx.span(lane, f"Recv {item.name}", "recv", msg.sent_at, ctx.now - msg.sent_at,
                     bytes=msg.nbytes, src=src)
            self.arrived[(item, dst)].succeed()
        else:
            self.arrived[(item, _task(dst))].succeed()

    def _run_op(self, ctx, op):
        device = self.placement[op]
        runtime = self.runtimes[ctx.name]
        waits = []
        for t in op.inputs:
            if t in self.feeds:
                continue
            src = self.placement[t.op]
            waits.append(self.done[t.op] if src == device else self.arrived[(t, device)])
        for c in op.control_inputs:
            if c not in self.done:
                continue
            same = _task(self.placement[c]) == ctx.name
            waits.append(self.done[c] if same else self.arrived[(c, ctx.name)])
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
            value = self.feeds[t] if t in self.feeds else self.values[(t, device)]
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
            for dst in sorted({self.placement[c] for c in t.consumers_list
                               if c in self.done and t not in self.feeds}):
                if dst == device:
                    continue
                if _task(dst) == ctx.name:
                    self._transfer_in_task(ctx, t, device, dst)
                else:
                    value = self.values[(t, device)]
                    payload = value if isinstance(value, np.ndarray) else Phantom(_nbytes(value))
                    ctx.send(_task(dst), self._tag(t, dst), payload)
                    lane = _lane(device) + " send"
                    ctx.span(lane, f"Send {t.name}", "send", ctx.now, 0, bytes=_nbytes(value),
                             dst=dst)
        for task in sorted({_task(self.placement[c]) for c in self.ops if op in c.control_inputs}):
            if task != ctx.name:
                ctx.send(task, self._tag(op, task), None)

    def _transfer_in_task(self, ctx, tensor, src, dst):
        """A Send/Recv pair between two devices of one task, over the machine's link (PCIe
        when a GPU takes part, shared memory between CPU devices): ``ctx.transfer``."""
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
            tag = self.tags.setdefault((tensor, dst), len(self.tags))
            ctx.tracer.flow(ctx.name, flow_id(EXECUTOR_FLOW_SPACE, tag), f"{tensor.name}",
                            "message", ctx.name, src_lane, start, ctx.name, dst_lane, arrival,
                            {"bytes": nbytes})
            ctx.timeout(arrival - ctx.now).callbacks.append(lambda event: delivered())

        def delivered():
            self.values[(tensor, dst)] = value
            self.arrived[(tensor, dst)].succeed()
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


class KernelContext:
    """What a kernel may ask of the runtime (TF's OpKernelContext): the resource manager of
    its op's task, and, for a kernel that blocks, the simulation it waits in and the run's
    deadline (``operation_timeout_in_ms``)."""

    def __init__(self, runtime, ctx, deadline: int | None = None):
        self.runtime, self.ctx, self.deadline = runtime, ctx, deadline
        self.pending = None  # (store, request) while the kernel waits on a resource

    @property
    def env(self):
        return self.ctx.env

    def resources(self, op):
        return self.runtime.resources

    def wait(self, store, request, op):
        """Wait for ``request`` (a put or get of ``store``) and return its value; past the
        run's deadline it is withdrawn: TF's DeadlineExceededError. A closed store's errors
        name the op, as TF's do."""
        self.pending = (store, request)
        try:
            if self.deadline is not None and not request.triggered:
                timer = self.env.timeout(max(0, self.deadline - self.env.now))
                try:
                    yield self.env.any_of([request, timer])
                finally:
                    timer.cancel()
                if not request.triggered:
                    store.cancel(request, DeadlineExceededError(
                        "Timed out waiting for notification"))
            return (yield request)
        except (OutOfRangeError, CancelledError) as error:
            raise type(error)(f"{error}\n\t [[{{{{node {op.name}}}}}]]") from None
        finally:
            self.pending = None

    def record_size(self, store):
        """The store's size as a counter in the trace ("queue NAME")."""
        self.ctx.counter(f"queue {store.name}", size=len(store))

    def record(self, lane: str, name: str, **args):
        """An instant in the trace, on ``lane`` of the op's task (e.g. a dropped gradient)."""
        self.ctx.instant(lane, name, "event", **args)
