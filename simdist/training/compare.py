"""A simulated and a real run of one exercise, side by side (``simdist compare``).

``format_comparison`` sets the loss of every step in both runs next to each other, the largest
difference between their final weights (parity: at most 1e-5 in float32 after 20 steps), and
the step time the simulator predicted next to the one measured; ``plot_comparison`` draws
the same as a figure.
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import SimdistError
from simdist.base.files import save_figure
from simdist.training.exercises import RunResult, comparison_problems, max_weight_difference
from simdist.hardware.units import format_bytes, format_ns

#: weight parity between the halves (float32, after 20 steps)
PARITY_TOLERANCE = 1e-5


def _describe(run: RunResult) -> str:
    ex = run.exercise
    tasks = f"{ex.num_workers} worker(s)"
    if "hosts" in run.metadata:  # TPUStrategy: the slice's host tasks
        tasks = f"{run.metadata['hosts']} TPU host(s)"
    return (f"{ex.strategy}: {ex.model} on {ex.dataset}, {ex.num_replicas} replica(s) on "
            f"{tasks}, global batch {ex.global_batch}, {ex.steps} steps, "
            f"learning rate {ex.learning_rate:g}, seed {ex.seed}")


def format_run(run: RunResult) -> str:
    """One run's steps as a table (loss and step time), and what moved per step."""
    lines = [f"{run.source} {_describe(run)}",
             "   step        loss   step time"]
    for k, (loss, t) in enumerate(zip(run.losses, run.step_times_ns)):
        lines.append(f"  {k:>5}  {loss:>10.6f}  {format_ns(t):>10}")
    meta = run.metadata
    if "cross_device_ops" in meta:
        lines.append(f"gradients combined by: {meta['cross_device_ops']}")
    if "stragglers" in meta:  # a synchronous strategy's --stragglers
        lines.append(f"compute times drawn: {meta['stragglers']}")
    if "bytes_moved_per_step" in meta:
        lines.append(f"bytes moved per step (messages between devices and tasks): "
                     f"{format_bytes(meta['bytes_moved_per_step'])}")
    if "ici_bytes_per_chip_per_step" in meta:  # tpu
        lines.append(f"bytes each TPU chip sends over ICI per step: "
                     f"{format_bytes(meta['ici_bytes_per_chip_per_step'])}")
    if "utilization" in meta:  # tpu
        lines.append(f"TPU utilization (core busy time / wall time): {meta['utilization']:.1%} "
                     f"with steps_per_execution {meta['steps_per_execution']} (one host "
                     f"dispatch of {format_ns(meta['host_loop_overhead_ns'])} per call)")
    for ps, stored in meta.get("ps_bytes_stored", {}).items():  # parameter_server
        moved = meta.get("ps_bytes_moved_per_step", {}).get(ps, 0)
        lines.append(f"{ps}: {format_bytes(stored)} of variables, {format_bytes(moved)} moved "
                     "per step")
    if "functions" in meta:
        again = [f"{f} ({n} runs)" for f, n in meta.get("function_runs", {}).items() if n > 1]
        lines.append(f"functions scheduled: {meta['functions']}"
                     + (f"; run again after a worker failed: {', '.join(again)}" if again else "")
                     + (f"; checkpoint restored {meta['restores']} time(s)"
                        if meta.get("restores") else ""))
    for failure in meta.get("failures_never_happened", ()):
        lines.append(f"failure {failure} never happened: training ended first, at "
                     f"{format_ns(meta['trained_ns'])} of simulated time")
    for task in meta.get("down_at_the_end", ()):
        lines.append(f"{task} was still down when training ended, at "
                     f"{format_ns(meta['trained_ns'])}: the job was over before it came back")
    return "\n".join(lines)


def check_same_exercise(a: RunResult, b: RunResult) -> None:
    """Both runs must train the same thing: the same model, data, batches and steps (the
    strategy, the number of replicas, the hardware and the stragglers may differ: every
    synchronous strategy does the same SGD on the same global batches)."""
    ea, eb = a.exercise.to_dict(), b.exercise.to_dict()
    how = {"strategy", "workers", "devices_per_worker", "hardware", "cross_device_ops",
           "communication", "stragglers"}
    diff = {k: (ea[k], eb[k]) for k in ea if k not in how and ea[k] != eb[k]}
    if diff:
        raise SimdistError("the two runs are not the same exercise: "
                           + ", ".join(f"{k} = {x!r} vs {y!r}" for k, (x, y) in diff.items()))


def format_comparison(a: RunResult, b: RunResult) -> str:
    """The side-by-side table of two runs of the same exercise."""
    check_same_exercise(a, b)
    lines = [f"{a.source}: {_describe(a)}"]
    if a.exercise.strategy != b.exercise.strategy or a.exercise.workers != b.exercise.workers:
        lines.append(f"{b.source}: {_describe(b)}")
        lines.append("(different strategies, the same synchronous SGD on the same global "
                     "batches: the weights must agree)")
    lines += ["",
             f"   step  {a.source + ' loss':>14}  {b.source + ' loss':>14}  {'|diff|':>9}  "
             f"{a.source + ' time':>14}  {b.source + ' time':>14}"]
    for k in range(max(len(a.losses), len(b.losses))):
        la = a.losses[k] if k < len(a.losses) else float("nan")
        lb = b.losses[k] if k < len(b.losses) else float("nan")
        ta = format_ns(a.step_times_ns[k]) if k < len(a.step_times_ns) else "-"
        tb = format_ns(b.step_times_ns[k]) if k < len(b.step_times_ns) else "-"
        lines.append(f"  {k:>5}  {la:>14.6f}  {lb:>14.6f}  {abs(la - lb):>9.2e}  {ta:>14}  "
                     f"{tb:>14}")
    lines += ["", parity(a, b)[1]]
    ma, mb = _median(a.step_times_ns), _median(b.step_times_ns)
    if ma and mb:
        lines.append(f"median step time: {a.source} {format_ns(ma)} ({_timing(a)}), "
                     f"{b.source} {format_ns(mb)} ({_timing(b)}): ratio {mb / ma:.2f}")
        lines += [note for note in map(_uncalibrated, (a, b)) if note]
    return "\n".join(lines)


def parity(a: RunResult, b: RunResult) -> tuple[bool, str]:
    """(whether the final weights agree within ``PARITY_TOLERANCE``, the line that says so).
    A run with too few steps or a NaN or inf loss or weight never agrees: the line says which
    run and what is wrong with it."""
    problems = comparison_problems(a, b)
    if problems:
        return False, "weights NOT compared, " + "; ".join(problems)
    diff = max_weight_difference(a, b)
    verdict = "agree" if diff <= PARITY_TOLERANCE else "DIFFER"
    return diff <= PARITY_TOLERANCE, (f"largest weight difference: {diff:.3e}  (weights "
                                      f"{verdict}: tolerance {PARITY_TOLERANCE:g})")


def _timing(run: RunResult) -> str:
    if run.source == "simdist":
        return f"simulated on hardware profile '{run.exercise.hardware}'"
    return "measured wall clock"


def _uncalibrated(run: RunResult) -> str:
    """A line saying so when a simulated run's profile is a built-in one without host costs:
    it prices FLOPs and bytes only, so its step time is no prediction of a real run's."""
    from simdist.hardware.devices import HardwareCatalog, UnknownProfileError
    from simdist.hardware.host_costs import HostCosts

    if run.source != "simdist":
        return ""
    catalog = HardwareCatalog.default()
    try:
        device = catalog.device(catalog.system(run.exercise.hardware).device)
    except UnknownProfileError:  # a profiles file's: it may well be calibrated
        return ""
    if device.host_costs != HostCosts():  # priced: a calibrated profile
        return ""
    return (f"(profile '{run.exercise.hardware}' prices the step's FLOPs and bytes, not "
            f"TensorFlow's and Python's costs per op and per step: to predict a real step "
            f"time, simdist calibrate --anchor, half a minute, then --profiles-file "
            f"out/anchored.json --profile calibrated)")


def _median(times) -> int:
    return int(np.median(times)) if len(times) else 0


def plot_comparison(a: RunResult, b: RunResult, path) -> str:
    """Loss per step and step time per step of both runs (a two-panel PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for run, style in ((a, dict(marker="o", lw=2)), (b, dict(marker="x", ls="--"))):
        label = f"{run.source}: {run.exercise.strategy}"
        left.plot(range(len(run.losses)), run.losses, label=label, **style)
        right.plot(range(len(run.step_times_ns)), np.array(run.step_times_ns) / 1e3,
                   label=label, **style)
    left.set(xlabel="step", ylabel="global-batch mean loss", title="loss per step")
    right.set(xlabel="step", ylabel="step time (µs)", yscale="log",
              title="step time: simulated vs measured")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"{_describe(a)}\n{parity(a, b)[1]}", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return str(path)
