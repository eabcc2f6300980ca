"""Lesson 08, In-graph and between-graph replication: reference solutions."""


def clients_and_threads(replication, mode, workers):
    """In-graph: one client; synchronous, one thread runs every tower; asynchronous, a
    thread per tower. Between-graph: a client per worker, each a one-thread loop; in sync
    mode the chief also starts SyncReplicasOptimizer's queue runner, two more threads that
    call the session (sync_token_q's EnqueueMany, and close_on_stop), as on real TF 2.21."""
    if replication == "in-graph":
        return 1, 1 if mode == "sync" else workers
    return workers, workers + 2 if mode == "sync" else workers


def averaging_device(replication, mode):
    """Synchronous: beside the variables, on the ps (in-graph: the program's average op;
    between-graph: the ConditionalAccumulator); asynchronous: nowhere."""
    return "/job:ps/task:0" if mode == "sync" else None


def split_pays(architecture, layers, layer_us, transfer_us):
    """A chain never gains (it only adds the transfers). Branches: GPU 1's path is a transfer
    in, half of the layers, a transfer back; it pays when that is shorter than all the
    layers on one GPU."""
    if architecture == "dense":
        return False
    return 2 * transfer_us + layers / 2 * layer_us < layers * layer_us


def master_requests(workers, mode, steps):
    """A plan's partitions are registered once, each run sends RunGraph once, to every task
    other than the master's own (worker:0, whose part needs no message). Sync: one plan on
    ps:0 and every worker, so ``workers`` tasks to reach. Async: a plan per tower, on ps:0,
    its tower's worker and worker:0 (the learning rate, the fetched loss): tower 0's reaches
    ps:0 only, each other tower's ps:0 and its worker, ``2 * workers - 1`` in all."""
    reached = workers if mode == "sync" else 2 * workers - 1
    return reached, reached * steps
