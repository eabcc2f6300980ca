"""Models TF's GraphDef: a graph as data (``Graph.as_graph_def``), and back
(``import_graph_def``).

A ``GraphDef`` is a list of ``NodeDef``s: each node's name, op type, requested device, inputs
("name" for output 0, "name:1", "^name" for a control input) and attributes. As TF adds
``_output_shapes`` and ``_class`` (colocation), simdist keeps in private attributes what it
needs to build the node again: ``_output_types``, ``_output_shapes``, ``_class`` and
``_container``, and on a partition's ``_Send``/``_Recv`` nodes the client's name of what they
carry (``_item``), the op that reads it (``_reader``) and whether it goes by reference
(``_by_reference``). The master's partitions are GraphDefs too (``_sim/master.py``): a worker
builds its part of a step from them, as TF's ``RegisterGraph`` does.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from simdist.base.errors import InvalidArgumentError

#: the attributes simdist adds to a NodeDef to build the node again
PRIVATE_ATTRS = ("_output_types", "_output_shapes", "_class", "_container", "_item", "_reader",
                 "_by_reference")


@dataclass(frozen=True)
class NodeDef:
    """TF's NodeDef: a node of a graph (``input``: "name", "name:1", "^name")."""

    name: str
    op: str
    device: str
    input: tuple = ()
    attr: dict = field(default_factory=dict, compare=False)


@dataclass
class GraphDef:
    """TF's GraphDef: a list of nodes, each after the nodes it reads."""

    node: list = field(default_factory=list)

    def __repr__(self):
        devices = sorted({n.device for n in self.node})
        return f"GraphDef({len(self.node)} nodes on {', '.join(devices) or 'no device'})"


def input_name(tensor) -> str:
    """How a NodeDef names an input tensor: "op" for output 0, else "op:i"."""
    return tensor.op.name if tensor.value_index == 0 else tensor.name


def node_def(op, device: str | None = None, inputs=None) -> NodeDef:
    """The NodeDef of ``op`` (on ``device``, with ``inputs`` when a partition rewires
    them; else its requested device and its own inputs)."""
    if inputs is None:
        inputs = [input_name(t) for t in op.inputs] + ["^" + c.name for c in op.control_inputs]
    attr = dict(op.attrs)
    attr["_output_types"] = [t.dtype for t in op.outputs]
    attr["_output_shapes"] = [t.shape for t in op.outputs]
    if op.colocate is not None:
        attr["_class"] = [f"loc:@{op.colocate.name}"]
    if op.container:
        attr["_container"] = op.container
    return NodeDef(op.name, op.type, op.device if device is None else device, tuple(inputs),
                   attr)


def as_graph_def(graph) -> GraphDef:
    """``graph.as_graph_def()``: every op of ``graph``, in the order they were added."""
    return GraphDef([node_def(op) for op in graph.get_operations()])


def import_graph_def(graph_def: GraphDef, name: str = "import", graph=None) -> list:
    """``tf.import_graph_def``: add the nodes of ``graph_def`` to ``graph`` (the default
    graph), their names prefixed with ``name`` + "/" (none when ``name`` is ""). Returns
    the new ops, in order."""
    from simdist.graph.graph import Operation, Tensor, get_default_graph

    if not isinstance(graph_def, GraphDef):
        raise InvalidArgumentError(f"import_graph_def: graph_def={graph_def!r}, expected a "
                                   "GraphDef (Graph.as_graph_def(), RunMetadata."
                                   "partition_graphs)")
    graph = graph or get_default_graph()
    prefix = f"{name}/" if name else ""
    made: dict[str, Operation] = {}

    def find(ref: str):
        base, _, index = ref.lstrip("^").partition(":")
        op = made[base]
        return op if ref.startswith("^") else op.outputs[int(index or 0)]

    for node in _in_input_order(graph_def.node):
        inputs = [find(ref) for ref in node.input if not ref.startswith("^")]
        attrs = {k: v for k, v in node.attr.items() if k not in PRIVATE_ATTRS}
        op = Operation(graph, node.op, prefix + node.name, inputs, attrs,
                       [find(ref) for ref in node.input if ref.startswith("^")],
                       node.attr.get("_container", ""))
        for index, (dtype, shape) in enumerate(zip(node.attr.get("_output_types", ()),
                                                   node.attr.get("_output_shapes", ()))):
            op.outputs.append(Tensor(op, index, dtype, shape))
        for tensor in inputs:
            tensor.consumers_list.append(op)
        op.device = node.device
        colocated = node.attr.get("_class")
        if colocated:
            op.colocate = made.get(colocated[0][len("loc:@"):])
        _add(graph, op)
        made[node.name] = op
    return list(made.values())


def _add(graph, op) -> None:
    """Add ``op``, built from a NodeDef, to ``graph`` under its own name."""
    if graph.finalized:
        raise InvalidArgumentError(f"the graph is finalized and cannot be modified "
                                   f"(importing {op.name!r})")
    if op.name in graph._by_name:
        raise InvalidArgumentError(f"Duplicate node name in graph: {op.name!r} (the graph "
                                   "already has an op of that name)")
    key = op.name.lower()
    graph._name_counts[key] = max(1, graph._name_counts.get(key, 0))
    graph._ops.append(op)
    graph._by_name[op.name] = op


def _in_input_order(nodes) -> list:
    """The nodes, each after those it reads (a GraphDef's nodes may come in any order)."""
    names = {n.name for n in nodes}
    for node in nodes:
        for ref in node.input:
            base = ref.lstrip("^").partition(":")[0]
            if base not in names:
                raise InvalidArgumentError(f"import_graph_def: node {node.name!r} has input "
                                           f"{ref!r}, which names no node of the GraphDef")
    index = {n.name: i for i, n in enumerate(nodes)}
    waiting = {n.name: {r.lstrip("^").partition(":")[0] for r in n.input} for n in nodes}
    readers: dict[str, list] = {}
    for name, inputs in waiting.items():
        for source in inputs:
            readers.setdefault(source, []).append(name)
    ready = [i for i, n in enumerate(nodes) if not waiting[n.name]]
    heapq.heapify(ready)
    ordered = []
    while ready:  # Kahn's order, the GraphDef's own order among the ready nodes
        node = nodes[heapq.heappop(ready)]
        ordered.append(node)
        for reader in readers.get(node.name, ()):
            waiting[reader].discard(node.name)
            if not waiting[reader]:
                heapq.heappush(ready, index[reader])
    if len(ordered) < len(nodes):
        left = sorted(name for name, inputs in waiting.items() if inputs)
        raise InvalidArgumentError(f"import_graph_def: the nodes {left} form a cycle")
    return ordered
