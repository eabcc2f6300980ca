"""What a study is (``Study``), the two models the studies train and the one call they share:
the simulated step time of ``simdist run data_parallel`` at one point."""

from __future__ import annotations

from typing import Callable, NamedTuple

from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.training.programs.data_parallel import train
from simdist.sim.scheduler import simulate


class Study(NamedTuple):
    """One scaling study: its points, how to measure one, and how to show them."""

    name: str  # the CSV's and the figure's file name, and --only's value
    title: str
    about: str  # what it shows, on which profile, under which assumptions (Markdown)
    published: str  # a published figure to compare with, cited; "" where there is none
    fields: list  # the CSV's columns
    points: Callable[[bool], list]  # points(quick) -> [dict]; a point's "weight" is its cost
    measure: Callable[[dict], dict]  # measure(point) -> the CSV row
    draw: Callable  # draw(rows, png_path): the figure
    summary: Callable  # summary(rows) -> (header, table rows) for the page and the terminal


class Model(NamedTuple):
    """A model as data_parallel sees it: sizes and FLOPs, no values."""

    name: str
    params: int  # dense parameters, all-reduced
    flops_per_example: float  # forward + backward
    embedding_dim: int = 0  # a sparse part: rows of this width looked up (0: none)
    lookups: int = 0  # rows each example looks up
    batch: int = 32  # examples per device per step (Goyal et al. 2017's 32 per GPU)
    about: str = ""


#: ResNet-50: 25.6M parameters (Keras Applications' table: 25,636,712); 3.8e9 multiply-adds
#: forward per 224x224 image (He et al., "Deep Residual Learning for Image Recognition", 2016,
#: table 1), so 7.6e9 FLOPs forward and 3x that with the backward pass.
DENSE = Model("dense", 25_636_712, 3 * 2 * 3.8e9,
              about="ResNet-50-like: 25.6M parameters (100 MB of float32 gradients), 22.8 "
                    "GFLOP per example forward+backward (3 x 2 x 3.8e9 multiply-adds, He et al. "
                    "2016, table 1)")
#: a recommendation-style model (a teaching assumption): a 2M-parameter dense tower and an
#: embedding of width 64 from which each example looks up 8 rows
SPARSE = Model("sparse", 2_000_000, 6 * 2_000_000, embedding_dim=64, lookups=8, batch=2048,
               about="recommendation-style embedding model (a teaching assumption): a "
                     "2M-parameter dense tower (6 FLOPs per parameter and example), 8 rows of "
                     "a width-64 embedding per example, 2,048 examples per device; its "
                     "IndexedSlices gradients (4.3 MB per device) are all-gathered, as TF's "
                     "CollectiveAllReduce does")

PROFILE_NOTE = ("compute = FLOPs / (peak x 0.5) on the profile's device (simdist's roofline, no "
                "overlap of communication with the backward pass); links from "
                "simdist/hardware/catalog.py")


def describe_profile(system: str) -> str:
    """'v100-nvlink2-25gbe (V100: 15.7 TFLOP/s fp32; nvlink2 150 GB/s, 25gbe 3.1 GB/s)'."""
    hw = Hardware.from_catalog(HardwareCatalog.default(), system)
    return (f"`{system}` ({hw.device.name}: {hw.device.peak_flops / 1e12:.1f} TFLOP/s; "
            f"in a machine {hw.intra_link.name} {hw.intra_link.bandwidth / 1e9:.1f} GB/s, "
            f"between machines {hw.network.name} {hw.network.bandwidth / 1e9:.2f} GB/s, "
            f"{hw.network.latency_ns / 1e3:g} us, {hw.network.message_ns / 1e3:g} us a message "
            "on a NIC)")


def step_time(model: Model, workers: int, system: str, *, batch: int | None = None,
              tasks_per_machine: int = 1, algorithm: str = "ring", options=None,
              gradient_dtype: str = "float32", fidelity: str = "flow") -> dict:
    """One step of ``model`` on ``workers`` devices (``simdist run data_parallel``): its
    simulated time in ns, and the messages and bytes it sent (message fidelity)."""
    hardware = Hardware.from_catalog(HardwareCatalog.default(), system,
                                     Layout(tasks_per_machine=tasks_per_machine))
    result = simulate(
        {"worker": workers},
        lambda ctx: train(ctx, model.params, 1, batch or model.batch, algorithm,
                          flops_per_example=model.flops_per_example,
                          gradient_dtype=gradient_dtype, embedding_dim=model.embedding_dim,
                          lookups=model.lookups or 8, options=options),
        hardware=hardware, trace=False, fidelity=fidelity)
    step = max(ends[-1] for ends in result.returns.values())
    return {"step_ms": step / 1e6, "messages": result.messages,
            "bytes_sent": result.bytes_sent, "events": result.events}


def weight(workers: int, fidelity: str = "flow", sparse: bool = False) -> float:
    """About the events of one point (the progress bar's ETA): a few per worker at flow
    fidelity, a ring's 2(p-1) each in messages, an all-gather's p-1 for a sparse model."""
    events = 6 * workers if fidelity == "flow" else 2 * workers * workers
    return events + (2 * workers * workers if sparse else 0) + 50


def doubling(first: int, last: int) -> list[int]:
    """first, 2 first, 4 first... up to last."""
    values = [first]
    while values[-1] * 2 <= last:
        values.append(values[-1] * 2)
    return values


def percent(fraction: float) -> str:
    """'57%', or '0.4%' below 10% (where whole percents would read 0%)."""
    return f"{fraction:.0%}" if fraction >= 0.1 else f"{fraction:.1%}"
