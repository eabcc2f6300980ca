"""The loader/trainer program on a shared queue: starvation appears with too few enqueue
threads and disappears with more; occupancy and waits are in the trace and drawn."""

import pytest

from simdist.training.input_pipeline import loader_trainer, plot_starvation, starvation_sweep
from simdist.trace.plots import plot_queue_occupancy

pytestmark = pytest.mark.usefixtures("fresh_tf1")


def test_threads_and_capacity_end_the_trainers_starvation():
    runs = {(threads, capacity): loader_trainer(capacity=capacity, loader_threads=threads,
                                                steps=40)
            for threads, capacity in ((1, 4), (3, 2), (3, 16))}
    assert runs[1, 4].starved_fraction > 0.5  # one reader cannot keep up
    assert runs[3, 2].starved_fraction > 0.05  # three can, but a stall empties a small queue
    assert runs[3, 16].starved_fraction < 0.05  # ... and a large one carries the trainer
    assert runs[3, 16].end_time < 0.6 * runs[1, 4].end_time  # training time is the floor
    for (_, capacity), run in runs.items():
        assert len(run.step_ends) == 40 and run.step_ends == sorted(run.step_ends)
        assert max(size for _, size in run.occupancy) <= capacity


def test_the_same_options_give_the_same_run():
    first, second = (loader_trainer(capacity=2, loader_threads=2, steps=6) for _ in range(2))
    assert first.trace.to_chrome() == second.trace.to_chrome()
    assert first.starved_ns == second.starved_ns


def test_sweep_and_plots(tmp_path):
    rows = starvation_sweep(capacities=(2, 8), loader_threads=(1, 2), steps=6)
    assert [(r["capacity"], r["loader_threads"]) for r in rows] == [(2, 1), (8, 1), (2, 2),
                                                                     (8, 2)]
    assert all(0 <= r["starved"] <= 1 for r in rows)
    plot_starvation(rows, tmp_path / "starvation.png")
    run = loader_trainer(capacity=2, loader_threads=1, steps=4)
    plot_queue_occupancy(run.trace, "examples", tmp_path / "occupancy.png")
    assert (tmp_path / "starvation.png").stat().st_size > 10_000
    assert (tmp_path / "occupancy.png").stat().st_size > 10_000


def test_a_batch_larger_than_the_queue_works_as_in_tf():
    # TF's waiting dequeue_many takes elements as they come, so it may ask for more than fit
    run = loader_trainer(capacity=2, batch=4, steps=3)
    assert len(run.step_ends) == 3 and max(size for _, size in run.occupancy) <= 2


def test_the_ensemble_aggregator_survives_a_slow_predictor_with_a_timeout():
    from simdist.training.ensemble import ensemble

    everyone = ensemble(predictors=3, inputs=3)
    assert everyone.means == [2.0, 4.0, 6.0] and everyone.timeouts == 0  # (1+2+3)/3 x input
    hurried = ensemble(predictors=3, inputs=3, slow=2, timeout_ms=1)
    assert hurried.received == [{0: 1.0, 1: 2.0}, {0: 2.0, 1: 4.0}, {0: 3.0, 1: 6.0}]
    assert hurried.timeouts == 3  # one per input: the slow predictor's late answers dropped
    patient = ensemble(predictors=3, inputs=3, slow=2, timeout_ms=20)
    assert patient.means == everyone.means and patient.timeouts == 0
