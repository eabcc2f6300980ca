"""What the tasks of a TF2 parameter-server cluster tell each other, as bytes: the calls of
the coordinator's RPCs (a scheduled function by its registered name and its small
arguments), their outcomes (values or an error by class name and message), and the update
rules a ps applies (TF's ``ResourceApply*`` ops: SGD with its learning rate, assign-add).

Nothing here is Python code travelling: a function or a rule is named, and every MPI rank
runs the same program, which registers the same names (``InProcessCluster.register``). A
call's header is compact JSON in a ``uint8`` array of at least ``RPC_BYTES`` (an RPC's
header; a longer call costs its length), the values' arrays travel beside it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simdist.base.errors import InvalidArgumentError, brief
from simdist.sim.wire import decode_header, encode_header


# -- values: a structure spec and its arrays ----------------------------------------------------

def flatten(value, arrays: list, what: str = "value"):
    """The JSON spec of ``value`` (None, scalars, str, numpy arrays, lists, tuples, dicts
    with str keys); its numbers are appended to ``arrays``."""
    if value is None:
        return "n"
    if isinstance(value, IteratorRef):
        return ["w", value.dataset, value.number]
    if isinstance(value, str):
        return ["s", value]
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject or value.dtype.kind in "USV":
            raise InvalidArgumentError(f"{what} {brief(value)}: an array of dtype {value.dtype} "
                                       "cannot travel between tasks; expected numbers")
        arrays.append(value)
        return "a"
    if isinstance(value, np.generic):
        arrays.append(np.asarray(value))
        return "g"
    for kind, cls in (("b", bool), ("i", int), ("f", float)):
        if isinstance(value, cls):
            arrays.append(np.asarray(value))
            return kind
    if isinstance(value, (list, tuple)):
        kind = "l" if isinstance(value, list) else "t"
        specs = [flatten(v, arrays, what) for v in value]
        if len(specs) > 1 and all(s == specs[0] for s in specs) and isinstance(specs[0], str):
            return [kind.upper(), len(specs), specs[0]]  # n leaves of one kind
        return [kind, specs]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return ["d", [[k, flatten(v, arrays, what)] for k, v in value.items()]]
    raise InvalidArgumentError(f"{what} {brief(value)} of type {type(value).__name__} cannot "
                               "travel between tasks: expected None, numbers, str, numpy "
                               "arrays, or lists, tuples and dicts (str keys) of them")


class IteratorRef(NamedTuple):
    """A per-worker iterator in a call's arguments: the dataset function's registered name
    and the iterator's number; the worker that runs the call resolves it to its own."""

    dataset: str
    number: int


def unflatten(spec, arrays, resolve=None):
    """Inverse of ``flatten``: ``arrays`` is an iterator over the arrays; ``resolve(ref)``
    gives what an ``IteratorRef`` stands for on this task."""
    if isinstance(spec, str):
        if spec == "n":
            return None
        a = next(arrays)
        return {"a": lambda: a, "g": lambda: a[()], "b": lambda: bool(a), "i": lambda: int(a),
                "f": lambda: float(a)}[spec]()
    kind = spec[0]
    if kind == "s":
        return spec[1]
    if kind == "w":
        ref = IteratorRef(spec[1], spec[2])
        return ref if resolve is None else resolve(ref)
    if kind in "LT":
        items = [unflatten(spec[2], arrays, resolve) for _ in range(spec[1])]
        return items if kind == "L" else tuple(items)
    if kind in "lt":
        items = [unflatten(s, arrays, resolve) for s in spec[1]]
        return items if kind == "l" else tuple(items)
    return {k: unflatten(s, arrays, resolve) for k, s in spec[1]}


def encode(header: dict, value=None, what: str = "value") -> list:
    """A payload: the header (with the spec of ``value`` under "v") and ``value``'s arrays."""
    arrays: list = []
    header = {**header, "v": flatten(value, arrays, what)}
    return [encode_header(header)] + arrays


def decode(payload, resolve=None) -> tuple[dict, object]:
    """(header, value) of a payload ``encode`` made (``resolve``: see ``unflatten``)."""
    header = decode_header(payload[0])
    return header, unflatten(header["v"], iter(payload[1:]), resolve)


# -- update rules -------------------------------------------------------------------------------

class UpdateRule(NamedTuple):
    """What a ps does with a value sent to a variable (TF's ``ResourceApply*`` op and its
    attributes): ``name`` a built-in rule or one registered on every rank, ``params`` its
    numbers (SGD's learning rate)."""

    name: str
    params: tuple = ()

    def apply(self, variable: np.ndarray, value, rules: dict) -> np.ndarray:
        fn = BUILTIN_RULES.get(self.name) or rules.get(self.name)
        if fn is None:
            raise InvalidArgumentError(f"update rule {self.name!r} is not registered on this "
                                       f"rank: expected one of {sorted(BUILTIN_RULES)} or a "
                                       "rule every rank registers (cluster.register_rule)")
        return fn(variable, value, *self.params)


def SGD(learning_rate) -> UpdateRule:  # noqa: N802 -- TF's name
    """``tf.keras.optimizers.SGD(learning_rate)``'s apply: v - learning_rate * g, in the
    variable's dtype."""
    return UpdateRule("sgd", (float(learning_rate),))


ASSIGN_ADD = UpdateRule("assign_add")
ASSIGN_SUB = UpdateRule("assign_sub")

BUILTIN_RULES = {
    "sgd": lambda v, g, lr: v - v.dtype.type(lr) * g,
    "assign_add": lambda v, g: v + g,
    "assign_sub": lambda v, g: v - g,
}


__all__ = ["ASSIGN_ADD", "ASSIGN_SUB", "IteratorRef", "SGD", "UpdateRule", "decode", "encode"]
