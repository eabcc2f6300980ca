"""The runs whose traces must stay byte-identical across refactors (golden traces).

Each case is a name and a function writing one trace file. ``python -m tests.golden.cases``
(from the repository root) prints the sha256 of every case's trace; ``--write`` stores them in
``traces.sha256.json`` beside this file. Regenerate only when a change of traces is meant,
and say so in the commit message.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
from pathlib import Path

HASHES = Path(__file__).with_name("traces.sha256.json")


def _command(command, *argv):
    """``simdist COMMAND ARGV --trace PATH``, quietly."""
    def run(path):
        from simdist.commands.cli import main

        with contextlib.redirect_stdout(io.StringIO()):
            code = main([command, *argv, "--trace", str(path)])
        assert code == 0, f"simdist {command} {' '.join(argv)} exited {code}"
    return run


def _cli(*argv):
    """``simdist run ARGV``: a built-in program."""
    return _command("run", *argv)


def _session_cluster(path):
    """A TF1 program on a 1-ps, 2-worker cluster: replica_device_setter, a shared variable."""
    import simdist.graph as tf

    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"],
                                    "worker": ["localhost:2223", "localhost:2224"]})
    servers = [tf.train.Server(cluster, "ps", 0), tf.train.Server(cluster, "worker", 0),
               tf.train.Server(cluster, "worker", 1)]
    try:
        graph = tf.Graph()
        with graph.as_default():
            with tf.device(tf.train.replica_device_setter(cluster=cluster,
                                                           worker_device="/job:worker/task:1")):
                w = tf.Variable(tf.ones([64, 32]), name="w")
                x = tf.placeholder(tf.float32, [8, 64], name="x")
                y = tf.matmul(x, w)
                loss = tf.reduce_sum(y * y)
                train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
            with tf.Session(servers[1].target, graph=graph) as sess:
                sess.run(tf.global_variables_initializer())
                import numpy as np

                sess.run(train, feed_dict={x: np.ones([8, 64], np.float32)})
                sess.last_trace.save(path)
    finally:
        for server in servers:
            server.stop()


def _session_gpus(path):
    """A local session on a machine with 2 GPUs: ops on both, copies over PCIe."""
    import simdist.graph as tf

    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/cpu:0"):
            a = tf.constant([[1.0] * 128] * 128, name="a")
        with tf.device("/gpu:0"):
            b = tf.matmul(a, a)
        with tf.device("/gpu:1"):
            c = tf.matmul(b, a)
        with tf.device("/cpu:0"):
            d = tf.reduce_sum(c)
    config = tf.ConfigProto(device_count={"GPU": 2})
    with tf.Session(graph=graph, config=config) as sess:
        sess.run(d)
        sess.last_trace.save(path)


CASES = {
    "token_ring": _cli("token_ring"),
    "session_cluster": _session_cluster,
    "session_gpus": _session_gpus,
}
for _algorithm in ("reduce-to-one", "ring", "recursive-doubling", "halving-doubling",
                   "binary-tree", "double-binary-tree"):
    CASES[f"allreduce_{_algorithm}"] = _cli("allreduce", "--algorithm", _algorithm, "-p", "5",
                                            "--size", "1048576")
CASES["allreduce_ring_pieces"] = _cli("allreduce", "--algorithm", "ring", "-p", "4",
                                      "--pieces", "3", "--size", "65536")
CASES["allreduce_double-binary-tree_pieces"] = _cli(
    "allreduce", "--algorithm", "double-binary-tree", "-p", "6", "--pieces", "2")
CASES["allreduce_hierarchical"] = _cli("allreduce", "--algorithm", "hierarchical", "-p", "8",
                                       "--tasks-per-machine", "4")
CASES["allreduce_ps"] = _cli("allreduce", "--algorithm", "ps", "-p", "4", "--num-ps", "4")
CASES["allreduce_phantom"] = _cli("allreduce", "--algorithm", "ring", "-p", "4", "--phantom",
                                  "--profile", "h100-nvlink4-100gbe")
_EXERCISE = ("--model", "mlp", "--dataset", "digits", "--global-batch", "32", "--steps", "3")
for _strategy in ("default", "one_device", "central_storage"):
    CASES[_strategy] = _cli(_strategy, *_EXERCISE)
for _ops in ("auto", "nccl", "hierarchical_copy", "reduction_to_one"):
    CASES[f"mirrored_{_ops}"] = _cli("mirrored", "--cross-device-ops", _ops, *_EXERCISE,
                                     "--profile", "v100-nvlink2-25gbe")
for _comm in ("ring", "nccl"):
    CASES[f"multi_worker_mirrored_{_comm}"] = _cli(
        "multi_worker_mirrored", "--workers", "3", "--replicas", "2", "--communication", _comm,
        *_EXERCISE, "--profile", "v100-nvlink2-25gbe")
CASES["multi_worker_mirrored_embedding"] = _cli(
    "multi_worker_mirrored", "--model", "embedding", "--dataset", "vocab", "--steps", "2")
# worker 1 fails in its first function (run again by worker 0), ps 1 during the last epoch
CASES["parameter_server_failures"] = _cli(
    "parameter_server", "--model", "embedding", "--dataset", "vocab", "--global-batch", "32",
    "--workers", "2", "--ps", "2", "--steps", "40", "--steps-per-execution", "2",
    "--fail", "worker:1@300us+200us", "--fail", "ps:1@3300us+100us")


CASES["tpu"] = _cli("tpu", "--model", "mlp", "--dataset", "digits", "--global-batch", "32",
                    "--steps", "4", "--steps-per-execution", "2")
CASES["data_parallel"] = _cli("data_parallel")
for _style in ("inline", "distributed", "exactly_once", "sidecar"):
    CASES[f"parameter_server_evaluation_{_style}"] = _cli(
        "parameter_server", "--model", "embedding", "--dataset", "vocab", "--global-batch",
        "32", "--workers", "2", "--ps", "1", "--steps", "8", "--evaluation", _style)


# simdist ps: TF1 between-graph training on parameter servers
CASES["ps_sync_backup"] = _command("ps", "--mode", "sync", "--workers", "3",
                                   "--replicas-to-aggregate", "2", "--steps", "5",
                                   "--step-us", "100,150,400")
CASES["ps_async"] = _command("ps", "--mode", "async", "--workers", "3", "--ps", "2", "--steps", "4")


def _loader_trainer(path):
    """TF1 queues: a loader filling a FIFOQueue, a trainer draining it."""
    from simdist.training.input_pipeline import loader_trainer

    loader_trainer(capacity=4, loader_threads=2, steps=6).trace.save(path)


def _in_graph(path):
    """In-graph replication: one client, a tower per worker."""
    from simdist.training.replication import in_graph_training

    in_graph_training(workers=3, steps=3).trace.save(path)


CASES["loader_trainer"] = _loader_trainer
CASES["in_graph_training"] = _in_graph


def trace_hash(name: str, directory: Path) -> str:
    path = directory / f"{name}.json"
    CASES[name](path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        hashes = {name: trace_hash(name, Path(tmp)) for name in CASES}
    for name, digest in hashes.items():
        print(f"{digest}  {name}")
    if "--write" in argv:
        HASHES.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
        print(f"wrote {HASHES}")


if __name__ == "__main__":
    main(sys.argv[1:])
