"""Lesson 08, In-graph and between-graph replication: your exercises.

Copy this file to your workspace once (``simdist lesson start 08``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 08`` (or the
check cells of the notebook).
"""


def clients_and_threads(replication, mode, workers):
    """Exercise 1 (★): a job of ``workers`` worker tasks and one ps trains with
    ``replication`` ("in-graph" or "between-graph") and ``mode`` ("sync" or "async"), as
    in the lesson. How many client programs are there, and how many Python threads call
    ``Session.run``, all clients together (every thread that runs ops through a session
    counts, a queue runner's too: lesson 07)? Return a pair of ints ``(clients, threads)``.
    """
    raise NotImplementedError("exercise clients_and_threads: return (clients, threads)")


def averaging_device(replication, mode):
    """Exercise 2 (★★): on the lesson's cluster {ps: 1, worker: 2}, on which device are the
    replicas' gradients of one step averaged? Return a device string such as
    ``"/job:worker/task:1"``, or None if nothing averages them.
    """
    raise NotImplementedError("exercise averaging_device: return a device string or None")


def split_pays(architecture, layers, layer_us, transfer_us):
    """Exercise 3 (★★): a network of ``layers`` equal layers, ``architecture`` "dense" (one
    chain) or "branches" (two independent branches of ``layers // 2`` layers, summed at the
    end), is split over two GPUs as in the lesson's section 7. One layer takes ``layer_us``
    of compute, moving one activation from one GPU to the other ``transfer_us``. Does the
    split run a forward pass faster than one GPU? Return True or False.
    """
    raise NotImplementedError("exercise split_pays: return True or False")


def master_requests(workers, mode, steps):
    """Exercise 4 (★★): ``in_graph_training(workers, mode, steps)`` on a cluster {ps: 1,
    worker: ``workers``}: one client on worker:0, whose master partitions each plan it runs
    (sync: one train op run by one thread; async: a train op per tower, each run by its own
    thread) and sends the other tasks their parts. While the threads train (``steps`` runs
    each; the initialization before and the read of the global step after do not count), how
    many RegisterGraph requests and how many RunGraph requests does the master send over the
    network (requests only, not the responses)? Return a pair of ints
    ``(register_graph, run_graph)``.
    """
    raise NotImplementedError("exercise master_requests: return (register_graph, run_graph)")
