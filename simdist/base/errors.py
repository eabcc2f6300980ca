"""Errors that teach: every one names the offending value and what was expected.

Names follow TensorFlow's error classes where TF has one (tf.errors.*); all are ValueError
subclasses so that ``except ValueError`` catches bad input.
"""

import reprlib


class SimdistError(ValueError):
    """Base class of every simdist input error."""


class InvalidArgumentError(SimdistError):
    """Models tf.errors.InvalidArgumentError: an argument has a bad value."""


class NotFoundError(SimdistError):
    """Models tf.errors.NotFoundError: a named thing (task, profile, program) does not exist."""


class OutOfRangeError(SimdistError):
    """Models tf.errors.OutOfRangeError: an index is outside its valid range."""


class FailedPreconditionError(SimdistError):
    """Models tf.errors.FailedPreconditionError: the system is not in a state for this
    (e.g. reading an uninitialized variable)."""


class ResourceExhaustedError(SimdistError):
    """Models tf.errors.ResourceExhaustedError: out of memory, or another resource ran out."""


class DeadlineExceededError(SimdistError):
    """Models tf.errors.DeadlineExceededError: an operation timed out."""


class UnavailableError(SimdistError):
    """Models tf.errors.UnavailableError: a task or service cannot be reached."""


class CancelledError(SimdistError):
    """Models tf.errors.CancelledError: an operation was cancelled."""


class UnimplementedError(SimdistError):
    """Models tf.errors.UnimplementedError: an operation is not supported."""


class AbortedError(SimdistError):
    """Models tf.errors.AbortedError: the operation was aborted (e.g. a session closed by
    ``Session.reset``)."""


class DataLossError(SimdistError):
    """Models tf.errors.DataLossError: a file (a checkpoint) is corrupt or cut short."""


class UnknownError(SimdistError):
    """Models tf.errors.UnknownError: what TF raises when Python code it runs (a py_func)
    raised an exception of its own; here, a task's main."""


def check_ints(function: str, **values) -> None:
    """Each of ``values`` must be an int >= 1 (not a bool): else one line naming the value,
    e.g. "train_on_ps: workers=0, expected an int >= 1"."""
    for label, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{function}: {label}={value!r}, expected an int >= 1")


def stricter_than_tf(why: str) -> str:
    """The end of an error message for input that TensorFlow accepts and simdist refuses on
    purpose (the differential tests look for it)."""
    return f" (TensorFlow accepts this; simdist does not, because {why})"


_BRIEF = reprlib.Repr()  # (its keyword arguments need Python 3.12)
_BRIEF.maxlevel, _BRIEF.maxstring, _BRIEF.maxlong, _BRIEF.maxother = 3, 60, 40, 60
_BRIEF.maxtuple = _BRIEF.maxlist = _BRIEF.maxdict = _BRIEF.maxset = 6


def brief(value) -> str:
    """``repr(value)`` cut short (at most about 200 characters, 3 levels deep), for error
    messages about a value that a user handed in and that may be huge."""
    return _BRIEF.repr(value)
