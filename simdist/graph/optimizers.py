"""Models tf.compat.v1.train's optimizers: GradientDescent, Momentum and Adam.

``compute_gradients`` calls ``gradients`` (through each variable's reference, so every read
of it counts); ``apply_gradients`` makes the slots first (colocated with their variables),
turns the hyper-parameters into tensors in its name scope, adds one fused update op per
variable (``ApplyGradientDescent``, ``ApplyMomentum``, ``ApplyAdam``; ``ScatterSub`` /
``SparseApplyMomentum`` for an IndexedSlices gradient, duplicate indices summed first),
colocated with the variable, then increments the global step after them, with TF's op names.
Each fused op's kernel is registered right after the optimizer that builds it.
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.graph.array_ops import convert_to_tensor
from simdist.graph.control_flow_ops import group
from simdist.graph.gradients import gradients
from simdist.graph.graph import Tensor, get_default_graph
from simdist.graph.indexed_slices import IndexedSlices
from simdist.graph.math_ops import cast
from simdist.graph.registry import NO_GRADIENT, NOT_DIFFERENTIABLE, register
from simdist.graph.variables import (GLOBAL_STEP, Variable, assign, assign_add, get_variable,
                                     initialized_variable, trainable_variables, zeros_initializer)


def _dedup(indices, values):
    unique, inverse = np.unique(indices, return_inverse=True)
    summed = np.zeros((len(unique),) + values.shape[indices.ndim:], values.dtype)
    np.add.at(summed, inverse.reshape(-1), values.reshape((-1,) + values.shape[indices.ndim:]))
    return unique, summed


def _per_element(flops):
    """The FLOPs of a fused update doing ``flops`` operations per element of the variable."""
    return lambda op, args, outs: flops * outs[0].size


class Optimizer:
    """tf.compat.v1.train.Optimizer: compute_gradients, apply_gradients, minimize.

    Hyper-parameters are "a Tensor or a floating point value" (or a function returning one),
    as TF1 documents them: ``_prepare`` turns each into a tensor once per ``apply_gradients``
    and every update casts it to its variable's dtype. Slots and non-slot variables (Adam's
    beta powers) are keyed by graph, so one optimizer works in several graphs.
    """

    def __init__(self, learning_rate, name):
        self.learning_rate, self._name = learning_rate, name
        self._slots: dict = {}  # (graph, variable op name, slot name) -> Variable
        self._non_slots: dict = {}  # (graph, name) -> Variable
        self._tensors: dict = {}  # hyper-parameter name -> its tensor (set by _prepare)

    def compute_gradients(self, loss, var_list=None):
        var_list = list(var_list) if var_list is not None else trainable_variables()
        if not var_list:
            raise InvalidArgumentError("No variables to optimize: create variables with "
                                       "trainable=True, or pass var_list")
        grads = gradients(loss, var_list)  # through each variable's reference, as TF
        return list(zip(grads, var_list))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
        if not grads_and_vars:
            raise InvalidArgumentError("No gradients provided for any variable: check that "
                                       "the loss depends on the variables")
        for _, var in grads_and_vars:
            if not isinstance(var, Variable):
                raise InvalidArgumentError(f"apply_gradients: {var!r} is not a Variable")
        graph = get_default_graph()
        self._create_slots([v for _, v in grads_and_vars])
        updates = []
        with graph.name_scope(name or self._name) as scope:
            self._prepare()
            for grad, var in grads_and_vars:
                with graph.name_scope("update_" + var.op.name), graph.colocate_with(var.op):
                    updates.append(self._apply(grad, var))
            if global_step is None:
                return self._finish(updates, scope)
            with graph.control_dependencies([self._finish(updates, "update")]), \
                    graph.colocate_with(global_step.op):
                return assign_add(global_step, 1, name=scope).op

    def minimize(self, loss, global_step=None, var_list=None, name=None):
        return self.apply_gradients(self.compute_gradients(loss, var_list), global_step, name)

    def get_slot(self, var, name):
        return self._slots.get((var.graph, var.op.name, name))

    def _create_slots(self, var_list):
        """Make the optimizer's slots for ``var_list`` before the updates (TF's order)."""

    def _slot(self, var, name, suffix):
        """A zero-filled slot variable ``VAR/suffix`` colocated with ``var`` (TF's
        ``_zeros_slot``), made once per variable and graph."""
        key = (var.graph, var.op.name, name)
        if key not in self._slots:
            graph = get_default_graph()
            with graph.name_scope(None), graph.colocate_with(var.op):
                self._slots[key] = initialized_variable(
                    f"{var.op.name}/{suffix}", var.shape, var.dtype, zeros_initializer(),
                    trainable=False)
        return self._slots[key]

    def _non_slot(self, name, initial_value, colocate_with):
        """A variable of the optimizer's own (Adam's beta powers), one per graph, colocated
        with ``colocate_with`` (TF's ``_create_non_slot_variable``)."""
        graph = get_default_graph()
        key = (graph, name)
        if key not in self._non_slots:
            with graph.colocate_with(colocate_with.op):
                self._non_slots[key] = Variable(initial_value, trainable=False, name=name)
        return self._non_slots[key]

    def _hyper(self, name, value):
        """``value`` (a tensor, a number or a function returning one) as a tensor named
        ``name`` in the optimizer's name scope (TF's ``_prepare``)."""
        value = value() if callable(value) else value
        tensor = value if isinstance(value, Tensor) else convert_to_tensor(value, name=name)
        self._tensors[name] = tensor
        return tensor

    def _cast(self, name, var):
        """A prepared hyper-parameter in ``var``'s dtype (TF's ``math_ops.cast``)."""
        tensor = self._tensors[name]
        return tensor if tensor.dtype == var.dtype else cast(tensor, var.dtype)

    def _prepare(self):
        self._hyper("learning_rate", self.learning_rate)

    def _finish(self, updates, name):
        return group(*updates, name=name)

    def _fused(self, op_type, inputs, var, attrs=None):
        graph = get_default_graph()
        return graph.create_op(op_type, inputs, [(var.dtype, var.shape)], attrs).outputs[0]


class GradientDescentOptimizer(Optimizer):
    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(learning_rate, name)

    def _apply(self, grad, var):
        lr = self._cast("learning_rate", var)
        if isinstance(grad, IndexedSlices):
            return self._fused("ScatterSub", [var._ref(), lr, grad.values, grad.indices], var)
        return self._fused("ApplyGradientDescent", [var._ref(), lr, grad], var)


def _apply_gd(op, args, rt):
    var, lr, grad = args
    var.write((var.read(op) - lr * grad).astype(grad.dtype))
    return [var.read(op).copy()]


def _scatter_sub(op, args, rt):
    var, lr, values, indices = args
    new = var.read(op).copy()
    unique, summed = _dedup(indices, values)
    new[unique] -= (lr * summed).astype(new.dtype)
    var.write(new)
    return [new.copy()]


register("ApplyGradientDescent", _apply_gd, flops=_per_element(2), stateful=True,
         ref_input=True, grad=NO_GRADIENT)
register("ScatterSub", _scatter_sub, flops=_per_element(2), stateful=True, ref_input=True,
         grad=NOT_DIFFERENTIABLE)  # TF's state_grad.py


class MomentumOptimizer(Optimizer):
    """tf.compat.v1.train.MomentumOptimizer; ``use_nesterov`` as TF's ApplyMomentum."""

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum",
                 use_nesterov=False):
        super().__init__(learning_rate, name)
        self.momentum, self.use_nesterov = momentum, bool(use_nesterov)

    def _create_slots(self, var_list):
        for var in var_list:
            self._slot(var, "momentum", self._name)

    def _prepare(self):
        super()._prepare()
        self._hyper("momentum", self.momentum)

    def _apply(self, grad, var):
        accum = self._slot(var, "momentum", self._name)
        lr, mom = self._cast("learning_rate", var), self._cast("momentum", var)
        attrs = {"use_nesterov": self.use_nesterov}
        if isinstance(grad, IndexedSlices):
            return self._fused("SparseApplyMomentum", [var._ref(), accum._ref(), lr,
                                                       grad.values, grad.indices, mom], var,
                               attrs)
        return self._fused("ApplyMomentum", [var._ref(), accum._ref(), lr, grad, mom], var,
                           attrs)


def _momentum_step(op, var, acc, lr, grad, momentum):
    """TF's ApplyMomentum: accum = accum * momentum + grad; var -= lr * accum, or with
    Nesterov var -= lr * grad + lr * momentum * accum."""
    acc = acc * momentum + grad
    if op.attrs.get("use_nesterov"):
        return acc, var - (grad * lr + acc * momentum * lr)
    return acc, var - lr * acc


def _apply_momentum(op, args, rt):
    var, accum, lr, grad, momentum = args
    acc, new = _momentum_step(op, var.read(op), accum.read(op), lr, grad, momentum)
    accum.write(acc.astype(grad.dtype))
    var.write(new.astype(grad.dtype))
    return [var.read(op).copy()]


def _sparse_momentum(op, args, rt):
    var, accum, lr, values, indices, momentum = args
    unique, summed = _dedup(indices, values)
    acc, new = accum.read(op).copy(), var.read(op).copy()
    acc[unique], new[unique] = _momentum_step(op, new[unique], acc[unique], lr, summed,
                                              momentum)
    accum.write(acc)
    var.write(new)
    return [new.copy()]


register("ApplyMomentum", _apply_momentum, flops=_per_element(4), stateful=True,
         ref_input=True, grad=NO_GRADIENT)
register("SparseApplyMomentum", _sparse_momentum, flops=_per_element(4), stateful=True,
         ref_input=True, grad=NO_GRADIENT)


class AdamOptimizer(Optimizer):
    """tf.compat.v1.train.AdamOptimizer. Its beta-power accumulators are made from
    ``beta1`` and ``beta2`` as given (a Python float makes them float32, whatever the
    variables' dtype), colocated with the variable whose name sorts first, once per graph."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 use_locking=False, name="Adam"):
        super().__init__(learning_rate, name)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def _create_slots(self, var_list):
        first = min(var_list, key=lambda v: v.name)
        self._non_slot("beta1_power", self.beta1, first)
        self._non_slot("beta2_power", self.beta2, first)
        for var in var_list:
            self._slot(var, "m", self._name)
            self._slot(var, "v", self._name + "_1")

    def _powers(self):
        graph = get_default_graph()
        return self._non_slots[(graph, "beta1_power")], self._non_slots[(graph, "beta2_power")]

    def _prepare(self):
        super()._prepare()
        for name in ("beta1", "beta2", "epsilon"):
            self._hyper(name, getattr(self, name))

    def _apply(self, grad, var):
        if isinstance(grad, IndexedSlices):
            grad = convert_to_tensor(grad)
        m, v = self._slot(var, "m", self._name), self._slot(var, "v", self._name + "_1")
        powers = [p._as_tensor() for p in self._powers()]
        powers = [p if p.dtype == var.dtype else cast(p, var.dtype) for p in powers]
        consts = [self._cast(x, var) for x in ("learning_rate", "beta1", "beta2", "epsilon")]
        return self._fused("ApplyAdam", [var._ref(), m._ref(), v._ref(), *powers, *consts,
                                         grad], var)

    def _finish(self, updates, name):
        graph = get_default_graph()
        b1, b2 = self._powers()
        with graph.control_dependencies(updates), graph.colocate_with(b1.op):
            new1 = assign(b1, b1._as_tensor() * self._tensors["beta1"])
            new2 = assign(b2, b2._as_tensor() * self._tensors["beta2"])
        return group(*updates, new1, new2, name=name)


def _apply_adam(op, args, rt):
    var, m, v, b1p, b2p, lr, beta1, beta2, epsilon, grad = args
    lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
    m_t = beta1 * m.read(op) + (1 - beta1) * grad
    v_t = beta2 * v.read(op) + (1 - beta2) * grad * grad
    m.write(m_t.astype(grad.dtype))
    v.write(v_t.astype(grad.dtype))
    var.write((var.read(op) - lr_t * m_t / (np.sqrt(v_t) + epsilon)).astype(grad.dtype))
    return [var.read(op).copy()]


register("ApplyAdam", _apply_adam, flops=_per_element(12), stateful=True, ref_input=True,
         grad=NO_GRADIENT)


def get_or_create_global_step(graph=None):
    """tf.compat.v1.train.get_or_create_global_step: the int64 step counter variable."""
    graph = graph or get_default_graph()
    existing = graph.get_collection(GLOBAL_STEP)
    if existing:
        return existing[0]
    with graph.as_default(), graph.name_scope(None):
        step = get_variable("global_step", shape=(), dtype="int64",
                            initializer=zeros_initializer(), trainable=False)
    graph.add_to_collection(GLOBAL_STEP, step)
    return step


def get_global_step(graph=None):
    found = (graph or get_default_graph()).get_collection(GLOBAL_STEP)
    return found[0] if found else None


create_global_step = get_or_create_global_step
