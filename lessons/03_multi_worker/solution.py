"""Lesson 03, Many machines: reference solutions (same names as exercises.py)."""

import json
import math

from simdist.collectives import formulas


def tf_configs(addresses):
    """The same "cluster" for every task; "task" says which worker this process is."""
    cluster = {"worker": list(addresses)}
    return [json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
            for i in range(len(addresses))]


def is_chief(tf_config):
    """An evaluator is its own chief; else the "chief" (or "master") job's task if there is
    one, else worker 0."""
    config = json.loads(tf_config)
    task = config.get("task", {})
    if task.get("type") == "evaluator":
        return True
    for job in ("chief", "master"):
        if job in config["cluster"]:
            return task.get("type") == job
    return task.get("type") == "worker" and task.get("index") == 0


def predict_step_ns(workers, hw, model, global_batch):
    """Compute on the largest slice + gradient ring + SGD update + the loss's ring."""
    per_replica = math.ceil(global_batch / workers)  # the first worker has the most
    compute = hw.device.compute_time_ns(model.flops(per_replica))
    update = hw.device.compute_time_ns(2 * model.num_params, 3 * model.nbytes)
    if workers == 1:
        return compute + update
    a, bandwidth = hw.network.latency_ns, hw.network.bandwidth
    gradients = formulas.ring(workers, model.nbytes, a, bandwidth)
    loss = formulas.ring(workers, 4, a, bandwidth)
    return compute + gradients + update + loss
