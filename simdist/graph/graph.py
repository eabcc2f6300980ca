"""Models tf.Graph, tf.Operation and tf.Tensor, with TF1's scopes.

A graph is built in plain Python, without simulating anything: every op records its type,
inputs, control inputs, attributes and the device its ``device(...)`` scopes asked for. The
scopes are TF's: ``name_scope``, ``device`` (strings and functions of the op, merged innermost
first), ``control_dependencies``, ``container`` and ``colocate_with``. Only
``Session.run`` simulates (see executor.py).
"""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager

import numpy as np

from simdist.hardware.device_spec import DeviceSpec
from simdist.base.errors import InvalidArgumentError, NotFoundError
from simdist.graph.dtypes import DType, as_dtype

_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-/>]*")


class Tensor:
    """Models tf.Tensor: output ``value_index`` of an Operation, with a static dtype and shape.

    ``shape`` is a tuple whose entries are ints or None (unknown, TF's ``?``), or None when
    even the rank is unknown.
    """

    def __init__(self, op: Operation, value_index: int, dtype: DType, shape):
        self.op, self.value_index, self.dtype = op, value_index, dtype
        self.shape = None if shape is None else tuple(shape)
        self.consumers_list: list[Operation] = []

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.value_index}"

    @property
    def graph(self) -> Graph:
        return self.op.graph

    @property
    def device(self) -> str:
        return self.op.device

    def get_shape(self):
        return self.shape

    def consumers(self) -> list[Operation]:
        return list(self.consumers_list)

    def __repr__(self):
        return (f"<simdist Tensor '{self.name}' shape={format_shape(self.shape)} "
                f"dtype={self.dtype.name}>")

    # operators, as tf.Tensor overloads them (and names their ops: "add", "mul"...)
    def __add__(self, other):
        from simdist.graph import math_ops
        return math_ops.add(self, other, name="add")

    def __radd__(self, other):
        from simdist.graph import math_ops
        return math_ops.add(other, self, name="add")

    def __sub__(self, other):
        from simdist.graph import math_ops
        return math_ops.subtract(self, other, name="sub")

    def __rsub__(self, other):
        from simdist.graph import math_ops
        return math_ops.subtract(other, self, name="sub")

    def __mul__(self, other):
        from simdist.graph import math_ops
        return math_ops.multiply(self, other, name="mul")

    def __rmul__(self, other):
        from simdist.graph import math_ops
        return math_ops.multiply(other, self, name="mul")

    def __truediv__(self, other):
        from simdist.graph import math_ops
        return math_ops.divide(self, other, name="truediv")

    def __matmul__(self, other):
        from simdist.graph import math_ops
        return math_ops.matmul(self, other, name="matmul")

    def __neg__(self):
        from simdist.graph import math_ops
        return math_ops.negative(self)

    __hash__ = object.__hash__


def format_shape(shape) -> str:
    """TF's spelling of a static shape: (?, 2), <unknown>."""
    if shape is None:
        return "<unknown>"
    dims = ", ".join("?" if d is None else str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"


class Operation:
    """Models tf.Operation: a node of the graph.

    ``device`` is the device its scopes requested (possibly partial, possibly ""); the
    session's placer turns it into a full device name. ``colocate`` names the op whose device
    this one must share (TF's ``_class: loc:@v`` attribute: a variable's Assign and read ops).
    """

    def __init__(self, graph: Graph, op_type: str, name: str, inputs, attrs, control_inputs,
                 container: str):
        self.graph, self.type, self.name = graph, op_type, name
        self.inputs: list[Tensor] = list(inputs)
        self.attrs: dict = dict(attrs)
        self.control_inputs: list[Operation] = list(control_inputs)
        self.outputs: list[Tensor] = []
        self.device = ""
        self.colocate: Operation | None = None
        self.container = container
        self._id = len(graph._ops)

    def _set_device(self, device):
        """Set the requested device: a DeviceSpec in its canonical form, a string as it is
        written (as TF keeps what a device function returns), once checked."""
        if isinstance(device, DeviceSpec):
            device = device.to_string()
        if device is None:
            device = ""
        if not isinstance(device, str):
            raise InvalidArgumentError(
                f"the device function for op {self.name!r} returned {device!r}: expected a "
                "device string such as '/job:ps/task:0' or '/device:GPU:0'")
        DeviceSpec.from_string(device)
        self.device = device

    def get_attr(self, name):
        if name not in self.attrs:
            raise InvalidArgumentError(f"op {self.name!r} ({self.type}) has no attr {name!r}; "
                                       f"it has {sorted(self.attrs)}")
        return self.attrs[name]

    @property
    def node_def(self):
        return self  # device functions may read op.node_def.op / .attr as in TF

    @property
    def op(self) -> str:  # node_def.op is the op type
        return self.type

    @property
    def attr(self) -> dict:
        return self.attrs

    def run(self, feed_dict=None, session=None):
        from simdist.graph.session import get_default_session
        (session or get_default_session()).run(self, feed_dict)

    def __repr__(self):
        return f"<simdist Operation '{self.name}' type={self.type}>"


class Graph:
    """Models tf.Graph: the ops, their unique names, collections and the scope stacks."""

    def __init__(self):
        self._ops: list[Operation] = []
        self._by_name: dict[str, Operation] = {}
        self._name_counts: dict[str, int] = {}
        self._name_stack = ""
        self._device_stack: list = []  # strings, DeviceSpecs, functions; None resets
        self._control_stack: list[list[Operation] | None] = []
        self._colocate_stack: list[Operation] = []
        self._container = ""
        self._collections: dict[str, list] = {}
        self._variable_scope = ""
        self._vars_by_name: dict = {}
        self.finalized = False

    # -- ops --------------------------------------------------------------------------------

    def get_operations(self) -> list[Operation]:
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        if name not in self._by_name:
            raise NotFoundError(f"the graph has no operation named {name!r}")
        return self._by_name[name]

    def get_tensor_by_name(self, name: str) -> Tensor:
        op_name, _, index = name.partition(":")
        op = self.get_operation_by_name(op_name)
        if not index.isdigit() or int(index) >= len(op.outputs):
            raise NotFoundError(f"tensor name {name!r}: op {op_name!r} has {len(op.outputs)} "
                                "output(s); expected 'op_name:index'")
        return op.outputs[int(index)]

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """Like TF: "add", then "add_1", "add_2"... inside the current name scope."""
        full = f"{self._name_stack}/{name}" if self._name_stack else name
        key = full.lower()
        count = self._name_counts.get(key, 0)
        if mark_as_used:
            self._name_counts[key] = count + 1
        if count:
            while f"{full}_{count}".lower() in self._name_counts:
                count += 1
            if mark_as_used:
                self._name_counts[f"{full}_{count}".lower()] = 1
            full = f"{full}_{count}"
        return full

    def create_op(self, op_type: str, inputs, outputs, attrs=None, name: str | None = None,
                  ) -> Operation:
        """Add an op: ``outputs`` is a list of (dtype, shape). Applies every scope."""
        if self.finalized:
            raise InvalidArgumentError(f"the graph is finalized and cannot be modified "
                                       f"(adding a {op_type} op)")
        exact = isinstance(name, str) and name.endswith("/")
        if exact:
            name = name[:-1]
        if name is not None and (not isinstance(name, str) or not _NAME.fullmatch(name)):
            raise InvalidArgumentError(f"op name {name!r} is not valid: expected letters, "
                                       "digits and '_', '.', '-', '/'")
        for tensor in inputs:
            if tensor.graph is not self:
                raise InvalidArgumentError(
                    f"tensor {tensor.name!r} is from another graph than the {op_type} op "
                    "being built: every input must come from the same graph")
        controls = []
        for level in self._control_stack:
            if level is None:
                controls = []
            else:
                controls += [c for c in level if c not in controls]
        input_ops = {t.op for t in inputs}
        controls = [c for c in controls if c not in input_ops]
        # TF: a name ending in "/" is taken as it is, without marking it used (the name
        # scope that made it marked it already); a clash is an error, as TF's
        # "Duplicate node name in graph"
        op_name = name if exact else self.unique_name(name or op_type)
        if op_name in self._by_name:
            raise InvalidArgumentError(f"Duplicate node name in graph: {op_name!r} (the graph "
                                       "already has an op of that name)")
        op = Operation(self, op_type, op_name, inputs, attrs or {}, controls, self._container)
        for index, (dtype, shape) in enumerate(outputs):
            op.outputs.append(Tensor(op, index, as_dtype(dtype), shape))
        for tensor in inputs:
            tensor.consumers_list.append(op)
        self._apply_device_functions(op)
        if self._colocate_stack:  # TF: the op takes the device of the op it is colocated with
            op.colocate = _colocation_root(self._colocate_stack[-1])
            if self._colocate_stack[-1].device:
                op.device = self._colocate_stack[-1].device
        self._ops.append(op)
        self._by_name[op.name] = op
        return op

    def as_graph_def(self):
        """tf.Graph.as_graph_def(): the graph as data (``graph_def.GraphDef``)."""
        from simdist.graph.graph_def import as_graph_def
        return as_graph_def(self)

    def _apply_device_functions(self, op: Operation):
        """TF's rule: the innermost scope first; a string scope only fills fields the op has
        not set; a function returns the device; a ``device(None)`` scope stops the search."""
        for entry in reversed(self._device_stack):
            if entry is None:
                break
            if callable(entry):
                op._set_device(entry(op))
            else:
                op._set_device(entry.make_merged_spec(DeviceSpec.from_string(op.device)))

    # -- scopes -----------------------------------------------------------------------------

    @contextmanager
    def as_default(self):
        _default_stack().append(self)
        try:
            yield self
        finally:
            _default_stack().pop()

    @contextmanager
    def name_scope(self, name: str | None):
        saved = self._name_stack
        if name is None or name == "":
            self._name_stack = ""
        elif name.endswith("/"):
            self._name_stack = name[:-1]
        else:
            self._name_stack = self.unique_name(name)
        try:
            yield self._name_stack + "/" if self._name_stack else ""
        finally:
            self._name_stack = saved

    def device(self, device_name_or_function):
        """tf.device: a device string / DeviceSpec, a function op -> device string, or None.

        A bad device string is an error at once, before the ``with`` block runs."""
        entry = device_name_or_function
        if isinstance(entry, str):
            entry = DeviceSpec.from_string(entry)
        elif entry is not None and not callable(entry) and not isinstance(entry, DeviceSpec):
            raise InvalidArgumentError(
                f"tf.device() takes a device string, a DeviceSpec, a function of the op or "
                f"None; got {device_name_or_function!r}")
        return self._device_scope(entry)

    @contextmanager
    def _device_scope(self, entry):
        self._device_stack.append(entry)
        try:
            yield
        finally:
            self._device_stack.pop()

    @contextmanager
    def control_dependencies(self, control_inputs):
        """Ops created inside run only after ``control_inputs`` (None clears outer ones)."""
        if control_inputs is None:
            level = None
        else:
            level = []
            for item in control_inputs:
                if isinstance(item, Tensor):
                    item = item.op
                elif hasattr(item, "op") and isinstance(item.op, Operation):
                    item = item.op  # a Variable
                if not isinstance(item, Operation):
                    raise InvalidArgumentError(
                        f"control_dependencies takes ops or tensors, got {item!r}")
                level.append(item)
        self._control_stack.append(level)
        try:
            yield
        finally:
            self._control_stack.pop()

    @contextmanager
    def container(self, container_name: str):
        """Stateful ops created inside keep their resources in this named container."""
        if not isinstance(container_name, str):
            raise InvalidArgumentError(f"container name {container_name!r} must be a string")
        saved, self._container = self._container, container_name
        try:
            yield container_name
        finally:
            self._container = saved

    @contextmanager
    def colocate_with(self, op):
        """Ops created inside share ``op``'s device; like TF, device scopes are set aside."""
        op = op.op if hasattr(op, "op") and not isinstance(op, Operation) else op
        self._colocate_stack.append(op)
        saved, self._device_stack = self._device_stack, []
        try:
            yield
        finally:
            self._colocate_stack.pop()
            self._device_stack = saved

    # -- collections ------------------------------------------------------------------------

    def add_to_collection(self, name: str, value):
        self._collections.setdefault(name, []).append(value)

    def get_collection(self, name: str) -> list:
        return list(self._collections.get(name, []))

    def finalize(self):
        self.finalized = True


def _colocation_root(op: Operation) -> Operation:
    while op.colocate is not None:
        op = op.colocate
    return op


_thread_local = threading.local()


def _default_stack() -> list:
    """This thread's ``as_default()`` graphs: each thread has its own stack, as in TF (a
    client of ``simulate_clients`` builds its graph while another builds its own)."""
    if not hasattr(_thread_local, "stack"):
        _thread_local.stack = []
    return _thread_local.stack
_global_default = [Graph()]


def get_default_graph() -> Graph:
    """The graph new ops go to: the innermost ``as_default()`` graph, else the global one."""
    stack = _default_stack()
    return stack[-1] if stack else _global_default[0]


def reset_default_graph():
    """tf.reset_default_graph: a fresh global default graph."""
    if _default_stack():
        raise InvalidArgumentError("reset_default_graph() called inside a "
                                   "`with graph.as_default()` block: leave the block first")
    _global_default[0] = Graph()


def create_op(op_type: str, inputs, outputs, attrs=None, name: str | None = None) -> Operation:
    """Add an op to the default graph (what TF's generated op wrappers do)."""
    return get_default_graph().create_op(op_type, inputs, outputs, attrs, name)


def device(device_name_or_function):
    return get_default_graph().device(device_name_or_function)


def name_scope(name):
    return get_default_graph().name_scope(name)


def control_dependencies(control_inputs):
    return get_default_graph().control_dependencies(control_inputs)


def container(container_name):
    return get_default_graph().container(container_name)


def colocate_with(op):
    return get_default_graph().colocate_with(op)


def get_collection(name):
    return get_default_graph().get_collection(name)


def add_to_collection(name, value):
    get_default_graph().add_to_collection(name, value)


def num_elements(shape) -> int:
    return int(np.prod(shape)) if shape else 1
