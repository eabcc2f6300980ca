"""ParameterServerStrategy on real TensorFlow, on a localhost cluster in
``realdist.runtime.localcluster``'s private network.

``shard_layout`` creates variables under a real ParameterServerStrategy with a partitioner
and returns what TF made of them (each shard's name, device and shape), to set beside
simdist's layout of the same variables. The runner that the strategy's record names,
``realdist.training.parameter_server_runner.run_parameter_server``, trains an exercise on such
a cluster (the evaluation and ``Model.fit`` programs share it).
"""

from __future__ import annotations

import json

from realdist.runtime.localcluster import Task, run_cluster

_LAYOUT = r"""
tf1.enable_eager_execution()  # the prelude is TF1's; ParameterServerStrategy is TF2
from realdist.training.parameter_server_loop import serve_in_process
job = json.loads(JOB)
servers = serve_in_process(tf, CLUSTER)
spec = tf.train.ClusterSpec(CLUSTER)
resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
    spec, task_type="chief", task_id=0, rpc_layer="grpc")
kind, options = job["partitioner"]
partitioner = None if kind is None else getattr(tf.distribute.experimental.partitioners,
                                                kind)(**options)
strategy = tf.distribute.experimental.ParameterServerStrategy(
    resolver, variable_partitioner=partitioner)
layout = {}
with strategy.scope():
    for name, shape, dtype in job["variables"]:
        v = tf.Variable(tf.zeros(shape, dtype), name=name)
        parts = v.variables if hasattr(v, "variables") else [v]
        layout[name] = [[p.name, p.device, p.shape.as_list()] for p in parts]
emit("layout", layout)
sys.stdout.flush()
os._exit(0)  # the servers' threads would keep the process alive
"""


def shard_layout(variables, partitioner=None, workers: int = 1, ps: int = 2,
                 timeout: float = 120) -> dict:
    """{variable name: [[shard name, device, shape], ...]} as real TF 2.21 places
    ``variables`` ([(name, shape, dtype name), ...], created in that order) with
    ``partitioner`` (None, or (class name under tf.distribute.experimental.partitioners,
    {its arguments})) on ``workers`` workers and ``ps`` parameter servers."""
    job = {"variables": [[n, list(s), d] for n, s, d in variables], "workers": workers,
           "ps": ps, "partitioner": list(partitioner) if partitioner else [None, {}]}
    report = run_cluster({"chief": 1, "worker": workers, "ps": ps},
                         [Task("chief", f"JOB = {json.dumps(json.dumps(job))}\n" + _LAYOUT)],
                         timeout)
    return report["outputs"]["chief"]["layout"]
