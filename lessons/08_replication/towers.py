"""Lesson 08: in-graph replication on the devices of one machine, in simdist and on real TF.

``tower_program(tf, towers)`` is the TF1 program of TF's old multi-GPU examples: ONE graph
with a tower per device (``/cpu:0`` .. ``/cpu:N-1`` here, GPUs there), the variable and the
average of the towers' gradients on ``/cpu:0``. The same source runs with ``simdist.graph``
(``sim_towers``) and with the real ``tf.compat.v1`` in a fresh process with N logical CPU
devices (``real_towers``); both report the same things, so a lesson cell can set them side by
side: the losses, where each op ran, and which tensors crossed between devices in one step.
``real_averaging_devices`` asks real TF, graph only, where the averaging ops of the two
replications are placed (exercise 2).
"""

from __future__ import annotations

import collections
import textwrap
from dataclasses import dataclass

import numpy as np

FEATURES = 8

#: the four combinations, as exercise 2 names them
COMBINATIONS = (("in-graph", "sync"), ("in-graph", "async"), ("between-graph", "sync"),
                ("between-graph", "async"))


def tower_program(tf, towers):
    """Build one in-graph replicated linear regression: (train op, tower 0's loss)."""
    truth = np.random.default_rng(0).normal(size=FEATURES).astype(np.float32)
    with tf.device("/cpu:0"):
        w = tf.get_variable("w", initializer=np.zeros(FEATURES, np.float32))
    optimizer = tf.train.GradientDescentOptimizer(0.05)
    grads, losses = [], []
    for k in range(towers):
        x = np.random.default_rng(k + 1).normal(size=(32, FEATURES)).astype(np.float32)
        with tf.device(f"/cpu:{k}"), tf.name_scope(f"tower_{k}"):
            error = tf.reduce_sum(tf.constant(x) * w, axis=1) - tf.constant(x @ truth)
            losses.append(tf.reduce_mean(tf.square(error)))
            grads.append(optimizer.compute_gradients(losses[-1], [w])[0][0])
    with tf.device("/cpu:0"), tf.name_scope("average"):
        mean = tf.add_n(grads) / float(towers)
    return optimizer.apply_gradients([(mean, w)]), losses[0]


@dataclass
class TowerRun:
    """One run of ``tower_program``: tower 0's loss at each step, {op name: device} (simdist:
    its placement log; real TF: the ops of the last step's partition graphs), {(from
    device, to device): tensors} crossing in one step, and ``averaging_devices`` for the four
    combinations (from the same process)."""

    losses: list
    devices: dict
    crossings: dict
    averaging: dict

    def ops_per_device(self) -> dict:
        return dict(sorted(collections.Counter(self.devices.values()).items()))


def _short(device: str) -> str:
    return device.rsplit("device:", 1)[-1]


def sim_towers(towers: int = 4, steps: int = 3) -> TowerRun:
    """``tower_program`` in a simdist Session with ``towers`` CPU devices."""
    import simdist.graph as sim
    from simdist.graph.placement import parse_placement_log

    graph = sim.Graph()
    with graph.as_default():
        train, loss = tower_program(sim, towers)
        init = sim.global_variables_initializer()
    config = sim.ConfigProto(device_count={"CPU": towers})
    with sim.Session(graph=graph, config=config) as sess:
        sess.run(init)
        losses = [float(sess.run([train, loss])[1]) for _ in range(steps)]
        devices = parse_placement_log("\n".join(sess.placement_log))
        crossings = collections.Counter((_short(s.args["src"]), s.lane.split()[0])
                                        for s in sess.last_run.trace.spans if s.cat == "recv")
    averaging = {c: averaging_devices(sim, *c) for c in COMBINATIONS}
    return TowerRun(losses, {n: _short(d) for n, d in devices.items()}, dict(crossings),
                    averaging)


_REAL = """
graph = tf1.Graph()
with graph.as_default():
    train, loss = tower_program(tf1, {towers})
    init = tf1.global_variables_initializer()
with tf1.Session(graph=graph, config=tf1.ConfigProto(device_count={{"CPU": {towers}}})) as sess:
    sess.run(init)
    losses, metadata = [], tf1.RunMetadata()
    for step in range({steps}):
        options = tf1.RunOptions(output_partition_graphs=step == {steps} - 1)
        losses.append(float(sess.run([train, loss], options=options,
                                     run_metadata=metadata)[1]))
nodes = [n for g in metadata.partition_graphs for n in g.node]
emit("losses", losses)
emit("devices", {{n.name: n.device for n in nodes if n.op not in ("_Send", "_Recv")}})
emit("recvs", [(n.attr["send_device"].s.decode(), n.attr["recv_device"].s.decode())
               for n in nodes if n.op == "_Recv"])
emit("averaging", {{f"{{r}} {{m}}": averaging_devices(tf1, r, m) for r, m in {combinations}}})
"""


def real_towers(towers: int = 4, steps: int = 3, timeout: float = 120) -> TowerRun:
    """``tower_program`` on real TF: a fresh process, ``towers`` logical CPU devices
    (``ConfigProto.device_count``); devices and crossings from the last step's partition
    graphs (``RunOptions(output_partition_graphs=True)``); then ``averaging_devices``
    (graph only, in the same process: TensorFlow starts once)."""
    from realdist.graph.tf1 import program_source, run_python

    code = (f"FEATURES = {FEATURES}\n" + program_source(tower_program)
            + program_source(averaging_devices)
            + textwrap.dedent(_REAL.format(towers=towers, steps=steps,
                                           combinations=COMBINATIONS)))
    emitted, _ = run_python(code, timeout)
    crossings = collections.Counter((_short(a), _short(b)) for a, b in emitted["recvs"])
    averaging = {(r, m): emitted["averaging"][f"{r} {m}"] for r, m in COMBINATIONS}
    return TowerRun(emitted["losses"], {n: _short(d) for n, d in emitted["devices"].items()},
                    dict(crossings), averaging)



def averaging_devices(tf, replication, mode, workers=2):
    """Build the graph of ``replication`` ("in-graph": the one client's graph; "between-graph":
    worker 0's) on a {ps: 1, worker: workers} cluster; the devices of the ops that average
    several replicas' gradients (``AddN`` in-graph, the accumulators' take in
    ``SyncReplicasOptimizer``), or None when nothing averages."""
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"],
                                    "worker": [f"localhost:{2223 + k}" for k in range(workers)]})
    graph = tf.Graph()
    with graph.as_default():
        optimizer = tf.train.GradientDescentOptimizer(0.05)
        if replication == "in-graph":
            with tf.device("/job:ps/task:0"):
                w = tf.get_variable("w", initializer=np.zeros(4, np.float32))
            grads = []
            for k in range(workers):
                with tf.device(f"/job:worker/task:{k}"), tf.name_scope(f"tower_{k}"):
                    loss = tf.reduce_sum(tf.square(w - float(k)))
                    grads.append(optimizer.compute_gradients(loss, [w])[0][0])
            if mode == "sync":
                with tf.device("/job:ps/task:0"), tf.name_scope("average"):
                    optimizer.apply_gradients([(tf.add_n(grads) / float(workers), w)])
            else:
                for grad in grads:
                    optimizer.apply_gradients([(grad, w)])
        else:
            with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0",
                                                          cluster=cluster)):
                step = tf.train.get_or_create_global_step()
                w = tf.get_variable("w", initializer=np.zeros(4, np.float32))
                if mode == "sync":
                    optimizer = tf.train.SyncReplicasOptimizer(
                        optimizer, replicas_to_aggregate=workers, total_num_replicas=workers)
                optimizer.minimize(tf.reduce_sum(tf.square(w - 1.0)), global_step=step)
    found = {op.device for op in graph.get_operations()
             if op.type in ("AddN", "AccumulatorTakeGradient", "ResourceAccumulatorTakeGradient")}
    return sorted(found) or None
