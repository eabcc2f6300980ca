"""realdist.training.queue_compare's arithmetic (no TensorFlow): the time-averaged queue size, the
rows comparing a simulated and a real loader/trainer, and the simulated counterpart."""

import math
from types import SimpleNamespace

from realdist.training.queue_compare import (compare_pipelines, format_comparison, mean_occupancy,
                                             simulate_like)


def _run(steps, end, starved, occupancy):
    return SimpleNamespace(step_ends=list(range(steps)), end_time=end, starved_ns=starved,
                           occupancy=occupancy, starved_fraction=starved / end)


def test_mean_occupancy_weights_each_size_by_how_long_it_held():
    # empty for 10 ns, 4 for 30 ns, 2 for the last 60 ns
    assert mean_occupancy([(10, 4), (40, 2)], 100) == (4 * 30 + 2 * 60) / 100
    assert mean_occupancy([], 100) == 0.0 and mean_occupancy([(5, 3)], 0) == 0.0
    assert mean_occupancy([(50, 1), (200, 9)], 100) == 0.5  # samples past the end count not


def test_compare_pipelines_gives_each_figure_and_its_ratio():
    sim = _run(10, 500_000_000, 250_000_000, [(0, 2)])
    real = _run(10, 1_000_000_000, 500_000_000, [])
    rows = {name: (a, b, r) for name, a, b, r in compare_pipelines(sim, real)}
    assert rows["steps per second"] == (20.0, 10.0, 2.0)
    assert rows["trainer starved (share of the time)"] == (0.5, 0.5, 1.0)
    size = rows["queue size (time average)"]
    assert size[:2] == (2.0, 0.0) and math.isnan(size[2])  # nothing to compare with
    table = format_comparison(compare_pipelines(sim, real))
    assert table[1].split()[-3:] == ["20.00", "10.00", "2.00"]


def test_the_simulated_counterpart_does_the_real_programs_work():
    options = {"capacity": 4, "loaders": 1, "steps": 6, "batch": 2, "load_ms": 10,
               "train_ms": 2, "element_size": 8}
    run = simulate_like(options)
    assert len(run.step_ends) == 6
    # one reader of 10 ms per example feeds 2 examples a step: 20 ms a step
    gaps = [b - a for a, b in zip(run.step_ends, run.step_ends[1:])]
    assert all(abs(gap - 20_000_000) < 1_000_000 for gap in gaps), gaps
    assert {s.name for s in run.trace.spans if s.cat != "wait"} >= {"train"}
