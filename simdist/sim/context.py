"""TaskContext: what the program of one simulated task sees.

It stands for one TensorFlow task (a process started with a ``TF_CONFIG``, or a
``tf.distribute.Server``): its identity in the cluster, its devices, its random seed, and the
send/recv primitives that TF's runtime uses between tasks. It is passed explicitly to the
task's generator; there are no module-level globals.
"""

from __future__ import annotations

from collections import deque
from types import MethodType

import numpy as np

from simdist.hardware.cluster import (ClusterSpec, ClusterSpecError, TaskId, UnknownTaskError,
                                      chief_task)
from simdist.sim.bulletin import Bulletin
from simdist.sim.core import PENDING, Environment, Event, Timeout
from simdist.hardware.devices import Hardware
from simdist.base.errors import InvalidArgumentError, brief
from simdist.sim.flows import FlowJoin
from simdist.sim.network import MessageHeader, flow_id, new_header
from simdist.sim.payloads import Message, Phantom, describe_payload, payload_nbytes, rebuild_payload
from simdist.sim.resources import Ports
from simdist.trace.schema import Tracer


#: the lane name of a task's host CPU (device None), where e.g. CentralStorage keeps variables
HOST = "host"


class TaskContext:
    """One simulated task: ``ctx.send``, ``ctx.recv``, ``ctx.compute``, ``ctx.timeout``..."""

    def __init__(self, env: Environment, cluster: ClusterSpec, task: TaskId, hardware: Hardware,
                 tracer: Tracer, seed: int, outbox: list, fidelity: str = "message",
                 joins: list | None = None, bulletin: Bulletin | None = None):
        self.env = env
        self.timeout = MethodType(Timeout, env)  # ``timeout`` below, with no frame between
        self.cluster = cluster
        self.task = task
        self.name = task.name
        self.task_type, self.task_id = task.task_type, task.task_id
        self.order = cluster.task_order(task)
        self.hardware = hardware
        self.tracer = tracer
        self._trace = tracer.stream(self.name) if tracer.enabled else None  # this task's records
        self.seed = seed
        self.rng = np.random.default_rng([seed, self.order])
        try:
            self.is_chief = task == chief_task(cluster)
        except ClusterSpecError:  # a cluster without a chief, e.g. {"localhost": 1}
            self.is_chief = False
        self._tasks = cluster.task_tuple()
        self._names = cluster.task_names()
        self._orders: dict = {}
        self._instances: dict = {}
        self._outbox = outbox
        self._seq = 0
        self._inbox: deque[Message] = deque()
        self._waiting: list[Recv] = []
        self._on_delivery = self._delivered  # a Delivery's callback (bound once)
        self._device_free: dict[str, int] = {}
        self._ports = Ports()  # device ports for transfers inside the task
        self._sent = env.succeeded(desc="send")  # yielding it resumes at once
        #: "message" or "flow": how collectives over size-only values are simulated
        self.fidelity = fidelity
        self._joins = joins if joins is not None else []
        self._flows_done = 0
        self._flows: dict = {}  # key -> the event a flow-level collective's member waits on
        self.groups: dict = {}  # what collectives keep about a group of members between calls
        self._bulletin = bulletin if bulletin is not None else Bulletin()

    def __repr__(self):
        return f"TaskContext({self.name})"

    # -- notices to every rank (``bulletin.py``) ---------------------------------------------

    def post(self, key: str) -> int:
        """Tell every rank ``key`` (e.g. "training ended"); its subscribers run at the end
        of this window, returned (events before it still happen, on every rank)."""
        self._bulletin.post(key)
        return self._bulletin.window_end

    def on_notice(self, key: str, callback) -> None:
        """Run ``callback()`` on this rank whenever a task of any rank posts ``key``."""
        self._bulletin.subscribe(key, callback)

    @property
    def now(self) -> int:
        return self.env.now

    @property
    def num_tasks(self) -> int:
        return len(self._tasks)

    def device(self, index: int = 0) -> str:
        """The TF device string of one of this task's devices."""
        kind = self.hardware.device.device_type
        if not 0 <= index < self.hardware.layout.devices_per_task:
            raise InvalidArgumentError(
                f"device index {index} out of range: {self.name} has "
                f"{self.hardware.layout.devices_per_task} {kind} device(s)")
        return f"/job:{self.task_type}/replica:0/task:{self.task_id}/device:{kind}:{index}"

    # -- processes and time -----------------------------------------------------------------

    def process(self, generator, name: str | None = None, daemon: bool = False):
        """Start another process (a thread of this task, e.g. a QueueRunner); a ``daemon``
        one may be left waiting when the run ends."""
        label = f"{self.name}/{name or getattr(generator, '__name__', 'process')}"
        return self.env.process(generator, name=label, order=self.order, daemon=daemon)

    def timeout(self, delay: int, value=None):
        """An event ``delay`` ns from now (``env.timeout``)."""
        return Timeout(self.env, delay, value)

    def compute(self, name: str, flops: float = 0, nbytes: int = 0, device: int = 0,
                cat: str = "compute", ops: int = 0, **args):
        """Run an op on one of this task's devices; returns the event of its end.

        Duration from the cost model: max(FLOPs / (peak x efficiency), bytes / memory
        bandwidth) + launch overhead (+ ``ops`` x the profile's per-op overhead, when the op
        stands for that many TF ops, plus its shared-core share for each other task of the
        cluster). Ops on one device run one after another (one stream); on ``virtual``
        devices, ops of all the task's devices and its host do.
        """
        self.device(device)  # checks the index
        duration = self.hardware.device.compute_time_ns(flops, nbytes, ops=ops,
                                                        tasks=self.num_tasks)
        return self.busy(device, name, duration, cat, flops=flops, **args)

    def busy(self, device: int | None, name: str, duration: int, cat: str = "host", **args):
        """``duration`` ns of work on a device (None: the host), booked on its stream (on
        ``virtual`` devices, the host's), a span on its lane; the event of its end. What an
        op runs, and a runtime's own overhead."""
        lane = HOST if device is None else self._device_name(device)
        start = self.occupy(HOST if self.hardware.device.virtual else lane, duration)
        self.span(lane, name, cat, start, duration, **args)
        return self.env.timeout(start + duration - self.env.now)

    def host_step(self, step):
        """The host's own work of one training step as its strategy describes it (a
        ``simdist.hardware.host_costs.HostStep``: the Python loop, the input iterator, the
        function call), priced by the profile's ``HostCosts``, a span on the host lane; an
        event (already done when the profile charges nothing)."""
        duration = self.hardware.device.host_costs.step_ns(step)
        if not duration:
            return self.env.timeout(0)
        return self.busy(None, "input + dispatch", duration)

    def occupy(self, lane: str, duration: int) -> int:
        """Book ``duration`` ns on a device's stream (``lane``) after what it runs already;
        returns when the work starts (a device runs one op at a time)."""
        start = max(self.env.now, self._device_free.get(lane, 0))
        self._device_free[lane] = start + duration
        return start

    # -- messages ---------------------------------------------------------------------------

    def resolve(self, task) -> TaskId:
        """A TaskId from "worker:1", TaskId or a task order, with a clear error if absent."""
        if isinstance(task, (int, np.integer)) and not isinstance(task, bool):
            if not 0 <= task < len(self._tasks):
                raise UnknownTaskError(
                    f"task number {task} does not exist: the cluster has {len(self._tasks)} "
                    f"tasks, numbered 0..{len(self._tasks) - 1}")
            return self._tasks[task]
        return self.cluster.task(task)

    def _order_of(self, task) -> int:
        """The task order of "worker:1", a TaskId or an order (cached: send is a hot path)."""
        try:
            return self._orders[task]
        except KeyError:
            order = self._orders[task] = self.cluster.task_order(self.resolve(task))
            return order

    def send(self, dst, tag, payload=None, copy: bool = True, device: int | None = None,
             dst_device: int | None = None) -> Event:
        """Send ``payload`` to task ``dst`` (non-blocking, like a Send op: returns at once).

        Arrival time comes from the cost model: egress queue, link latency and bandwidth,
        ingress queue. ``tag`` is any str or int the receiver can match on. ``device`` and
        ``dst_device`` name the sending and receiving devices (indices of the tasks' devices;
        None is the task's host CPU); between two devices of this task, or a device and the
        host, the message takes the machine's own link (NVLink, PCIe) and never leaves the
        task. The message holds a snapshot of the arrays;
        ``copy=False`` skips it when the caller never changes them afterwards (the
        collectives do that to move large buffers fast).
        """
        dst_order = self._orders.get(dst)
        if dst_order is None:
            dst_order = self._order_of(dst)
        if tag.__class__ is not str and tag.__class__ is not int:
            _check_tag(tag)
        if device is not None or dst_device is not None:  # (None, the host, is the usual)
            self._check_device(device)
            self._check_device(dst_device)
        if dst_order == self.order and device == dst_device:
            raise InvalidArgumentError(
                f"{self.name} sends to itself (tag {tag!r}, device={device}, dst_device="
                f"{dst_device}): send to another task, or between two different devices of "
                "this task (None is the task's host CPU)")
        if payload.__class__ is Phantom:
            nbytes, desc, arrays = payload.nbytes, ("phantom", payload.nbytes, ()), ()
        else:
            desc, arrays = describe_payload(payload)
            if copy:
                arrays = [np.array(a, copy=True) for a in arrays]  # a snapshot, like TF's Send
            desc += (tuple((a.dtype.str, a.shape) for a in arrays),)
            nbytes = payload_nbytes(desc, arrays)
            payload = rebuild_payload(desc, arrays) if copy else payload
        self._seq += 1
        header = new_header((self.env.now, self.order, self._seq, dst_order, tag, nbytes, desc,
                             device, dst_device))
        if dst_order == self.order:
            self._send_between_devices(header, payload)
        else:
            # (header, arrays to move between ranks, the payload as a receiver on this rank sees)
            self._outbox.append((header, arrays, payload))
        return self._sent

    def _check_device(self, device):
        if device is not None and not (isinstance(device, (int, np.integer))
                                       and 0 <= device < self.hardware.layout.devices_per_task):
            raise InvalidArgumentError(
                f"device {device!r} does not exist on {self.name}: it has "
                f"{self.hardware.layout.devices_per_task} device(s), numbered from 0")

    def _send_between_devices(self, header, payload):
        """A message between two devices of this task, over the machine's own link."""
        self.transfer(self.hardware.intra_link, header.src_device, header.dst_device,
                      header.nbytes, lambda *times: self._device_head_arrived(
                          header, payload, *times), seq=header.seq)

    def transfer(self, link, src_port, dst_port, nbytes: int, arrived, seq: int | None = None):
        """Move ``nbytes`` between two ports of this task (its devices, its host) over
        ``link``, with the network's FIFO model kept in the task: the sending port
        serializes in send order, the receiving port in the order first bits arrive.

        When the first bit arrives, ``arrived(tx_start, ser, rx_start, arrival)`` is called
        (``arrival``: of the last bit; ``ser``: serialization ns). ``seq`` orders transfers
        that arrive at the same time (default: a new message number of this task).
        """
        if seq is None:
            self._seq += 1
            seq = self._seq
        start, ser, head_time = self._ports.send(src_port, link, self.env.now, nbytes)
        head = self.env.event(order=self.order)
        head.callbacks.append(lambda event: arrived(
            start, ser, *self._ports.receive(dst_port, self.env.now, ser)))
        head.succeed_at(head_time, self.order, seq)

    def _device_head_arrived(self, header: MessageHeader, payload, tx_start: int, ser: int,
                             start: int, arrival: int):
        head, dst_dev, src_dev = self.env.now, header.dst_device, header.src_device
        if self.tracer.enabled:
            link, tag = self.hardware.intra_link, str(header.tag)
            src_lane = f"{self._device_name(src_dev)} {link.kind} tx"
            dst_lane = f"{self._device_name(dst_dev)} {link.kind} rx"
            args = {"bytes": header.nbytes, "tag": tag, "link": link.name,
                    "queued_ns": start - head + tx_start - header.sent_at}
            self.span(src_lane, f"send {tag} → device {dst_dev}", "send", tx_start, ser, **args)
            self.span(dst_lane, f"recv {tag} ← device {src_dev}", "recv", start, ser, **args)
            self.tracer.flow(self.name, flow_id(self.order + 1, header.seq), tag, "message",
                             self.name, src_lane, tx_start, self.name, dst_lane, arrival,
                             {"bytes": header.nbytes, "sent_at_ns": header.sent_at,
                              "link": link.name})
        self.deliver_at(arrival, header, payload)

    def _device_name(self, device: int | None) -> str:
        if device is None:
            return HOST
        return f"{self.hardware.device.device_type}:{device}"

    def recv(self, src=None, tag=None, src_device=None, device=None, into=None) -> Event:
        """An event that happens when a message from ``src`` (any task if None) with ``tag``
        (any if None) has been delivered to ``device`` of this task (None: to the task
        itself), from ``src_device`` (any if None); its value is the ``Message``.

        ``into`` (a contiguous array; ``src`` and ``tag`` given, and no other message with
        that source and tag) lets a transport that copies the payload between ranks land it
        in that buffer, as MPI's receive buffers do: the payload is then ``into`` itself.
        It is a hint: a payload that does not cross ranks arrives as it was sent.
        """
        src_name = None
        if src is not None:
            order = self._orders.get(src)
            src_name = self._names[self._order_of(src) if order is None else order]
        event = Recv(self, src_name, tag, src_device, device)
        if into is not None and src_name is not None and tag is not None:
            event.into = into
        for msg in self._inbox:
            if event.matches(msg):
                self._inbox.remove(msg)
                return event.succeed(msg)
        self._waiting.append(event)
        return event

    def landing_buffer(self, header: MessageHeader):
        """The ``into`` buffer of the one waiting receive this message will complete, if it
        gave one that fits the payload (a single array of the same dtype and shape)."""
        desc = header.desc
        if desc[0] != "array":
            return None
        src, tag = self._names[header.src], header.tag
        waiting = [w for w in self._waiting
                   if w.src == src and w.tag == tag and w.device == header.dst_device
                   and w.src_device in (None, header.src_device)]
        if len(waiting) != 1 or waiting[0].into is None:
            return None
        into, ((dtype, shape),) = waiting[0].into, desc[-1]
        if into.dtype.str != dtype or into.shape != tuple(shape) or \
                not into.flags.c_contiguous:
            return None
        waiting[0].into = None  # one message per buffer
        return into

    def deliver_at(self, arrival: int, header: MessageHeader, payload):
        """Schedule the delivery of a message at its arrival time (called by the scheduler).

        Deliveries are ordered by (arrival, DELIVERY priority, this task, source task,
        sequence): never by when a transport learned of them.
        """
        sent_at, src, seq, _, tag, nbytes, _, src_device, dst_device = header
        msg = Message(self._names[src], self.name, tag, payload, nbytes, sent_at, arrival, seq,
                      src_device, dst_device)
        self.env.schedule_at(Delivery(self, msg), arrival, src, seq)

    def _delivered(self, event: Event):
        msg = event._value
        waiting = self._waiting
        for i, waiter in enumerate(waiting):
            if waiter.matches(msg):
                del waiting[i]
                waiter.fire(msg)  # it would run next anyway: no URGENT event is left now
                return
        self._inbox.append(msg)

    def join_flow(self, key: tuple, members: int, phases: tuple | None, what: str) -> Event:
        """Join a flow-level collective (``flows.FlowModel``): an event that happens when the
        call ends, its value a ``flows.PhaseSpan`` of each phase. ``key`` is the same on all
        ``members`` members; one of them gives the ``phases``."""
        event = self.env.event(desc=f"{what} (flow level, waiting for its {members} members "
                                    "and its flows)")
        self._flows[key] = event
        self._joins.append(FlowJoin(self.env.now, self.order, key, members, phases, what))
        return event

    def flow_done_at(self, end: int, key: tuple, phases: tuple):
        """Schedule the end of a flow-level collective (called by the scheduler)."""
        event = self._flows.pop(key)
        # after the messages delivered at the same time (source num_tasks follows theirs)
        self._flows_done += 1
        event.succeed_at(end, self.num_tasks, self._flows_done, phases)

    def next_instance(self, kind) -> int:
        """A per-task counter, like TF's collective instance keys: every participant of a
        collective calls collectives in the same order, so they agree on the numbers."""
        self._instances[kind] = self._instances.get(kind, 0) + 1
        return self._instances[kind]

    # -- trace ------------------------------------------------------------------------------

    def span(self, lane: str, name: str, cat: str, start: int, dur: int, **args):
        if self._trace is not None:
            self._trace.span(self.name, lane, name, cat, start, dur, args)

    def instant(self, lane: str, name: str, cat: str = "instant", **args):
        if self._trace is not None:
            self._trace.instant(self.name, lane, name, cat, self.env.now, args)

    def counter(self, name: str, **values):
        if self._trace is not None:
            self._trace.counter(self.name, name, self.env.now, values)


#: what a tag may be made of: the values that travel between MPI ranks unchanged
TAG_TYPES = (str, int, float, bool, type(None), np.integer)


def _check_tag(tag):
    """A tag must cross MPI ranks (it travels in the window's allgather): a str, a number,
    None, or a tuple of them. Refused here, in one process too, with the error MPI runs
    would need."""
    if isinstance(tag, TAG_TYPES):
        return
    if isinstance(tag, tuple):
        for part in tag:
            _check_tag(part)
        return
    raise InvalidArgumentError(
        f"message tag {brief(tag)} of type {type(tag).__name__} cannot travel between MPI "
        "ranks: expected a str, a number, None or a tuple of them")


class Recv(Event):
    """The event ``ctx.recv`` returns (a Recv op waiting for its tensor)."""

    __slots__ = ("ctx", "src", "tag", "src_device", "device", "into")

    def __init__(self, ctx: TaskContext, src, tag, src_device=None, device=None):
        # NOTE: inlined from Event.__init__() for performance (one receive per message)
        self.env = ctx.env
        self.callbacks = []
        self._value = PENDING
        self._ok = True
        self._defused = False
        self._order = ctx.order
        self.desc = None
        self.ctx, self.src, self.tag = ctx, src, tag
        self.src_device, self.device = src_device, device
        self.into = None

    def matches(self, msg: Message) -> bool:
        return ((self.src is None or self.src == msg.src)
                and (self.tag is None or self.tag == msg.tag)
                and self.device == msg.dst_device
                and (self.src_device is None or self.src_device == msg.src_device))

    def __repr__(self):
        src = self.src or "any"
        if self.src_device is not None:
            src += f" device {self.src_device}"
        on = self.ctx.name if self.device is None else f"{self.ctx.name} device {self.device}"
        return f"recv(src={src}, tag={self.tag!r}) on {on}"


class Delivery(Event):
    """A message reaching its receiving task (the moment TF's rendezvous gets the tensor)."""

    __slots__ = ()

    def __init__(self, ctx: TaskContext, msg: Message):
        # NOTE: inlined from Event.__init__() for performance (one delivery per message)
        self.env = ctx.env
        self.callbacks = [ctx._on_delivery]
        self._value = msg
        self._ok = True
        self._defused = False
        self._order = ctx.order
        self.desc = None

    def __repr__(self):
        return f"delivery of {self.value!r}"
