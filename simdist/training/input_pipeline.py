"""A loader and a trainer sharing a queue: TF1's way of overlapping input with training.

``loader_trainer`` builds the between-graph program TF1 tutorials describe, on a simulated
cluster of a ps task and two workers: the queue lives on ``ps:0`` (``shared_name``), the
loader client on ``worker:1`` runs ``loader_threads`` QueueRunner threads that each read one
element per run, and the trainer client on ``worker:0`` dequeues ``batch`` elements per step
and trains (``train_flops`` on its CPU). A read is I/O (a disk, a remote file system): it
waits ``read_us`` without occupying the CPU, which is why TF1 programs used several enqueue
threads, and now and then (``stall_probability``, seeded) it stalls for ``stall_us``, which
is what a queue's capacity is for: a full queue carries the trainer through a stall. The
trainer is *starved* while its dequeue waits on an empty queue; ``starvation_sweep`` shows
how the capacity and the number of enqueue threads change that.
"""

from __future__ import annotations

import contextlib

from dataclasses import dataclass

from simdist.base.checks import (check_int, check_memory, check_number, check_probability,
                                 check_seed, check_time)
from simdist.base.errors import CancelledError, OutOfRangeError, check_ints
from simdist.base.files import save_figure
from simdist.graph._sim.clients import simulate_clients
from simdist.graph._sim.world import over_ranks
from simdist.graph.coordinator import Coordinator
from simdist.graph.data_flow_ops import FIFOQueue
from simdist.graph.graph import Graph
from simdist.graph.queue_runner import QueueRunner
from simdist.graph.io_ops import read_record
from simdist.graph.script_ops import timed_py_func
from simdist.graph.server import Server, cluster_of_running_servers, stop_all_servers
from simdist.graph._sim.world import world_of
from simdist.sim.limits import DEFAULT_LIMITS, RunLimits, check_events, check_limits
from simdist.trace.figure_lang import word
from simdist.graph.session import Session

QUEUE = "examples"


@dataclass
class PipelineRun:
    """What ``loader_trainer`` gives: the trace, the trainer's step end times, how long its
    dequeues waited in all (starvation), and the queue's size over time."""

    trace: object
    step_ends: list
    starved_ns: int
    end_time: int
    occupancy: list  # [(time ns, size)]

    @property
    def starved_fraction(self) -> float:
        return self.starved_ns / self.end_time if self.end_time else 0.0


#: the most enqueue threads (each a client thread of the loader)
MAX_LOADER_THREADS = 64
#: about the events of a trainer step and of each element it dequeues (measured)
STEP_EVENTS, ELEMENT_EVENTS = 100, 60


def _check_options(capacity, loader_threads, steps, batch, element_size, read_us, stall_us,
                   stall_probability, train_flops, seed, train_us, limits) -> None:
    """``loader_trainer``'s options by the shared rules (``simdist.base.checks``): counts,
    times within the run's simulated time, the queue's and the compute's arrays under the
    memory cap, the events under the run's limit."""
    check_ints("loader_trainer", capacity=capacity, loader_threads=loader_threads,
               steps=steps, batch=batch, element_size=element_size)
    check_limits(limits, "loader_trainer: limits")
    most = limits.max_sim_time if limits is not None else None
    check_int(loader_threads, "loader_trainer: loader_threads", 1, MAX_LOADER_THREADS,
              "each is a client thread")
    for name, value in (("read_us", read_us), ("stall_us", stall_us),
                        ("train_us", 0.0 if train_us is None else train_us)):
        check_time(value, f"loader_trainer: {name}", "us", 1000, most)
    check_probability(stall_probability, "loader_trainer: stall_probability")
    check_number(train_flops, "loader_trainer: train_flops", 0.0, None, "a number of FLOPs")
    check_seed(seed, "loader_trainer: seed")
    check_memory((capacity + batch + loader_threads) * element_size * 4,
                 f"loader_trainer: (capacity + batch + loader_threads) x element_size x 4 "
                 f"bytes (({capacity:,} + {batch:,} + {loader_threads:,}) x {element_size:,} "
                 "x 4)", "give a smaller element_size, capacity or batch")
    side = max(1, round((train_flops / 2) ** (1 / 3)))
    check_memory(2 * side * side * 4, f"loader_trainer: train_flops {train_flops:g} (two "
                 f"{side:,} x {side:,} float32 matrices)", "give fewer train_flops, or "
                 "train_us")
    if limits is not None:
        check_events(steps * (STEP_EVENTS + ELEMENT_EVENTS * batch), limits.max_events,
                     "give fewer steps or a smaller batch (loader_trainer)")


def compute_op(tf, flops: float):
    """A scalar op whose run does about ``flops`` of work (a square matmul)."""
    n = max(1, round((flops / 2) ** (1 / 3)))  # a matmul of n x n by n x n: 2 n^3 FLOPs
    return tf.reduce_sum(tf.matmul(tf.ones([n, n]), tf.ones([n, n]))) / float(n ** 3)


def loader_trainer(capacity: int = 4, loader_threads: int = 1, steps: int = 20,
                   batch: int = 2, element_size: int = 256, read_us: float = 25.0,
                   stall_us: float = 775.0, stall_probability: float = 0.1,
                   train_flops: float = 2.5e7, seed: int = 0, train_us: float | None = None,
                   limits: RunLimits | None = DEFAULT_LIMITS,
                   transport=None) -> PipelineRun | None:
    """Simulate the loader/trainer program; see the module docstring. With ``train_us``, a
    step is a ``timed_py_func`` of that length instead of ``train_flops`` of compute: the
    step realdist's ``real_loader_trainer`` measures. ``limits``: the run's (by default the
    commands' 10 million events and simulated day); sizes past them or past the memory cap
    are refused before it starts. ``transport`` (an ``MPITransport``, under mpiexec): the
    three tasks spread over its ranks; rank 0 gets the run (the same as in one process),
    the others None."""
    _check_options(capacity, loader_threads, steps, batch, element_size, read_us, stall_us,
                   stall_probability, train_flops, seed, train_us, limits)
    with over_ranks(transport) if transport is not None else contextlib.nullcontext():
        return _loader_trainer(capacity, loader_threads, steps, batch, element_size, read_us,
                               stall_us, stall_probability, train_flops, seed, train_us,
                               limits)


def _loader_trainer(capacity, loader_threads, steps, batch, element_size, read_us, stall_us,
                    stall_probability, train_flops, seed, train_us, limits):
    import simdist.graph as tf

    stop_all_servers()
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"],
                                    "worker": ["localhost:2223", "localhost:2224"]})
    servers = [Server(cluster, "ps", 0), Server(cluster, "worker", 0),
               Server(cluster, "worker", 1)]
    _, runtimes = cluster_of_running_servers()
    hardware = next(iter(runtimes.values())).machine.hardware
    world_of(runtimes, hardware).simulation.limits = limits  # a new world: from 0 events

    def shared_queue():
        with tf.device("/job:ps/task:0"):
            return FIFOQueue(capacity, tf.float32, shapes=[element_size], shared_name=QUEUE,
                             name=QUEUE)

    def loader():
        graph = Graph()
        with graph.as_default():
            queue = shared_queue()
            with tf.device("/job:worker/task:1"):
                reads = [read_record(element_size, read_us, seed + i, stall_us,
                                     stall_probability) for i in range(loader_threads)]
            # the trainer closes the queue under the enqueue threads: for them a cancelled
            # enqueue means "closed" too (on TF as here: by default only OutOfRangeError does)
            runner = QueueRunner(queue, [queue.enqueue(r) for r in reads],
                                 queue_closed_exception_types=(OutOfRangeError,
                                                               CancelledError))
        with Session(servers[2].target, graph=graph) as sess:
            coord = Coordinator()
            threads = runner.create_threads(sess, coord)
            for thread in threads[:-1]:  # the enqueue threads end when the trainer closes
                thread.join()
            coord.request_stop()  # ... and the closer thread waits for this
            coord.join(threads)

    def trainer():
        graph = Graph()
        with graph.as_default():
            queue = shared_queue()
            examples = queue.dequeue_many(batch)
            with tf.device("/job:worker/task:0"):
                step = (tf.reduce_sum(examples) + compute_op(tf, train_flops) if train_us is None
                        else timed_py_func([examples], train_us, name="train"))
            close = queue.close(cancel_pending_enqueues=True)
        ends = []
        with Session(servers[1].target, graph=graph) as sess:
            for _ in range(steps):
                sess.run(step)
                ends.append(sess.last_run.end_time)
            sess.run(close)
        return ends

    try:
        result = simulate_clients({"trainer": trainer, "loader": loader,
                                   "ps": servers[0].join},
                                  tasks={"trainer": "worker:0", "loader": "worker:1",
                                         "ps": "ps:0"})
    finally:
        stop_all_servers()
    trace = result.trace
    if trace is None:  # an MPI rank other than 0
        return None
    starved = sum(s.dur for s in trace.spans
                  if s.cat == "wait" and s.name.startswith(f"{QUEUE}_DequeueMany"))
    occupancy = [(c.t, c.values["size"]) for c in trace.counters if c.name == f"queue {QUEUE}"]
    return PipelineRun(trace, result.returns["trainer"], starved,
                       result.end_time - result.start_time, occupancy)


def starvation_sweep(capacities=(2, 4, 8, 16, 32), loader_threads=(1, 2, 3),
                     **options) -> list:
    """The trainer's starved fraction for each capacity and number of loader threads, the
    other ``loader_trainer`` options fixed: [{"capacity", "loader_threads", "starved",
    "step_ns"}]."""
    rows = []
    for threads in loader_threads:
        for capacity in capacities:
            run = loader_trainer(capacity=capacity, loader_threads=threads, **options)
            rows.append({"capacity": capacity, "loader_threads": threads,
                         "starved": run.starved_fraction,
                         "step_ns": run.end_time // len(run.step_ends)})
    return rows


def plot_starvation(rows: list, path=None, lang: str | None = None):
    """``starvation_sweep``'s rows drawn: the trainer's starved share of the time against the
    queue's capacity, one line per number of loader threads. Saved as a PNG if ``path``; its
    words in ``lang`` (default: ``figure_lang``'s)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    for threads in sorted({r["loader_threads"] for r in rows}):
        mine = sorted((r["capacity"], r["starved"]) for r in rows
                      if r["loader_threads"] == threads)
        ax.plot([c for c, _ in mine], [100 * s for _, s in mine], marker="o",
                label=word("loader_threads", lang, n=threads))
    ax.set_xscale("log", base=2)
    ax.set_xlabel(word("capacity", lang))
    ax.set_ylabel(word("starved_share", lang))
    ax.set_title(word("starvation_title", lang))
    ax.grid(color="0.9", linewidth=0.6)
    ax.legend()
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig
