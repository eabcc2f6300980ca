"""float32 against float16 gradients: the bytes each step moves, the step time and the
scaling efficiency of the dense model."""

from __future__ import annotations

import functools

from ..figures import Panel, draw_panels, efficiency_panel
from ..study import DENSE, PROFILE_NOTE, Study, describe_profile, doubling, step_time, weight

PROFILE = "v100-nvlink2-25gbe"
MESSAGE_UP_TO = 16  # points up to here also run every message, to count the bytes sent
FIELDS = ["dtype", "devices", "step_ms", "efficiency", "bytes_per_device_per_step",
          "fidelity"]


def points(quick: bool) -> list[dict]:
    return [{"dtype": dtype, "devices": d,
             "fidelity": "message" if d <= MESSAGE_UP_TO else "flow",
             "weight": weight(d, "message" if d <= MESSAGE_UP_TO else "flow")}
            for dtype in ("float32", "float16") for d in doubling(1, 8 if quick else 512)]


@functools.lru_cache(maxsize=None)
def one_device_ms() -> float:
    return step_time(DENSE, 1, PROFILE)["step_ms"]


def measure(point: dict) -> dict:
    d = point["devices"]
    got = step_time(DENSE, d, PROFILE, gradient_dtype=point["dtype"],
                    fidelity=point["fidelity"])
    sent = got["bytes_sent"] // d if point["fidelity"] == "message" else ""
    return {"dtype": point["dtype"], "devices": d, "step_ms": round(got["step_ms"], 4),
            "efficiency": round(one_device_ms() / got["step_ms"], 4),
            "bytes_per_device_per_step": sent, "fidelity": point["fidelity"]}


def draw(rows, path) -> None:
    step, eff, sent = {}, {}, {}
    for r in rows:
        step.setdefault(r["dtype"], []).append((r["devices"], r["step_ms"]))
        eff.setdefault(r["dtype"], []).append((r["devices"], r["efficiency"]))
        if r["bytes_per_device_per_step"] not in ("", None) and r["devices"] > 1:
            sent.setdefault(r["dtype"], []).append((r["devices"],
                                                    r["bytes_per_device_per_step"] / 1e6))
    draw_panels(path, "float32 vs float16 gradients (dense model, ring all-reduce)", [
        Panel("bytes each device sends per step (message runs)", "devices", "MB",
              sent, bars=True),
        Panel("step time", "devices", "ms per step", step),
        efficiency_panel(eff)],
        f"Profile {PROFILE}, one device per machine, 32 examples per device. float16 halves "
        "the bytes on the wire only (the compute and the weights stay float32, as with "
        f"Horovod's fp16 compression). Dense model: {DENSE.about}. {PROFILE_NOTE}.")


def summary(rows):
    by = {(r["dtype"], r["devices"]): r for r in rows}
    header = ["devices", "float32 ms", "float16 ms", "float32 eff.", "float16 eff.",
              "bytes sent float16 / float32"]
    table = []
    for d in sorted({r["devices"] for r in rows}):
        a, b = by[("float32", d)], by[("float16", d)]
        ratio = (f"{b['bytes_per_device_per_step'] / a['bytes_per_device_per_step']:.3f}"
                 if a["bytes_per_device_per_step"] not in ("", 0, None) else "")
        table.append([d, f"{a['step_ms']:.1f}", f"{b['step_ms']:.1f}",
                      f"{a['efficiency']:.0%}", f"{b['efficiency']:.0%}", ratio])
    return header, table


STUDY = Study(
    name="gradient_dtype",
    title="float32 vs float16 gradients",
    about=("The dense model with its gradients all-reduced (ring) as float32 or as float16 "
           "(`simdist run data_parallel --gradient-dtype float16`): half the bytes cross the "
           "network, the compute is unchanged. Profile "
           f"{describe_profile(PROFILE)}, one device per machine, 32 examples per device. "
           f"Points up to {MESSAGE_UP_TO} devices run every message of the ring and count the "
           "bytes each device sends; the larger ones run at flow fidelity. "
           f"{PROFILE_NOTE}. float16 cuts the communication part of the step in half; how "
           "much of the step that is depends on the profile: on a fast network it buys little."),
    published=("Horovod offers the same trade as `hvd.Compression.fp16` (Horovod's docs); no "
               "published scaling figure for it is cited here."),
    fields=FIELDS, points=points, measure=measure, draw=draw, summary=summary)
