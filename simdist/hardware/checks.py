"""The argument checks of the hardware records (profiles, host costs, layouts): each raises
``InvalidArgumentError`` naming the field and the value it got."""

from __future__ import annotations

import math
import numbers

from simdist.base.errors import InvalidArgumentError, brief


def check_name(what: str, value) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"{what} must be a non-empty string, got {brief(value)}")


def check_choice(what: str, value, choices) -> None:
    if value not in choices:
        raise InvalidArgumentError(
            f"{what} {brief(value)} is not valid: expected one of {', '.join(choices)}")


def check_int(what: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"{what} must be an int, got {brief(value)}")
    if value < minimum:
        raise InvalidArgumentError(f"{what} must be >= {minimum}, got {brief(value)}")


def check_positive(what: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise InvalidArgumentError(f"{what} must be a number > 0, got {brief(value)}")
    if not math.isfinite(value):
        raise InvalidArgumentError(f"{what} must be finite, got {brief(value)}")


def check_efficiency(value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value <= 1:
        raise InvalidArgumentError(f"efficiency must be a number in (0, 1], got {brief(value)}")


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
