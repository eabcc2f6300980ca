"""Models TF1 variables: tf.Variable, get_variable / variable_scope, initializers, assign ops.

A variable is a ``VariableV2`` op whose output is a *reference* to a buffer kept in a
resource container of the task that holds its device (``ResourceMgr``, see runtime.py), an
``Assign`` op (its initializer) and an ``Identity`` op ``v/read``, colocated with it, through
which other ops read it. Reading before the initializer ran is TF's ``FailedPreconditionError``.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from simdist.base.errors import FailedPreconditionError, InvalidArgumentError
from simdist.graph.array_ops import convert_to_tensor, identity
from simdist.graph.control_flow_ops import group
from simdist.graph.dtypes import as_dtype, float32
from simdist.graph.graph import Tensor, format_shape, get_default_graph
from simdist.graph.math_ops import cast, matmul
from simdist.graph.registry import NO_GRADIENT, NOT_DIFFERENTIABLE, no_flops, register

GLOBAL_VARIABLES = "variables"
TRAINABLE_VARIABLES = "trainable_variables"
GLOBAL_STEP = "global_step"
AUTO_REUSE = "auto_reuse"


class Ref:
    """A reference to a variable's buffer: (resource manager, container, name)."""

    __slots__ = ("key", "op", "resources")

    def __init__(self, resources, key, op):
        self.resources, self.key, self.op = resources, key, op

    def read(self, reader):  # reader: the reading op, or its name (for the error)
        value = self.resources.lookup(self.key)
        if value is None:
            raise FailedPreconditionError(
                f"Attempting to use uninitialized value {self.op.name}\n\t [[{{{{node "
                f"{getattr(reader, 'name', reader)}}}}}]] (run the variable's initializer "
                "first, e.g. sess.run(tf.global_variables_initializer()))")
        return value

    def write(self, value):
        self.resources.store(self.key, np.asarray(value))

    @property
    def nbytes(self) -> int:
        value = self.resources.lookup(self.key)
        return 0 if value is None else int(value.nbytes)


def resource_key(op) -> tuple[str, str]:
    return (op.container, op.attrs.get("shared_name") or op.name)


# -- initializers ---------------------------------------------------------------------------------


class Initializer:
    """tf.*_initializer: makes the initial value (a numpy array, seeded) for a shape.

    ``op_name`` is the name of the last op TF's initializer builds (``zeros``,
    ``random_uniform``...): simdist builds one Const of that name holding the value."""

    def __init__(self, fn, name, op_name=None, seed=None, scaled=False):
        self.fn, self.name = fn, name
        self.op_name = op_name or name
        self.seed, self.scaled = seed, scaled

    def __call__(self, shape, dtype=float32, seed=0, full_shape=None):
        """Values for ``shape`` (the initializer's own seed wins); a part of a partitioned
        variable scales by its ``full_shape``, as TF's ``partition_info``."""
        dtype = as_dtype(dtype)
        rng = np.random.default_rng(seed if self.seed is None else self.seed)
        values = self.fn(tuple(shape), rng, tuple(full_shape or shape)) if self.scaled \
            else self.fn(tuple(shape), rng)
        return np.asarray(values, dtype.as_numpy_dtype)


def zeros_initializer():
    return Initializer(lambda shape, rng: np.zeros(shape), "zeros")


def ones_initializer():
    return Initializer(lambda shape, rng: np.ones(shape), "ones")


def constant_initializer(value=0):
    return Initializer(lambda shape, rng: np.broadcast_to(np.asarray(value), shape), "Const")


def random_normal_initializer(mean=0.0, stddev=1.0, seed=None):
    return Initializer(lambda shape, rng: rng.normal(mean, stddev, shape), "random_normal",
                       seed=seed)


def random_uniform_initializer(minval=-0.05, maxval=0.05, seed=None):
    return Initializer(lambda shape, rng: rng.uniform(minval, maxval, shape), "random_uniform",
                       seed=seed)


def glorot_uniform_initializer(seed=None):
    def fn(shape, rng, full):
        fan_in = full[-2] if len(full) >= 2 else (full[0] if full else 1)
        fan_out = full[-1] if full else 1
        limit = np.sqrt(6.0 / max(1, fan_in + fan_out))
        return rng.uniform(-limit, limit, shape)
    return Initializer(fn, "glorot_uniform", op_name="random_uniform", seed=seed, scaled=True)


# -- Variable -------------------------------------------------------------------------------------


class Variable:
    """Models tf.compat.v1.Variable (a TF1 reference variable).

    As in TF, a callable ``initial_value`` is called under the name scope "NAME/Initializer"
    with no device, and what it builds is colocated with the variable (it does not exist
    yet): the initial value is made where the variable lives."""

    def __init__(self, initial_value=None, trainable=True, name=None, dtype=None,
                 collections=None, shape=None):
        if initial_value is None:
            raise InvalidArgumentError(f"Variable {name!r}: initial_value must be given")
        graph = get_default_graph()
        first = len(graph._ops)
        with graph.name_scope(name or "Variable") as scope:
            op_name = scope[:-1]
            with graph.name_scope(scope):
                if callable(initial_value):
                    with graph.name_scope("Initializer"), graph.device(None):
                        init = convert_to_tensor(initial_value(), dtype=dtype,
                                                 name="initial_value")
                else:
                    first = None
                    init = convert_to_tensor(initial_value, dtype=dtype, name="initial_value")
                if dtype is not None and init.dtype != as_dtype(dtype):
                    init = cast(init, dtype)
            shape = init.shape if shape is None else tuple(shape)
            with graph.name_scope(None):
                self.op = graph.create_op("VariableV2", [], [(init.dtype, shape)],
                                          {"shape": shape, "dtype": init.dtype,
                                           "shared_name": ""}, op_name + "/")
            if first is not None:
                for op in graph._ops[first:-1]:
                    op.colocate = self.op
            with graph.colocate_with(self.op), graph.control_dependencies(None):
                self.initializer = graph.create_op(
                    "Assign", [self.op.outputs[0], init], [(init.dtype, shape)],
                    {"validate_shape": True}, "Assign")
                self._snapshot = identity(self.op.outputs[0], name="read")
        self.initial_value, self.trainable = init, trainable
        for collection in (collections or [GLOBAL_VARIABLES] +
                           ([TRAINABLE_VARIABLES] if trainable else [])):
            graph.add_to_collection(collection, self)

    _save_slice_info = None  # a part of a PartitionedVariable: its SaveSliceInfo

    def _set_save_slice_info(self, info):
        self._save_slice_info = info

    def _get_save_slice_info(self):
        return self._save_slice_info

    @property
    def name(self) -> str:
        return self.op.name + ":0"

    @property
    def dtype(self):
        return self.op.outputs[0].dtype

    @property
    def shape(self):
        return self.op.outputs[0].shape

    def get_shape(self):
        return self.shape

    @property
    def device(self) -> str:
        return self.op.device

    @property
    def graph(self):
        return self.op.graph

    def _ref(self) -> Tensor:
        return self.op.outputs[0]

    def _as_tensor(self) -> Tensor:
        return self._snapshot

    def value(self) -> Tensor:
        return self._snapshot

    def read_value(self) -> Tensor:
        """A fresh read of the variable (inside control_dependencies: after them), TF's
        ``identity(v._ref(), name="read")`` in the current name scope."""
        return identity(self.op.outputs[0], name="read")

    def assign(self, value, name=None):
        return assign(self, value, name=name)

    def assign_add(self, delta, name=None):
        return assign_add(self, delta, name=name)

    def assign_sub(self, delta, name=None):
        return assign_sub(self, delta, name=name)

    def eval(self, session=None):
        from simdist.graph.session import get_default_session
        return (session or get_default_session()).run(self)

    def __repr__(self):
        return (f"<simdist Variable '{self.name}' shape={format_shape(self.shape)} "
                f"dtype={self.dtype.name}>")

    def __getattr__(self, name):  # +, *, @ ... act on the read value
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._snapshot, name)

    def __add__(self, o): return self._snapshot + o
    def __radd__(self, o): return o + self._snapshot
    def __sub__(self, o): return self._snapshot - o
    def __rsub__(self, o): return o - self._snapshot
    def __mul__(self, o): return self._snapshot * o
    def __rmul__(self, o): return o * self._snapshot
    def __matmul__(self, o): return self._snapshot @ o
    def __rmatmul__(self, o): return matmul(o, self._snapshot, name="matmul")
    def __neg__(self): return -self._snapshot
    __hash__ = object.__hash__


# -- VariableV2, Assign, AssignAdd, AssignSub, IsVariableInitialized (built above and here) --------


def _variable_kernel(op, args, rt):
    return [Ref(rt.resources(op), resource_key(op), op)]


register("VariableV2", _variable_kernel, flops=no_flops, stateful=True, grad=NOT_DIFFERENTIABLE)


def _ref_op(op_type, ref, inputs, outputs, attrs=None, name=None):
    """An op whose first input is ``ref``'s reference: built colocated with the variable, as
    TF's op wrappers build every op with a reference input (op_def_library's
    ``_MaybeColocateWith``), so it reports the variable's device."""
    graph = get_default_graph()
    with graph.colocate_with(ref.op):
        return graph.create_op(op_type, [ref._ref(), *inputs], outputs, attrs, name)


def _state_op(op_type, ref, value, name):
    """Assign / AssignAdd / AssignSub, named as TF's op wrappers name them: the op
    ``name`` (default its type) and its converted input ``name/value``."""
    if not isinstance(ref, Variable):
        raise InvalidArgumentError(f"{op_type} needs a Variable to update, got {ref!r}")
    graph = get_default_graph()
    with graph.name_scope(name or op_type) as scope:
        value = convert_to_tensor(value, dtype=ref.dtype, name="value")
        if ref.shape is not None and value.shape is not None and None not in value.shape \
                and None not in ref.shape and value.shape != ref.shape:
            raise InvalidArgumentError(
                f"{op_type} '{scope[:-1]}': shapes of {ref.op.name} "
                f"{format_shape(ref.shape)} and value {value.name!r} "
                f"{format_shape(value.shape)} must match")
        return _ref_op(op_type, ref, [value], [(ref.dtype, ref.shape)],
                       {"validate_shape": True}, scope).outputs[0]


def assign(ref, value, name=None):
    return _state_op("Assign", ref, value, name)


def _assign_kernel(op, args, rt):
    ref, value = args
    shape = op.inputs[0].shape
    if op.attrs.get("validate_shape", True) and shape is not None and None not in shape \
            and tuple(value.shape) != shape:
        raise InvalidArgumentError(
            f"Assign requires shapes of both tensors to match. lhs shape= {list(shape)} rhs "
            f"shape= {list(value.shape)} [[{{{{node {op.name}}}}}]]")
    ref.write(np.array(value, op.inputs[0].dtype.as_numpy_dtype))
    return [ref.resources.lookup(ref.key).copy()]


register("Assign", _assign_kernel, flops=no_flops, stateful=True, ref_input=True,
         grad=NOT_DIFFERENTIABLE)  # TF's state_grad.py: Assign, AssignAdd, AssignSub


def assign_add(ref, value, name=None):
    return _state_op("AssignAdd", ref, value, name)


def assign_sub(ref, value, name=None):
    return _state_op("AssignSub", ref, value, name)


def _update_kernel(sign):
    def compute(op, args, rt):
        ref, delta = args
        old = ref.read(op)
        ref.write((old + sign * delta).astype(old.dtype))
        return [ref.resources.lookup(ref.key).copy()]
    return compute


register("AssignAdd", _update_kernel(1), stateful=True, ref_input=True,
         grad=NOT_DIFFERENTIABLE)
register("AssignSub", _update_kernel(-1), stateful=True, ref_input=True,
         grad=NOT_DIFFERENTIABLE)


def is_variable_initialized(variable):
    return _ref_op("IsVariableInitialized", variable, [], [("bool", ())]).outputs[0]


register("IsVariableInitialized",
         lambda op, args, rt: [np.array(args[0].resources.lookup(args[0].key) is not None)],
         flops=no_flops, stateful=True, ref_input=True, grad=NO_GRADIENT)


# -- get_variable and variable_scope --------------------------------------------------------------


def _scope_state(graph):
    """The variable scopes open: (name, reuse, partitioner) each."""
    if not hasattr(graph, "_var_scope_stack"):
        graph._var_scope_stack = [("", False, None)]
        graph._var_scopes_opened = set()
    return graph._var_scope_stack


@contextmanager
def variable_scope(name_or_scope, default_name=None, reuse=None, partitioner=None):
    """tf.compat.v1.variable_scope: a prefix for get_variable names, whether to reuse, and
    its variables' partitioner (a ``default_name`` made unique: "X", "X_1"...)."""
    graph = get_default_graph()
    stack = _scope_state(graph)
    outer, outer_reuse, outer_partitioner = stack[-1]
    name = name_or_scope or default_name
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"variable_scope needs a name, got {name_or_scope!r}")
    full = f"{outer}/{name}" if outer else name
    if not name_or_scope:
        base, k = full, 0
        while full in graph._var_scopes_opened:
            k, full = k + 1, f"{base}_{k + 1}"
        name = full.rsplit("/", 1)[-1]
    graph._var_scopes_opened.add(full)
    stack.append((full, reuse if reuse is not None else outer_reuse,
                  partitioner if partitioner is not None else outer_partitioner))
    try:
        with graph.name_scope(name):
            yield full
    finally:  # TF closes the sub-scopes: their default names count afresh next time
        stack.pop()
        graph._var_scopes_opened -= {s for s in graph._var_scopes_opened if s[:len(full) + 1]
                                     == full + "/"}


def get_variable(name, shape=None, dtype=None, initializer=None, trainable=True,
                 collections=None, partitioner=None) -> Variable:
    """tf.compat.v1.get_variable: make, or reuse, scope/name (partitioned by a partitioner)."""
    graph = get_default_graph()
    scope, reuse, scope_partitioner = _scope_state(graph)[-1]
    full = f"{scope}/{name}" if scope else name
    partitioner = partitioner if partitioner is not None else scope_partitioner
    if partitioner is not None and (shape is None or len(shape)):  # TF: a scalar is whole
        from simdist.graph.partitioned_variables import partitioned_variable
        return partitioned_variable(full, partitioner, shape, dtype, initializer, trainable,
                                    collections, reuse)
    existing = graph._vars_by_name.get(full)
    if existing is not None:
        if reuse is True or reuse == AUTO_REUSE:
            return existing
        raise InvalidArgumentError(
            f"Variable {full} already exists, disallowed. Did you mean to set reuse=True or "
            "reuse=tf.AUTO_REUSE in VarScope?")
    if reuse is True:
        raise InvalidArgumentError(
            f"Variable {full} does not exist, or was not created with tf.get_variable(). "
            "Did you mean to set reuse=tf.AUTO_REUSE in VarScope?")
    if isinstance(initializer, (Tensor, np.ndarray, np.generic, list, int, float)):
        # a constant initial value: built in the variable's name scope, where TF builds it
        with graph.name_scope(None):
            var = Variable(initializer, trainable=trainable, name=full, dtype=dtype,
                           collections=collections)
        graph._vars_by_name[full] = var
        return var
    if shape is None:
        raise InvalidArgumentError(f"get_variable {full!r}: give a shape or a tensor "
                                   "initializer")
    dtype = as_dtype(dtype or float32)
    if initializer is None:
        initializer = glorot_uniform_initializer() if dtype.is_floating \
            else zeros_initializer()
    var = initialized_variable(full, shape, dtype, initializer, trainable, collections)
    graph._vars_by_name[full] = var
    return var


def initialized_variable(name, shape, dtype, initializer, trainable=True,
                         collections=None) -> Variable:
    """The variable ``name`` made from an initializer function, as TF's get_variable makes it:
    the initializer's op (one Const of TF's name for it, e.g. "NAME/Initializer/zeros") is
    built by the variable, without a device and colocated with it (see ``Variable``).
    Optimizer slots are made this way too."""
    graph = get_default_graph()
    value = initializer(shape, dtype, seed=len(graph._ops))
    with graph.name_scope(None):
        return Variable(lambda: convert_to_tensor(value, dtype=dtype, name=initializer.op_name),
                        trainable=trainable, name=name, collections=collections)


def global_variables():
    return get_default_graph().get_collection(GLOBAL_VARIABLES)


def trainable_variables():
    return get_default_graph().get_collection(TRAINABLE_VARIABLES)


def variables_initializer(var_list, name="init"):
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer():
    return variables_initializer(global_variables(), name="init")


initialize_all_variables = global_variables_initializer


LOCAL_VARIABLES = "local_variables"


def local_variables():
    """tf.compat.v1.local_variables: the variables of this client only (e.g. a replica's
    local step), initialized by each client, never saved in a checkpoint."""
    return get_default_graph().get_collection(LOCAL_VARIABLES)


def local_variables_initializer():
    return variables_initializer(local_variables(), name="init")
