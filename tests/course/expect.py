"""One assertion for a check's result on a learner's answer, shared by the lesson tests of
issue 28's "predict, then run" exercises and their "why" choices."""


def assert_outcome(result, message, hint):
    """``result`` (a check's) passed when ``message`` is None, else failed with ``message`` in
    its message and a hint that starts with ``hint``."""
    assert result.passed == (message is None), result.message
    if message is not None:
        assert message in result.message, result.message
        assert result.hint.startswith(hint), result.hint
