"""Stragglers as distributions in ``simdist ps`` (issue 29): each worker's compute time per
step is multiplied by a factor drawn from its own seeded generator
(``simdist.hardware.stragglers``, the same records as ``simdist run data_parallel``'s)."""

import pytest

from simdist.commands.cli import main as simdist_main
from simdist.hardware.stragglers import Stragglers, parse_stragglers
from simdist.training.ps_training import train_on_ps

BASE = dict(workers=4, steps=12, mode="async", step_us=[1000] * 4, seed=3)


def _compute_spans(run) -> list[int]:
    return [s.end - s.start for s in run.trace.spans if s.name == "compute" and s.cat == "wait"]


def test_lognormal_stragglers_stretch_steps_the_same_way_every_time():
    plain = train_on_ps(**BASE)
    slow = train_on_ps(**BASE, stragglers="lognormal:0.5")
    again = train_on_ps(**BASE, stragglers=parse_stragglers("lognormal:0.5"))
    assert set(_compute_spans(plain)) == {1_000_000}
    times = _compute_spans(slow)
    assert len(set(times)) > len(times) // 2  # each step its own draw
    assert min(times) < 1_000_000 < max(times)  # median 1: some faster, some slower
    assert times == _compute_spans(again) and slow.worker_runs == again.worker_runs
    other = train_on_ps(**{**BASE, "seed": 4}, stragglers="lognormal:0.5")
    assert _compute_spans(other) != times
    assert "time drawn from lognormal stragglers (sigma 0.5)" in "\n".join(slow.describe())


def test_an_exponential_tail_only_slows_and_a_zero_one_changes_nothing():
    plain = train_on_ps(**BASE)
    tail = train_on_ps(**BASE, stragglers="exponential:0.5")
    assert min(_compute_spans(tail)) >= 1_000_000
    assert tail.trained_ns > plain.trained_ns
    flat = train_on_ps(**BASE, stragglers=Stragglers("exponential", 0.0))
    assert flat.worker_runs == plain.worker_runs


def test_measured_step_times_give_their_shape(tmp_path):
    measured = tmp_path / "steps.txt"
    measured.write_text("10ms\n10ms\n10ms\n30ms  # a slow one\n")
    run = train_on_ps(**BASE, stragglers=f"empirical:{measured}")
    assert set(_compute_spans(run)) <= {1_000_000, 3_000_000}
    assert 3_000_000 in _compute_spans(run)


def test_a_bad_spec_is_one_line(capsys):
    with pytest.raises(SystemExit):
        simdist_main(["ps", "--stragglers", "lognormal:x"])
    assert "expected lognormal:NUMBER" in capsys.readouterr().err
    from simdist.base.errors import InvalidArgumentError
    with pytest.raises(InvalidArgumentError, match="^train_on_ps: stragglers"):
        train_on_ps(**BASE, stragglers="gamma:2")
