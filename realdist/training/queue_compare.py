"""The loader/trainer program simulated and measured, side by side (issue: queues, item 4).

``simulate_like`` runs simdist's ``loader_trainer`` with the real run's options mapped onto
the simulator's: a read of ``load_ms`` is a ``read_record`` of ``load_ms`` that never stalls,
a step of ``train_ms`` is a ``timed_py_func`` of that length (the real program's steps are
``py_func`` sleeps), the same capacity, enqueue threads, batch and element size.
``compare_pipelines`` gives the figures both runs have (steps per second, the trainer's
starved share, the queue's time-averaged size) with their ratio, simulated / real.

What the simulator leaves out: a real ``Session.run`` through a gRPC master costs about a
millisecond or more of fixed overhead per call on this machine (client to master, master to
the ps for the dequeue, the py_func's call into Python), which the default ``cpu`` profile
does not price. While the loader is the bottleneck the two agree closely; when the trainer is,
the real run is slower by that overhead per step (calibrating it is the benchmarks issue's job).
"""

from __future__ import annotations

from simdist.training.input_pipeline import loader_trainer

from realdist.training.queue_programs import PipelineRun, real_loader_trainer


def simulate_like(options: dict):
    """simdist's ``loader_trainer`` for a real run's ``options`` (``PipelineRun``'s trace
    metadata: capacity, loaders, steps, batch, load_ms, train_ms, element_size)."""
    return loader_trainer(capacity=options["capacity"], loader_threads=options["loaders"],
                          steps=options["steps"], batch=options["batch"],
                          element_size=options["element_size"],
                          read_us=options["load_ms"] * 1000, stall_probability=0.0,
                          train_us=options["train_ms"] * 1000)


def mean_occupancy(occupancy: list, end: int) -> float:
    """The queue's size averaged over time, from its samples [(t ns, size)] (each size holds
    until the next sample; before the first one the queue is empty) up to ``end``."""
    total, last_t, last_size = 0, 0, 0
    for t, size in occupancy:
        total += last_size * (min(t, end) - last_t)
        last_t, last_size = min(t, end), size
    total += last_size * (end - last_t)
    return total / end if end > 0 else 0.0


def _figures(run) -> dict:
    steps_per_second = len(run.step_ends) / (run.end_time / 1e9) if run.end_time else 0.0
    return {"steps per second": steps_per_second,
            "trainer starved (share of the time)": run.starved_fraction,
            "queue size (time average)": mean_occupancy(run.occupancy, run.end_time)}


def compare_pipelines(simulated, real: PipelineRun) -> list[tuple[str, float, float, float]]:
    """[(figure, simulated, real, simulated / real)]; the ratio is NaN where the real figure
    is 0 (there is nothing to compare it with)."""
    sim, measured = _figures(simulated), _figures(real)
    return [(name, sim[name], measured[name],
             sim[name] / measured[name] if measured[name] else float("nan"))
            for name in sim]


def format_comparison(rows) -> list[str]:
    """The rows as a table for the command line."""
    lines = [f"{'':38s}{'simulated':>11s}{'real':>11s}{'sim/real':>10s}"]
    for name, sim, real, ratio in rows:
        lines.append(f"{name:38s}{sim:11.2f}{real:11.2f}{ratio:10.2f}")
    return lines


def compare_loader_trainer(**options):
    """Run the program on real TF (``real_loader_trainer(**options)``), then simulate it with
    the same options: (simulated run, real run, ``compare_pipelines`` rows)."""
    real = real_loader_trainer(**options)
    simulated = simulate_like(real.trace.metadata["options"])
    return simulated, real, compare_pipelines(simulated, real)
