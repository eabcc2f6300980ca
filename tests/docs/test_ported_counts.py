"""The README's count of TensorFlow's own tests ported to simdist is the collected count."""

import re
from collections import Counter

import pytest

from tests.conftest import ROOT


class _Collector:
    def __init__(self):
        self.ids = []

    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]


def test_the_readme_counts_the_ported_tf_tests_as_pytest_collects_them():
    collector = _Collector()
    code = pytest.main(["--collect-only", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                        str(ROOT / "tests" / "tf1" / "ports")], plugins=[collector])
    assert code == 0
    files = Counter(node.split("::")[0].rsplit("/", 1)[-1] for node in collector.ids)
    partitioned = files.pop("test_partitioned_variables.py")
    queues = sum(files.values())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"`sparse_conditional_accumulator_test` \((\d+) tests\), and "
                       r"`partitioned_variables_test` with the\npartitioner tests of "
                       r"`sharded_variable_test` \((\d+) tests\): all (\d+) pass", readme)
    assert stated, "the README's sentence on the ported TF tests is gone"
    assert tuple(map(int, stated.groups())) == (queues, partitioned, queues + partitioned)
