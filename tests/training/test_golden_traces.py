"""The built-in programs' traces stay byte-identical (refactors must not change behaviour).

The reference hashes in ``tests/golden/traces.sha256.json`` were taken before the simulator
was re-zoned; ``python -m tests.golden.cases --write`` stores new ones when a change of traces
is intended (say so in the commit message).
"""

import json

import pytest

from tests.golden.cases import CASES, HASHES, trace_hash

EXPECTED = json.loads(HASHES.read_text())


def test_every_case_has_a_stored_hash():
    assert sorted(EXPECTED) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_trace_is_byte_identical(name, tmp_path):
    assert trace_hash(name, tmp_path) == EXPECTED[name], (
        f"the trace of {name!r} changed; if that is intended, regenerate with "
        "'python -m tests.golden.cases --write' and say why in the commit")
