"""Models TF's master (``MasterSession``): the graph of one ``Session.run``, cut into parts.

A client's ``Session.run`` goes to the master of its target (the session's own task, or the
local process). The master prunes the graph to what the fetches and targets need, rewrites
feeds and fetches as ``_Recv``/``_Send`` nodes on the client device (the master's CPU:0:
fed values enter there, fetched ones leave from there), and partitions the rest by device:
every edge between two devices becomes a ``_Send`` on the producer's device and a ``_Recv``
on the consumer's, matched by a rendezvous key (TF's ``Rendezvous::CreateKey``:
``src_device;incarnation;dst_device;tensor_name;0:0``). The master registers each
partition with the worker of its task and has it run once per step (``RunGraph``); the
result is cached per (fetches, feeds, targets), as TF caches its executors.

``ClientGraph.partition_graphs`` are TF's ``RunMetadata.partition_graphs``: one
``GraphDef`` of ``NodeDef``s per device.
"""

from __future__ import annotations

import functools
import weakref
import zlib
from dataclasses import dataclass, field

from simdist.hardware.device_spec import DeviceSpec
from simdist.graph.graph_def import GraphDef, NodeDef, input_name, node_def
from simdist.graph.registry import REF_INPUT_OPS

#: op types whose output is a variable's buffer (a reference): read where it lives
VARIABLE_OPS = frozenset({"VariableV2"})


@dataclass(frozen=True)
class Edge:
    """One ``_Send``/``_Recv`` pair: ``item`` (a Tensor, or an Operation for a control
    edge) leaves ``src_device`` and reaches ``dst_device``."""

    item: object
    src_device: str
    dst_device: str
    tensor_name: str  # the rendezvous name: "edge_N_src" (TF's), or "x:0" for a feed/fetch
    send_name: str
    recv_name: str
    key: str  # TF's rendezvous key
    control: bool = False
    #: a read of a variable by ``reader`` that must wait for the reader's control inputs
    #: (``after``, which then also reach ``src_device``): TF places that read (a resource
    #: variable's ReadVariableOp) beside the variable, so it reads the value after them
    reader: object = None
    after: tuple = ()

    @property
    def crosses_tasks(self) -> bool:
        return task_of(self.src_device) != task_of(self.dst_device)


@dataclass
class ClientGraph:
    """The master's plan of one kind of ``Session.run``: the ops to run and where, the
    Send/Recv pairs between devices, the client device, and the partition graphs."""

    ops: list
    placement: dict  # op -> full device name
    client_device: str
    fed: frozenset  # the fed tensors
    fetches: tuple  # the fetched tensors
    edges: list  # Edge
    master: str  # the master's task ("job:index")
    partition_graphs: list = field(default_factory=list)  # GraphDef per device, by name
    #: its graph handle in each simulation that ran it (``SimTasks.handle``)
    handles: weakref.WeakKeyDictionary = field(default_factory=weakref.WeakKeyDictionary,
                                               compare=False, repr=False)

    def __post_init__(self):
        self.edge_to = {(e.item, e.dst_device, e.reader): e for e in self.edges}
        self.edges_from: dict = {}
        for e in self.edges:
            self.edges_from.setdefault(e.item, []).append(e)
        for edges in self.edges_from.values():
            edges.sort(key=lambda e: e.dst_device)
        self.tasks = sorted({task_of(d) for d in self.placement.values()} | {self.master},
                            key=lambda t: (t != self.master, t))
        # who reads each tensor a _Send carries (TF's Send reads a variable then), and the
        # tensors an op takes by reference on the other side (Assign...): sent as they are
        self.first_reader: dict = {}
        self.by_reference: set = set()
        for e in self.edges:
            if e.control:
                continue
            readers = [c for c in e.item.consumers_list
                       if c in self.placement and self.placement[c] == e.dst_device]
            self.first_reader[e] = e.reader or next(iter(readers), e.item.op)
            if any(c.type in REF_INPUT_OPS for c in readers):
                self.by_reference.add(e)

    def source_device(self, tensor) -> str:
        """Where ``tensor`` comes from in this run: the client device when it is fed."""
        return source_device(tensor, self.fed, self.placement, self.client_device)

    def input_edge(self, item, device: str, reader) -> Edge:
        """The edge that brings ``item`` to ``reader`` on ``device``."""
        return self.edge_to.get((item, device, reader)) or self.edge_to[(item, device, None)]

    def devices(self) -> list[str]:
        return [g.node[0].device for g in self.partition_graphs]

    def partitions_of(self, task: str) -> list:
        """The partition graphs of ``task``'s devices (what its worker registers)."""
        return [g for g in self.partition_graphs if task_of(g.node[0].device) == task]

    @functools.cached_property
    def fetched(self) -> frozenset:
        """The names of the fetched tensors (kept to the end of a step, never freed)."""
        return frozenset(t.name for t in self.fetches)


@functools.lru_cache(maxsize=4096)
def task_of(device: str) -> str:
    """"job:index" of a full device name."""
    spec = DeviceSpec.from_string(device)
    return f"{spec.job}:{spec.task}"


def source_device(tensor, fed, placement: dict, client: str) -> str:
    """Where ``tensor`` comes from: the client device when it is fed, else its op's."""
    return client if tensor in fed else placement[tensor.op]


def incarnation(device: str) -> int:
    """A device's incarnation number (TF: random per process start; here a fixed one per
    device name, so that keys are the same on every run)."""
    return zlib.crc32(device.encode()) * 2654435761 % (1 << 63)


def rendezvous_key(src_device: str, dst_device: str, name: str) -> str:
    """TF's ``Rendezvous::CreateKey`` (frame and iteration 0:0)."""
    return f"{src_device};{incarnation(src_device):016x};{dst_device};{name};0:0"


class Master:
    """The master of one session: plans each distinct run once (``client_graph``)."""

    def __init__(self, task: str):
        self.task = task
        self._cache: dict = {}
        self._names = 0  # TF's counter behind the new nodes' names ("v_S0", "v_S1"...)
        self._edges = 0

    def client_graph(self, ops, placement, feeds, fetches, targets, client_device: str
                     ) -> ClientGraph:
        """The plan for running ``ops`` (already pruned to ``fetches`` and ``targets``)
        with ``feeds``; cached per (fetches, feeds, targets)."""
        key = (tuple(sorted(t.name for t in fetches)), tuple(sorted(t.name for t in feeds)),
               tuple(sorted(op.name for op in targets)))
        graph = self._cache.get(key)
        if graph is None:
            graph = self._cache[key] = self._build(ops, placement, feeds, fetches,
                                                   client_device)
        return graph

    def _new_name(self, prefix: str) -> str:
        name = f"{prefix}_S{self._names}"
        self._names += 1
        return name

    def _edge(self, item, src, dst, source_name: str, control=False, reader=None,
              after=()) -> Edge:
        name = f"edge_{self._edges}_{source_name}"
        self._edges += 1
        return Edge(item, src, dst, name, self._new_name(source_name),
                    self._new_name(source_name), rendezvous_key(src, dst, name), control,
                    reader, after)

    def _build(self, ops, placement, feeds, fetches, client) -> ClientGraph:
        placement = {op: placement[op] for op in ops}
        needed = set(ops)
        feed_node = {t: f"_recv_{t.name.replace(':', '_')}" for t in feeds}
        edges, seen = [], set()
        def add(item, src, dst, source_name, control=False, reader=None, after=()):
            if src != dst and (item, dst, reader) not in seen:
                seen.add((item, dst, reader))
                edges.append(self._edge(item, src, dst, source_name, control, reader, after))

        for op in ops:
            dst = placement[op]
            after = tuple(c for c in op.control_inputs if c in needed)
            for t in op.inputs:
                src = source_device(t, feeds, placement, client)
                if after and t not in feeds and t.op.type in VARIABLE_OPS and \
                        task_of(src) != task_of(dst) and op.type not in REF_INPUT_OPS:
                    for c in after:  # the read waits for them beside the variable
                        add(c, placement[c], src, c.name, control=True)
                    add(t, src, dst, t.op.name, reader=op, after=after)
                else:
                    add(t, src, dst, feed_node.get(t, t.op.name))
            for c in after:
                add(c, placement[c], dst, c.name, control=True)
        for t in fetches:
            if t not in feeds:
                add(t, placement[t.op], client, t.op.name)
        graph = ClientGraph(ops, placement, client, frozenset(feeds), tuple(fetches), edges,
                            self.task)
        graph.partition_graphs = _partition_graphs(graph, feeds, fetches, feed_node)
        return graph


def _partition_graphs(graph: ClientGraph, feeds, fetches, feed_node) -> list:
    """TF's partition graphs: each device's ops, its ``_Recv`` nodes (inputs from other
    devices, and the feeds on the client device) and ``_Send`` nodes."""
    placement, client = graph.placement, graph.client_device
    nodes: dict[str, list] = {d: [] for d in sorted(set(placement.values()) | {client})}

    def recv_of(item, device, reader=None) -> str:
        return graph.input_edge(item, device, reader).recv_name

    for t in feeds:
        attr = _send_recv_attr(client, client, t.name, True, t)
        nodes[client].append(NodeDef(feed_node[t], "_Recv", client, (), _outputs(attr, t)))
    for op in graph.ops:
        device = placement[op]
        inputs = []
        for t in op.inputs:
            if graph.source_device(t) != device:
                inputs.append(recv_of(t, device, op))
            else:
                inputs.append(feed_node[t] if t in feeds else input_name(t))
        for c in op.control_inputs:
            if c in placement:
                inputs.append("^" + (c.name if placement[c] == device else recv_of(c, device)))
        nodes[device].append(node_def(op, device, inputs))
    for e in graph.edges:
        tensor = None if e.control else e.item
        source = e.item.name if e.control else (
            feed_node[tensor] if tensor in feeds else input_name(tensor))
        attr = _send_recv_attr(e.src_device, e.dst_device, e.tensor_name, False, tensor)
        attr["_item"] = e.item.name
        recv_attr = _outputs(attr, tensor)
        if tensor is not None:  # who reads the value it sends, and whether by reference
            attr["_reader"] = graph.first_reader[e].name
            attr["_by_reference"] = e in graph.by_reference
        waits = tuple("^" + (c.name if placement[c] == e.src_device else
                             recv_of(c, e.src_device)) for c in e.after)
        nodes[e.src_device].append(NodeDef(e.send_name, "_Send", e.src_device,
                                           (("^" if e.control else "") + source,) + waits,
                                           attr))
        nodes[e.dst_device].append(NodeDef(e.recv_name, "_Recv", e.dst_device, (), recv_attr))
    for t in dict.fromkeys(fetches):  # a tensor fetched twice has one _Send
        name = f"_send_{t.name.replace(':', '_')}"
        source = feed_node[t] if t in feeds else (
            input_name(t) if placement[t.op] == client else recv_of(t, client))
        attr = _send_recv_attr(client, client, t.name, True, t)
        nodes[client].append(NodeDef(name, "_Send", client, (source,), attr))
    return [GraphDef(n) for n in nodes.values() if n]


def _send_recv_attr(src: str, dst: str, name: str, client_terminated: bool, tensor) -> dict:
    attr = {"send_device": src, "recv_device": dst, "tensor_name": name,
            "send_device_incarnation": incarnation(src),
            "client_terminated": client_terminated}
    if tensor is not None:
        attr["T"] = tensor.dtype
    return attr


def _outputs(attr: dict, tensor) -> dict:
    """A _Recv's attributes with its output (the tensor it receives; none for a control
    edge), so that a worker can build it again (``graph_def.import_graph_def``)."""
    return {**attr, "_output_types": [] if tensor is None else [tensor.dtype],
            "_output_shapes": [] if tensor is None else [tensor.shape]}
