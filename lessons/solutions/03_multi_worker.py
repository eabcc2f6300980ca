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
    """TF's rule: refuse jobs tf.distribute does not know ("master"); the chief job's task
    and the evaluator are chiefs; else worker 0 when there is no chief job."""
    config = json.loads(tf_config)
    cluster, task = config["cluster"], config.get("task", {})
    unknown = set(cluster) - {"chief", "worker", "evaluator", "ps"}
    if unknown:
        raise ValueError(f"tf.distribute does not know the job(s) {sorted(unknown)}")
    if task.get("type") in ("chief", "evaluator"):
        return True
    return "chief" not in cluster and task.get("type") == "worker" and int(task["index"]) == 0


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
