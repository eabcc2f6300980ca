"""The master's partitions of one ``Session.run``, on real TF and in simdist, side by side.

``partition_program`` builds a two-task graph (a variable on ``ps:0``, the compute on
``worker:0``), runs it once with ``RunOptions(trace_level=FULL_TRACE,
output_partition_graphs=True)`` and summarizes ``RunMetadata``: the devices of the partition
graphs, their ``_Send``/``_Recv`` pairs and the shape of ``timeline.Timeline``'s Chrome
trace. ``sim_partitions`` runs it with ``simdist.graph``; ``real_partitions`` on TF 2.21,
its two servers on loopback ports inside a ``PrivateNetwork``.
"""

from __future__ import annotations

from realdist.graph.tf1 import program_source, run_python
from realdist.runtime.localcluster import PrivateNetwork
from realdist.runtime.processes import free_ports


def partition_program(tf1, timeline, cluster: dict) -> dict:
    """Run the two-task graph on ``cluster`` ({"ps": [addr], "worker": [addr]}); a summary
    of its RunMetadata (plain lists and strings, the same from both halves)."""
    spec = tf1.train.ClusterSpec(cluster)
    servers = [tf1.train.Server(spec, job, 0) for job in ("ps", "worker")]
    graph = tf1.Graph()
    with graph.as_default():
        with tf1.device("/job:ps/task:0"):
            v = tf1.Variable([1.0, 2.0], name="v")
        with tf1.device("/job:worker/task:0"):
            x = tf1.placeholder(tf1.float32, [2], name="x")
            z = tf1.reduce_sum(tf1.multiply(v, x, name="y"), name="z")
    with tf1.Session(servers[1].target, graph=graph) as sess:
        sess.run(v.initializer)
        metadata = tf1.RunMetadata()
        options = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE,
                                 output_partition_graphs=True)
        value = sess.run(z, {x: [3.0, 4.0]}, options=options, run_metadata=metadata)

    def attr(node, key):
        value = node.attr[key]
        if hasattr(value, "WhichOneof"):  # a real AttrValue
            return value.s.decode() if value.WhichOneof("value") == "s" else value.b
        return value

    nodes = [n for g in metadata.partition_graphs for n in g.node]
    chrome = __import__("json").loads(
        timeline.Timeline(metadata.step_stats).generate_chrome_trace_format())
    return {
        "value": float(value),
        "partitions": sorted(g.node[0].device for g in metadata.partition_graphs),
        "pairs": sorted([attr(n, "send_device"), attr(n, "recv_device"),
                         bool(attr(n, "client_terminated")), n.op]
                        for n in nodes if n.op in ("_Send", "_Recv")),
        "traced_devices": sorted({d.device for d in metadata.step_stats.dev_stats}),
        # the kinds of events but flows ("s", "t"): timeline.Timeline draws a flow arrow
        # where an op's input came from another thread, which real TF's thread pool decides
        # run by run (a loaded machine spreads a step's ops over more threads)
        "timeline": sorted({e["ph"] for e in chrome["traceEvents"]} - {"s", "t"}),
        "timeline_processes": sorted({e["args"]["name"].rsplit(" ", 1)[-1]
                                      for e in chrome["traceEvents"] if e["ph"] == "M"}),
    }


def sim_partitions() -> dict:
    """``partition_program`` with simdist.graph (its servers stopped afterwards)."""
    import simdist.graph as tf
    from simdist.graph import timeline

    try:
        return partition_program(tf, timeline, {"ps": ["localhost:2222"],
                                                "worker": ["localhost:2223"]})
    finally:
        tf.stop_all_servers()


_REAL = """
tf1.disable_resource_variables()  # TF1's reference variables, which simdist models
from tensorflow.python.client import timeline
emit("summary", partition_program(tf1, timeline, {cluster!r}))
"""


def real_partitions(timeout: float = 120) -> dict:
    """``partition_program`` on real TF in a fresh process, in a private network."""
    ports = [f"127.0.0.1:{port}" for port in free_ports(2)]
    cluster = {"ps": ports[:1], "worker": ports[1:]}
    code = program_source(partition_program) + _REAL.format(cluster=cluster)
    with PrivateNetwork() as net:
        return run_python(code, timeout, net)[0]["summary"]
