"""Parameter-server training simulated and measured, side by side (issue 12, item 6).

``simulate_like`` runs simdist's ``train_on_ps`` with a real run's options (``step_us`` =
``step_ms`` x 1000, the same workers, ps tasks, steps, ``replicas_to_aggregate``, learning
rate and seed); ``compare_ps_runs`` lines up what both give: the global step, each worker's
steps (runs), applied and dropped gradients and last loss, for async runs the staleness,
and with failures the global step at each, the checkpoint's step the chief restored and the
sessions made again; ``format_comparison`` prints them with a mark where they differ.
"""

from __future__ import annotations

import math
import tempfile

from simdist.training.ps_training import PSTrainingRun, train_on_ps

from realdist.training.ps_programs import real_train_on_ps


def simulate_like(options: dict) -> PSTrainingRun:
    """simdist's ``train_on_ps`` for a real run's ``options`` (its trace metadata); its
    checkpoints, if any, go to a folder of its own, removed after."""
    with tempfile.TemporaryDirectory(prefix="simdist-ps-") as folder:
        return train_on_ps(
            workers=options["workers"], ps=options["ps"], mode=options["mode"],
            steps=options["steps"], step_us=[ms * 1000 for ms in options["step_ms"]],
            replicas_to_aggregate=options["replicas_to_aggregate"],
            learning_rate=options["learning_rate"], seed=options["seed"],
            stop_grace_period_secs=options["stop_grace_period_secs"],
            failures=options.get("failures", ()),
            checkpoint_dir=folder if options.get("checkpoint_dir") else None,
            save_checkpoint_steps=options.get("save_checkpoint_steps"),
            model=options.get("model", "dense"))


def failure_figures(run: PSTrainingRun) -> list[tuple]:
    """[(figure, value)] of a run with failures: for each, the global step when the task
    failed (the highest any run had reached); the step the chief restored (None: no
    restore); the sessions each worker made again (or restarts)."""
    rows = []
    for event in (e for e in run.trace.instants if e.name == "task failed"):
        reached = [step for runs in run.worker_runs.values() for t, step, _ in runs
                   if t <= event.t]
        rows.append((f"{event.pid} failed: global step", max(reached, default=0)))
    if rows:
        step = None if run.restored_from is None else int(run.restored_from.rsplit("-", 1)[1])
        rows.append(("restored checkpoint's step", step))
        rows += [(f"worker {k} sessions made again", n) for k, n in run.recoveries.items()]
    return rows


def compare_ps_runs(simulated: PSTrainingRun, real: PSTrainingRun) -> list[tuple]:
    """[(figure, simulated, real)]: counts as ints, losses and mean staleness as floats."""
    rows = [("global step", simulated.global_step, real.global_step)]
    sim_grads, real_grads = simulated.gradients_by_worker(), real.gradients_by_worker()
    for k in sorted(set(simulated.worker_runs) | set(real.worker_runs)):
        rows.append((f"worker {k} steps", simulated.worker_steps.get(k, 0),
                     real.worker_steps.get(k, 0)))
        for i, label in enumerate(("applied", "dropped")):
            rows.append((f"worker {k} gradients {label}", sim_grads.get(k, (0, 0))[i],
                         real_grads.get(k, (0, 0))[i]))
        rows.append((f"worker {k} last loss", _last_loss(simulated, k), _last_loss(real, k)))
    sim_failures, real_failures = failure_figures(simulated), failure_figures(real)
    rows += [(name, sim, dict(real_failures).get(name)) for name, sim in sim_failures]
    if simulated.mode == "async":
        rows.append(("staleness max", max(simulated.staleness, default=0),
                     max(real.staleness, default=0)))
        rows.append(("staleness mean", _mean(simulated.staleness), _mean(real.staleness)))
    return rows


def _last_loss(run: PSTrainingRun, k: int) -> float:
    runs = run.worker_runs.get(k, [])
    return float(runs[-1][2]) if runs else float("nan")


def _mean(values) -> float:
    return sum(values) / len(values) if values else 0.0


def differs(simulated, real) -> bool:
    """Counts (and None: no such figure) differ when unequal; floats (losses, means) beyond
    1e-3 relative."""
    if simulated is None or real is None or (isinstance(simulated, int)
                                             and isinstance(real, int)):
        return simulated != real
    if math.isnan(simulated) or math.isnan(real):
        return math.isnan(simulated) != math.isnan(real)
    return not abs(simulated - real) <= 1e-3 * max(1.0, abs(simulated), abs(real))


def format_comparison(rows) -> list[str]:
    """The rows as a table, with "<-" where simulated and real differ."""
    lines = [f"{'':30s}{'simulated':>11s}{'real TF':>11s}"]
    for name, sim, real in rows:
        cells = "".join(f"{'-':>11s}" if v is None else f"{v:11d}" if isinstance(v, int)
                        else f"{v:11.3f}" for v in (sim, real))
        lines.append(f"{name:30s}{cells}" + ("  <- differs" if differs(sim, real) else ""))
    return lines


def arrival_order(run: PSTrainingRun) -> list[tuple]:
    """A sync run's gradients in the order they reached the ps: [(worker, local step,
    applied)], from the accumulators lane (one accumulator's events: every accumulator
    decides alike)."""
    events = [e for e in run.trace.instants if e.lane == "accumulators"]
    first = events[0].args["accumulator"] if events else None
    return [(int(e.args["source"].rsplit(":", 1)[1]), e.args["local_step"],
             e.name == "gradient applied") for e in events
            if e.args["accumulator"] == first]


def compare_train_on_ps(attempts: int = 1, **options):
    """Run the program on real TF (``real_train_on_ps(**options)``), then simulate it with
    the same options: (simulated run, real run, ``compare_ps_runs`` rows).

    The order in which gradients reach the ps is the machine's: a worker a few ms late
    (a busy machine) can reach it after another one where simdist, with no such delays,
    puts it before, and the counts and losses may then follow another story. With
    ``attempts`` > 1 a sync run that differs from simdist in some figure *and* in its
    ``arrival_order`` is run again, up to that many times in all (a difference in the
    same order is the model's, and is kept); the real trace's metadata keeps each
    attempt's order (``attempts``), and the last run is compared."""
    tried = []
    for _ in range(attempts):
        real = real_train_on_ps(**options)
        simulated = simulate_like(real.trace.metadata["options"])
        rows = compare_ps_runs(simulated, real)
        tried.append(arrival_order(real))
        if options.get("mode", "sync") != "sync" or tried[-1] == arrival_order(simulated) \
                or not any(differs(sim, measured) for _, sim, measured in rows):
            break
    real.trace.metadata["attempts"] = tried
    return simulated, real, rows
