"""Studies of TF1's between-graph program on parameter servers (``train_on_ps``): the figure
of one run (``plot_ps_training``), backup workers against random stragglers
(``backup_worker_sweep``) and the ps NIC as the bottleneck of a large model
(``ps_bandwidth_sweep``)."""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError
from simdist.base.files import save_figure
from simdist.hardware.units import time_unit
from simdist.trace.figure_lang import word
from simdist.training.ps_training import PSTrainingRun, train_on_ps


def plot_ps_training(run: PSTrainingRun, path=None, lang: str | None = None):
    """Each worker's loss against simulated time, the global step over time, and the
    gradients: applied and dropped per worker (sync) or the staleness histogram (async).
    Saved as a PNG if ``path``; its words in ``lang`` (default: ``figure_lang``'s)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 3.8), layout="constrained")
    loss_ax, step_ax, grad_ax = fig.subplots(1, 3)
    unit, scale = time_unit(max(run.trained_ns, 1))
    for k, runs in run.worker_runs.items():
        times = [t / scale for t, _, _ in runs]
        name = word("worker", lang, k=k)
        loss_ax.plot(times, [loss for _, _, loss in runs], marker=".", label=name)
        step_ax.step(times, [step for _, step, _ in runs], where="post", label=name)

    for event in (e for e in run.trace.instants if e.cat == "fault"):
        for ax in (loss_ax, step_ax):
            ax.axvline(event.t / scale, color="tab:red" if "failed" in event.name else
                       "tab:gray", linestyle="--", linewidth=1)
        step_ax.annotate(f"{event.pid} {event.name.split()[-1]}", (event.t / scale, 0),
                         rotation=90, fontsize=7, va="bottom", ha="right")
    time_label = word("simulated_time", lang, unit=unit)
    loss_ax.set(title=word("loss_title", lang), xlabel=time_label, ylabel=word("loss", lang))
    step_ax.set(title=word("step_title", lang), xlabel=time_label,
                ylabel=word("global_step", lang))
    for ax in (loss_ax, step_ax):
        ax.grid(color="0.9", linewidth=0.6)
        ax.legend(fontsize=8)
    if run.mode == "async":
        values = sorted(set(run.staleness))
        grad_ax.bar(values, [run.staleness.count(v) for v in values], color="tab:orange")
        grad_ax.set(title=word("staleness_title", lang), xlabel=word("in_between", lang),
                    ylabel=word("gradients", lang))
    else:
        counts = run.gradients_by_worker()
        workers = list(counts)
        grad_ax.bar(workers, [counts[k][0] for k in workers], label=word("applied", lang),
                    color="tab:green")
        grad_ax.bar(workers, [counts[k][1] for k in workers],
                    bottom=[counts[k][0] for k in workers], label=word("dropped", lang),
                    color="tab:red")
        grad_ax.set(title=word("per_worker", lang), xlabel=word("worker_axis", lang),
                    ylabel=word("gradients", lang), xticks=workers)
        grad_ax.legend(fontsize=8)
    fig.suptitle(word("ps_title", lang, mode=run.mode))
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def backup_worker_sweep(workers: int = 5, backups=(0, 1, 2), steps: int = 20,
                        **options) -> list[dict]:
    """Synchronous training with ``b`` of ``workers`` as backup workers (each step takes the
    first ``workers - b`` gradients), for each ``b``: [{"backups", "us_per_step", "applied",
    "dropped"}]. With random stragglers (``stall_probability``) backups shorten the steps."""
    rows = []
    for b in backups:
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < workers:
            raise InvalidArgumentError(f"backup_worker_sweep: backups {b!r}, expected ints "
                                       f"0..{workers - 1}")
        run = train_on_ps(workers=workers, mode="sync", steps=steps,
                          replicas_to_aggregate=workers - b, **options)
        rows.append({"backups": b, "us_per_step": run.trained_ns / 1000 / run.global_step,
                     "applied": run.applied, "dropped": run.dropped})
    return rows


def ps_bandwidth_sweep(configs=({"workers": 1}, {"workers": 2}, {"workers": 4},
                                {"workers": 4, "ps": 2}, {"workers": 4, "ps": 4},
                                {"workers": 4, "gradient_dtype": "float16"}),
                       features: int = 1_000_000, steps: int = 8, **options) -> list[dict]:
    """Asynchronous training of a large model (``features`` float32 weights: 4 MB at one
    million) in each configuration: [{**config, "updates_per_s", "ps_received_bytes",
    "global_step"}]. As
    workers are added the ps NIC saturates (every update pushes a gradient and pulls the
    weights through it); more ps shards share the load; float16 gradients halve the push."""
    rows = []
    for config in configs:
        run = train_on_ps(mode="async", steps=steps, features=features, examples=2,
                          **{**options, **config})
        received = sum(s.args.get("bytes", 0) for s in run.trace.spans  # the ops' Recvs
                       if s.pid.startswith("ps:") and s.name.startswith("Recv "))
        rows.append({**config, "updates_per_s": run.global_step / (run.trained_ns / 1e9),
                     "ps_received_bytes": received, "global_step": run.global_step})
    return rows
