"""Global batch scaling: the dense model's throughput as the global batch grows on a fixed
number of devices, and a fixed global batch spread over more and more devices."""

from __future__ import annotations

import functools

from ..figures import Panel, draw_panels
from ..study import DENSE, PROFILE_NOTE, Study, describe_profile, doubling, step_time, weight

PROFILE = "v100-nvlink2-25gbe"
DEVICES = 64
GLOBAL = 8192  # Goyal et al. 2017's minibatch
FIELDS = ["sweep", "devices", "batch_per_device", "global_batch", "step_ms",
          "examples_per_s", "efficiency"]


def points(quick: bool) -> list[dict]:
    devices = 8 if quick else DEVICES
    grow = [{"sweep": f"global batch grows on {devices} devices", "devices": devices,
             "batch_per_device": b} for b in doubling(4, 16 if quick else 512)]
    total = 256 if quick else GLOBAL
    spread = [{"sweep": f"global batch {total} spread over the devices", "devices": d,
               "batch_per_device": total // d} for d in doubling(8 if quick else 16,
                                                                32 if quick else 512)]
    return [{**p, "weight": weight(p["devices"])} for p in grow + spread]


@functools.lru_cache(maxsize=None)
def one_device_ms(batch: int) -> float:
    return step_time(DENSE, 1, PROFILE, batch=batch)["step_ms"]


def measure(point: dict) -> dict:
    d, b = point["devices"], point["batch_per_device"]
    step = step_time(DENSE, d, PROFILE, batch=b)["step_ms"]
    return {"sweep": point["sweep"], "devices": d, "batch_per_device": b,
            "global_batch": d * b, "step_ms": round(step, 4),
            "examples_per_s": round(d * b / step * 1e3, 1),
            "efficiency": round(one_device_ms(b) / step, 4)}


def draw(rows, path) -> None:
    sweeps = list(dict.fromkeys(r["sweep"] for r in rows))
    grow = [r for r in rows if r["sweep"] == sweeps[0]]
    spread = [r for r in rows if r["sweep"] == sweeps[-1]]
    draw_panels(path, "Global batch scaling (dense model, ring all-reduce)", [
        Panel(sweeps[0], "global batch", "examples/s", {
            "examples/s": [(r["global_batch"], r["examples_per_s"]) for r in grow]}),
        Panel(sweeps[0], "global batch", "efficiency", {
            "efficiency": [(r["global_batch"], r["efficiency"]) for r in grow]},
            ylim=(0, 1.05)),
        Panel(sweeps[-1], "devices", "examples/s", {
            "examples/s": [(r["devices"], r["examples_per_s"]) for r in spread]},
            ideal=[(r["devices"], r["devices"] * spread[0]["examples_per_s"]
                    / spread[0]["devices"]) for r in spread], logy=True)],
        f"Profile {PROFILE}, one device per machine. Efficiency: against one device at the "
        f"same per-device batch. Dense model: {DENSE.about}. {PROFILE_NOTE}. Time only: "
        "whether a batch that large still trains as well is the optimizer's question.")


def summary(rows):
    header = ["sweep", "devices", "per device", "global batch", "step ms", "examples/s",
              "efficiency"]
    return header, [[r["sweep"], r["devices"], r["batch_per_device"], r["global_batch"],
                     f"{r['step_ms']:.1f}", f"{r['examples_per_s']:,.0f}",
                     f"{r['efficiency']:.0%}"] for r in rows]


STUDY = Study(
    name="global_batch",
    title="Global batch scaling",
    about=(f"Two sweeps of the dense model on {describe_profile(PROFILE)}, ring all-reduce, "
           f"one device per machine: the per-device batch grows on {DEVICES} devices (the "
           "all-reduce costs the same whatever the batch, so a larger batch hides it behind "
           f"more compute), and a fixed global batch of {GLOBAL} is spread over 16 to 512 "
           "devices (strong scaling: each device's share of compute shrinks while its "
           f"all-reduce does not). {PROFILE_NOTE}. The simulator prices time only; whether "
           "the large batch reaches the same accuracy is the optimizer's question."),
    published=("Goyal et al., \"Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour\" "
               "(2017): ResNet-50 trained with a global batch of 8192 (32 per GPU on 256 "
               "GPUs) to the accuracy of a batch of 256, using the linear learning-rate "
               "scaling rule and a warm-up, at ~90% scaling efficiency from 8 to 256 GPUs."),
    fields=FIELDS, points=points, measure=measure, draw=draw, summary=summary)
