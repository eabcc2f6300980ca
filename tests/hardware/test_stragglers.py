"""Stragglers as distributions (issue 29, item 5): lognormal, shifted exponential and
measured step times, seeded per worker, each spec read or refused in one line."""

import math
import statistics

import pytest

from simdist.base.errors import InvalidArgumentError
from simdist.hardware.stragglers import NONE, Stragglers, parse_stragglers, read_step_times


def test_lognormal_has_median_one_and_its_tail_by_sigma():
    factors = parse_stragglers("lognormal:0.3").factors(seed=0, worker=0, n=20_000)
    assert statistics.median(factors) == pytest.approx(1.0, abs=0.02)
    above = sum(f >= math.exp(0.3 * 1.6449) for f in factors) / len(factors)
    assert above == pytest.approx(0.05, abs=0.01)  # 1 step in 20 is 1.64x or more


def test_exponential_is_never_faster_and_adds_its_mean():
    factors = parse_stragglers("exp:0.2").factors(seed=1, worker=3, n=20_000)
    assert min(factors) >= 1.0
    assert statistics.fmean(factors) == pytest.approx(1.2, abs=0.01)


def test_empirical_draws_measured_times_over_their_median(tmp_path):
    path = tmp_path / "steps.txt"
    path.write_text("# seconds, from a real run\n0.100 0.100, 0.100\n0.400  # a slow one\n")
    assert read_step_times(path) == (1.0, 1.0, 1.0, 4.0)
    (tmp_path / "units.txt").write_text("100ms 100ms\n0.4s\n")
    assert read_step_times(tmp_path / "units.txt") == (1.0, 1.0, 4.0)
    stragglers = parse_stragglers(f"empirical:{path}")
    factors = stragglers.factors(seed=0, worker=0, n=4000)
    assert set(factors) == {1.0, 4.0}
    assert factors.count(4.0) / len(factors) == pytest.approx(0.25, abs=0.03)
    assert "4 measured step times" in stragglers.describe()


def test_draws_are_seeded_per_worker():
    s = parse_stragglers("lognormal:0.5")
    assert s.factors(7, 2, 10) == s.factors(7, 2, 10)
    assert s.factors(7, 2, 10) != s.factors(7, 3, 10) != s.factors(8, 2, 10)
    assert s.factors(7, 2, 5) == s.factors(7, 2, 10)[:5]  # a longer run extends a shorter
    assert NONE.factors(0, 0, 3) == [1.0, 1.0, 1.0] and not NONE.active
    assert parse_stragglers("none") is NONE


@pytest.mark.parametrize("spec, message", [
    ("lognormal:x", "lognormal:NUMBER"), ("lognormal:-1", ">= 0"), ("exp:1e9", "<= 10"),
    ("gamma:2", "expected none, lognormal:SIGMA"), ("empirical:", "empirical:FILE"),
    ("lognormal:nan", ">= 0"),
])
def test_bad_specs_are_one_line_errors(spec, message):
    with pytest.raises(InvalidArgumentError, match=message):
        parse_stragglers(spec)


def test_bad_step_time_files(tmp_path):
    for content, message in (("0.1\n", "expected at least 2"), ("0.1 0\n", "line 1: '0'"),
                             ("0.1\n0.2 slow\n", "line 2: 'slow' is not a time")):
        path = tmp_path / "t.txt"
        path.write_text(content)
        with pytest.raises(InvalidArgumentError, match=message):
            read_step_times(path)
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        parse_stragglers(f"empirical:{tmp_path / 'absent.txt'}")
    with pytest.raises(InvalidArgumentError, match="no measured step times"):
        Stragglers("empirical")
