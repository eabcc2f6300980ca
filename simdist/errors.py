"""Errors that teach: every one names the offending value and what was expected.

Names follow TensorFlow's error classes where TF has one (tf.errors.*); all are ValueError
subclasses so that ``except ValueError`` catches bad input.
"""


class SimdistError(ValueError):
    """Base class of every simdist input error."""


class InvalidArgumentError(SimdistError):
    """Models tf.errors.InvalidArgumentError: an argument has a bad value."""


class NotFoundError(SimdistError):
    """Models tf.errors.NotFoundError: a named thing (task, profile, program) does not exist."""


class OutOfRangeError(SimdistError):
    """Models tf.errors.OutOfRangeError: an index is outside its valid range."""
