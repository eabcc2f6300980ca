"""Speed-up and scaling efficiency against the number of devices, 1 to 512, for a dense and
a sparse model on two named hardware profiles (weak scaling: 32 examples per device)."""

from __future__ import annotations

import functools

from ..figures import Panel, draw_panels, efficiency_panel
from ..study import (DENSE, PROFILE_NOTE, SPARSE, Study, describe_profile, doubling, percent,
                     step_time, weight)

PROFILES = ("v100-nvlink2-25gbe", "a100-nvlink3-100gbe")
MODELS = {m.name: m for m in (DENSE, SPARSE)}
FIELDS = ["model", "profile", "devices", "step_ms", "examples_per_s", "speedup", "efficiency",
          "fidelity"]


def points(quick: bool) -> list[dict]:
    profiles = PROFILES[:1] if quick else PROFILES
    devices = doubling(1, 8 if quick else 512)
    return [{"model": m, "profile": s, "devices": d, "weight": weight(d, sparse=m == "sparse")}
            for s in profiles for m in MODELS for d in devices]


@functools.lru_cache(maxsize=None)
def one_device_ms(model: str, profile: str) -> float:
    return step_time(MODELS[model], 1, profile)["step_ms"]


def measure(point: dict) -> dict:
    model, profile, d = point["model"], point["profile"], point["devices"]
    step = step_time(MODELS[model], d, profile)["step_ms"]
    efficiency = one_device_ms(model, profile) / step
    return {"model": model, "profile": profile, "devices": d, "step_ms": round(step, 4),
            "examples_per_s": round(d * MODELS[model].batch / step * 1e3, 1),
            "speedup": round(d * efficiency, 3), "efficiency": round(efficiency, 4),
            "fidelity": "flow" if model == "dense" else "flow + all-gather messages"}


def draw(rows, path) -> None:
    speed, eff = {}, {}
    for r in rows:
        label = f"{r['model']}, {r['profile']}"
        speed.setdefault(label, []).append((r["devices"], r["speedup"]))
        eff.setdefault(label, []).append((r["devices"], r["efficiency"]))
    xs = sorted({r["devices"] for r in rows})
    draw_panels(path, "Speed-up and scaling efficiency vs devices (ring all-reduce, one device "
                      "per machine, fixed batch per device)", [
        Panel("speed-up", "devices", "speed-up over one device", speed, logy=True,
              ideal=[(x, x) for x in xs]),
        efficiency_panel(eff, "efficiency = speed-up / devices")],
        f"Profiles: {', '.join(sorted({r['profile'] for r in rows}))}. Dense: {DENSE.about}. "
        f"Sparse: {SPARSE.about}. {PROFILE_NOTE}.")


def summary(rows):
    header = ["model", "profile", "devices", "step ms", "examples/s", "speed-up", "efficiency"]
    keep = {1, 8, 64, 256, 512} | {max(r["devices"] for r in rows)}
    return header, [[r["model"], r["profile"], r["devices"], f"{r['step_ms']:.2f}",
                     f"{r['examples_per_s']:,.0f}", f"{r['speedup']:.1f}",
                     percent(r["efficiency"])] for r in rows if r["devices"] in keep]


STUDY = Study(
    name="scaling",
    title="Speed-up and scaling efficiency, 1 to 512 devices, dense and sparse",
    about=(f"Synchronous data-parallel training (`simdist run data_parallel`), ring "
           f"all-reduce, one device per machine so that every hop of the ring crosses the "
           f"network, a fixed batch per device (weak scaling), one step at flow fidelity "
           f"(the sparse model's all-gather runs as messages). Profiles: "
           f"{describe_profile(PROFILES[0])} and {describe_profile(PROFILES[1])}. "
           f"Dense: {DENSE.about}. Sparse: {SPARSE.about}. {PROFILE_NOTE}. The dense model's "
           "ring moves 2(p-1)/p of its gradients through each NIC whatever p is, so its "
           "efficiency levels off; the sparse model's all-gather brings every worker every "
           "other worker's rows, so its step grows with p and its efficiency keeps falling "
           "(which is why embedding models shard their tables on parameter servers instead)."),
    published=("Goyal et al., \"Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour\" "
               "(2017): ResNet-50, 32 images per GPU, ~90% scaling efficiency from 8 to 256 "
               "GPUs (Big Basin servers of 8 P100 GPUs, 50 Gbit/s Ethernet). Horovod's "
               "512-GPU benchmark (Sergeev and Del Balso, \"Horovod: fast and easy distributed "
               "deep learning in TensorFlow\", 2018, and Horovod's docs/benchmarks): 90% "
               "scaling efficiency for ResNet-101 and Inception V3, 68% for VGG-16, on 128 "
               "servers of 4 Pascal GPUs with 25 Gbit/s RoCE. Both overlap the all-reduce "
               "with the backward pass and use 8 or 4 GPUs per server; the model here does "
               "neither, so it should come out lower: compare the shape, not the number."),
    fields=FIELDS, points=points, measure=measure, draw=draw, summary=summary)
