"""Parameter servers (1, 2, 4, 8 shards) against the ring and the hierarchical all-reduce:
the dense model's step time and efficiency as the devices grow."""

from __future__ import annotations

import functools

from ..figures import Panel, draw_panels, efficiency_panel
from ..study import (DENSE, PROFILE_NOTE, Study, describe_profile, doubling, percent, step_time,
                     weight)

PROFILE = "v100-nvlink2-25gbe"
PER_MACHINE = 8  # a DGX-1's 8 GPUs
FIELDS = ["series", "algorithm", "num_ps", "tasks_per_machine", "devices", "step_ms",
          "comm_ms", "efficiency", "fidelity"]


def _series(quick: bool) -> list[tuple]:
    """(label, algorithm, num_ps, tasks per machine, fidelity)."""
    shards = (1, 4) if quick else (1, 2, 4, 8)
    return ([(f"ps, {k} shard{'s' if k > 1 else ''}", "ps", k, 1, "flow") for k in shards]
            + [("ring, 1 GPU/machine", "ring", None, 1, "flow"),
               (f"ring, {PER_MACHINE} GPUs/machine", "ring", None, PER_MACHINE, "message"),
               (f"hierarchical, {PER_MACHINE} GPUs/machine", "hierarchical", None, PER_MACHINE,
                "flow")])


def points(quick: bool) -> list[dict]:
    out = []
    for label, algorithm, k, tpm, fidelity in _series(quick):
        for d in doubling(8, 32 if quick else 512):
            if k is None or k <= d:
                out.append({"series": label, "algorithm": algorithm, "num_ps": k,
                            "tasks_per_machine": tpm, "devices": d, "fidelity": fidelity,
                            "weight": weight(d, fidelity)})
    return out


@functools.lru_cache(maxsize=None)
def one_device_ms() -> float:
    return step_time(DENSE, 1, PROFILE)["step_ms"]


def measure(point: dict) -> dict:
    options = {"num_ps": point["num_ps"]} if point["num_ps"] else None
    step = step_time(DENSE, point["devices"], PROFILE, algorithm=point["algorithm"],
                     options=options, tasks_per_machine=point["tasks_per_machine"],
                     fidelity=point["fidelity"])["step_ms"]
    return {**{k: point[k] for k in FIELDS if k in point}, "step_ms": round(step, 4),
            "comm_ms": round(step - one_device_ms(), 4),
            "efficiency": round(one_device_ms() / step, 4)}


def draw(rows, path) -> None:
    step, eff = {}, {}
    for r in rows:
        step.setdefault(r["series"], []).append((r["devices"], r["step_ms"]))
        eff.setdefault(r["series"], []).append((r["devices"], r["efficiency"]))
    xs = sorted({r["devices"] for r in rows})
    draw_panels(path, "Parameter servers vs ring vs hierarchical all-reduce (dense model)", [
        Panel("step time", "devices", "ms per step", step, logy=True,
              ideal=[(x, one_device_ms()) for x in xs]),
        efficiency_panel(eff)],
        f"Profile {PROFILE} (V100, NVLink 2 in a machine, 25 GbE between). ps: simdist's "
        "ps all-reduce, shard i on worker i, one GPU per machine. Dense model: "
        f"{DENSE.about}; 32 examples per device. {PROFILE_NOTE}.")


def summary(rows):
    header = ["series", "devices", "step ms", "communication ms", "efficiency"]
    keep = {8, 64, 512} | {max(r["devices"] for r in rows)}
    return header, [[r["series"], r["devices"], f"{r['step_ms']:.1f}", f"{r['comm_ms']:.1f}",
                     percent(r["efficiency"])] for r in rows if r["devices"] in keep]


STUDY = Study(
    name="ps_vs_allreduce",
    title="Parameter servers (1, 2, 4, 8 shards) vs ring vs hierarchical all-reduce",
    about=(f"The dense model's gradients (100 MB) exchanged each step by: simdist's ps "
           "all-reduce (`--algorithm ps --num-ps K`: every worker pushes shard i to the server "
           "on worker i and pulls the sum back, BytePS-style, one GPU per machine), the ring "
           f"(one GPU per machine, and {PER_MACHINE} GPUs per machine), and the hierarchical "
           f"all-reduce ({PER_MACHINE} GPUs per machine: reduce over NVLink, ring between "
           f"machines, broadcast back). Profile {describe_profile(PROFILE)}. {PROFILE_NOTE}. "
           "A server's NIC receives and sends (p-1)/K of the gradients every step, so "
           "parameter servers fall behind linearly in p unless the shards grow with the "
           "workers; the ring's NIC traffic stays 2(p-1)/p. The hierarchical all-reduce "
           "moves the same bytes through each machine's NIC as a ring over all the GPUs, in "
           f"1/{PER_MACHINE} of its network rounds: for 100 MB of gradients the bytes "
           "dominate and the two land together; its gain is on small, latency-bound "
           "all-reduces. The ring with "
           f"{PER_MACHINE} GPUs per machine runs at message fidelity (flow mode does not cover "
           "a ring with two members on one machine)."),
    published=("Sergeev and Del Balso, \"Horovod: fast and easy distributed deep learning in "
               "TensorFlow\" (2018): standard distributed TensorFlow with parameter servers "
               "left about half of 128 Pascal GPUs' capacity unused (figure 1, Inception V3 and "
               "ResNet-101), where Horovod's ring reached 88% scaling efficiency at 128 GPUs "
               "over 25 Gbit/s TCP (figure 6). The figure here shows the mechanism (one "
               "server's NIC carries everyone's gradients); it is not fitted to those numbers."),
    fields=FIELDS, points=points, measure=measure, draw=draw, summary=summary)
