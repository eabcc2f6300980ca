"""The one rule for the types of the learner's answers, which every lesson's checks apply.

An exercise's docstring says "a pair", "a tuple of two ints", "a list": the checks accept what
Python code uses interchangeably for it, and nothing else.

- A pair (or triple...) is a tuple or a list of that length: both unpack the same way.
- A whole number is an int or a NumPy integer (``np.int64(3)``, what ``np.sum`` gives), never
  a bool (``True == 1``, but ``True`` is no count).
- A number is a whole number or a float (NumPy's included), never a bool.
- A list of results is a list or a tuple.
- A choice of items whose order says nothing (which batch sizes, which checkpoints) is a
  set, a frozenset, a list or a tuple; an item named twice counts once.
"""

from __future__ import annotations

from numbers import Integral, Real


def is_int(value) -> bool:
    """A whole number: an int or a NumPy integer, not a bool."""
    return isinstance(value, Integral) and not isinstance(value, bool) and \
        type(value).__name__ != "bool_"


def is_number(value) -> bool:
    """An int or a float (NumPy's too), not a bool."""
    return isinstance(value, Real) and not isinstance(value, bool) and \
        type(value).__name__ != "bool_"


def as_tuple(value, length: int | None, item=None) -> tuple | None:
    """``value`` as a tuple if it is a tuple or a list of ``length`` items (any number with
    None; each passing ``item``, e.g. ``is_int``, when given), else None."""
    if not isinstance(value, (tuple, list)) or length not in (None, len(value)):
        return None
    if item is not None and not all(item(v) for v in value):
        return None
    return tuple(value)


def as_list(value, length: int | None = None) -> list | None:
    """``value`` as a list if it is a list or a tuple (of ``length`` items when given), else
    None."""
    if not isinstance(value, (list, tuple)) or (length is not None and len(value) != length):
        return None
    return list(value)


def as_set(value, item=None) -> frozenset | None:
    """``value`` as a frozenset if it is a set, a frozenset, a list or a tuple (of items
    passing ``item`` when given), else None."""
    if not isinstance(value, (set, frozenset, list, tuple)):
        return None
    if item is not None and not all(item(v) for v in value):
        return None
    return frozenset(value)
