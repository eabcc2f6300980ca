"""Models tf.compat.v1.train's optimizers: GradientDescent, Momentum and Adam.

``compute_gradients`` calls ``gradients``; ``apply_gradients`` adds one fused update op per
variable (``ApplyGradientDescent``, ``ApplyMomentum``, ``ApplyAdam``; ``ScatterSub`` /
``SparseApplyMomentum`` for an IndexedSlices gradient, duplicate indices summed first),
colocated with the variable, then increments the global step after them. Each fused op's
kernel is registered right after the optimizer that builds it.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .array_ops import constant, convert_to_tensor
from .control_flow_ops import group
from .gradients import gradients
from .graph import get_default_graph
from .indexed_slices import IndexedSlices
from .registry import NO_GRADIENT, register
from .variables import (
    GLOBAL_STEP,
    Variable,
    assign,
    assign_add,
    get_variable,
    trainable_variables,
    zeros_initializer,
)


def _dedup(indices, values):
    unique, inverse = np.unique(indices, return_inverse=True)
    summed = np.zeros((len(unique),) + values.shape[indices.ndim:], values.dtype)
    np.add.at(summed, inverse.reshape(-1), values.reshape((-1,) + values.shape[indices.ndim:]))
    return unique, summed


def _per_element(flops):
    """The FLOPs of a fused update doing ``flops`` operations per element of the variable."""
    return lambda op, args, outs: flops * outs[0].size


class Optimizer:
    """tf.compat.v1.train.Optimizer: compute_gradients, apply_gradients, minimize."""

    def __init__(self, learning_rate, name):
        self.learning_rate, self._name = learning_rate, name
        self._slots: dict = {}

    def compute_gradients(self, loss, var_list=None):
        var_list = list(var_list) if var_list is not None else trainable_variables()
        if not var_list:
            raise InvalidArgumentError("No variables to optimize: create variables with "
                                       "trainable=True, or pass var_list")
        grads = gradients(loss, [v._as_tensor() for v in var_list])
        return list(zip(grads, var_list))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
        if not grads_and_vars:
            raise InvalidArgumentError("No gradients provided for any variable: check that "
                                       "the loss depends on the variables")
        graph = get_default_graph()
        updates = []
        with graph.name_scope(name or self._name):
            self._prepare()
            for grad, var in grads_and_vars:
                if not isinstance(var, Variable):
                    raise InvalidArgumentError(f"apply_gradients: {var!r} is not a Variable")
                with graph.colocate_with(var.op), graph.name_scope("update_" + var.op.name):
                    updates.append(self._apply(grad, var))
            with graph.control_dependencies(updates):
                finish = self._finish(updates)
            if global_step is None:
                return finish
            with graph.control_dependencies([finish]), graph.colocate_with(global_step.op):
                return assign_add(global_step, constant(1, dtype=global_step.dtype),
                                  name=name or self._name).op

    def minimize(self, loss, global_step=None, var_list=None, name=None):
        return self.apply_gradients(self.compute_gradients(loss, var_list), global_step, name)

    def get_slot(self, var, name):
        return self._slots.get((var.op.name, name))

    def _slot(self, var, name, suffix):
        key = (var.op.name, name)
        if key not in self._slots:
            graph = get_default_graph()
            with graph.name_scope(None), graph.colocate_with(var.op):
                self._slots[key] = Variable(np.zeros(var.shape, var.dtype.as_numpy_dtype),
                                            trainable=False, name=f"{var.op.name}/{suffix}")
        return self._slots[key]

    def _constant(self, value, dtype):
        return constant(value, dtype=dtype)

    def _prepare(self):
        pass

    def _finish(self, updates):
        return group(*updates, name="update")

    def _fused(self, op_type, inputs, var):
        graph = get_default_graph()
        return graph.create_op(op_type, inputs, [(var.dtype, var.shape)]).outputs[0]


class GradientDescentOptimizer(Optimizer):
    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(learning_rate, name)

    def _apply(self, grad, var):
        lr = self._constant(self.learning_rate, var.dtype)
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
         grad=NO_GRADIENT)


class MomentumOptimizer(Optimizer):
    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum"):
        super().__init__(learning_rate, name)
        self.momentum = momentum

    def _apply(self, grad, var):
        accum = self._slot(var, "momentum", self._name)
        lr = self._constant(self.learning_rate, var.dtype)
        mom = self._constant(self.momentum, var.dtype)
        if isinstance(grad, IndexedSlices):
            return self._fused("SparseApplyMomentum", [var._ref(), accum._ref(), lr,
                                                       grad.values, grad.indices, mom], var)
        return self._fused("ApplyMomentum", [var._ref(), accum._ref(), lr, grad, mom], var)


def _apply_momentum(op, args, rt):
    var, accum, lr, grad, momentum = args
    acc = accum.read(op) * momentum + grad
    accum.write(acc.astype(grad.dtype))
    var.write((var.read(op) - lr * acc).astype(grad.dtype))
    return [var.read(op).copy()]


def _sparse_momentum(op, args, rt):
    var, accum, lr, values, indices, momentum = args
    unique, summed = _dedup(indices, values)
    acc, new = accum.read(op).copy(), var.read(op).copy()
    acc[unique] = acc[unique] * momentum + summed
    new[unique] -= lr * acc[unique]
    accum.write(acc)
    var.write(new)
    return [new.copy()]


register("ApplyMomentum", _apply_momentum, flops=_per_element(4), stateful=True,
         ref_input=True, grad=NO_GRADIENT)
register("SparseApplyMomentum", _sparse_momentum, flops=_per_element(4), stateful=True,
         ref_input=True, grad=NO_GRADIENT)


class AdamOptimizer(Optimizer):
    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 use_locking=False, name="Adam"):
        super().__init__(learning_rate, name)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self._powers = None

    def _apply(self, grad, var):
        if self._powers is None:
            graph = get_default_graph()
            with graph.name_scope(None), graph.colocate_with(var.op):
                self._powers = (Variable(np.array(self.beta1, var.dtype.as_numpy_dtype),
                                         trainable=False, name="beta1_power"),
                                Variable(np.array(self.beta2, var.dtype.as_numpy_dtype),
                                         trainable=False, name="beta2_power"))
        if isinstance(grad, IndexedSlices):
            grad = convert_to_tensor(grad)
        m, v = self._slot(var, "m", self._name), self._slot(var, "v", self._name + "_1")
        consts = [self._constant(x, var.dtype) for x in
                  (self.learning_rate, self.beta1, self.beta2, self.epsilon)]
        return self._fused("ApplyAdam", [var._ref(), m._ref(), v._ref(), self._powers[0]._ref(),
                                         self._powers[1]._ref(), *consts, grad], var)

    def _finish(self, updates):
        b1, b2 = self._powers
        graph = get_default_graph()
        with graph.colocate_with(b1.op):
            new1 = _scaled_assign(b1, self.beta1)
            new2 = _scaled_assign(b2, self.beta2)
        return group(*updates, new1, new2, name="update")


def _apply_adam(op, args, rt):
    var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad = args
    b1p, b2p = beta1_power.read(op), beta2_power.read(op)
    lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
    m_t = beta1 * m.read(op) + (1 - beta1) * grad
    v_t = beta2 * v.read(op) + (1 - beta2) * grad * grad
    m.write(m_t.astype(grad.dtype))
    v.write(v_t.astype(grad.dtype))
    var.write((var.read(op) - lr_t * m_t / (np.sqrt(v_t) + epsilon)).astype(grad.dtype))
    return [var.read(op).copy()]


register("ApplyAdam", _apply_adam, flops=_per_element(12), stateful=True, ref_input=True,
         grad=NO_GRADIENT)


def _scaled_assign(var, factor):
    return assign(var, var._as_tensor() * factor)


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
