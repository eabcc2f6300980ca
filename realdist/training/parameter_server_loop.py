"""The coordinator's program of ``realdist run parameter_server``: simdist's ps_exercise.py
custom training loop on a real ``tf.distribute.experimental.ParameterServerStrategy`` with a
real ``tf.distribute.coordinator.ClusterCoordinator``. It runs in the chief's process of a
localhost cluster (``realdist.runtime.localcluster``), which imports it; ``CLUSTER`` is the cluster
dict and ``serve_in_process`` starts the worker and ps servers in this very process (the
in-process variant) where they are not processes of their own.

As in simdist: variables made from the model's initial weights, sharded by
``MinSizePartitioner(256 B, max_shards=ps)``, and the optimizer's ``iterations`` variable (the
hot one); ``create_per_worker_dataset`` gives each worker ``global_batches(seed * 1009 +
worker index)``, the worker's index read at run time with
``tf.distribute.coordinator.experimental_get_current_worker_index``; the coordinator schedules
``steps / steps_per_execution`` ``tf.function``s, each running ``steps_per_execution`` SGD
steps on whichever worker is free, and joins at every epoch's end.

What simdist draws from its own events, the functions report themselves: the worker that
ran them and ``tf.timestamp()`` at their start and end (one wall clock for every process of
this machine), and every start is also counted on ps:0 (``function_starts``, one entry per
scheduled function), so a function re-run after its worker died counts twice. A worker the
exercise fails holds its function until the SIGKILL lands (``hold_until_killed``), so the kill
falls mid-function every time.
"""

from __future__ import annotations

import json
import math
import threading
import time

import numpy as np

from simdist.training.data import global_batches
from simdist.training.ps_loop import MIN_SHARD_BYTES, steps_per_epoch_of
from simdist.training.exercises import Exercise

from realdist.training.models import make_variables, per_example_loss_fn


def server_config(tf, workers: int):
    """A worker's ConfigProto: ``workers + 1`` inter-op threads, else ``join()`` hangs on a
    machine of 2 cores (DESIGN.md)."""
    config = tf.compat.v1.ConfigProto()
    config.inter_op_parallelism_threads = workers + 1
    return config


def serve_in_process(tf, cluster: dict) -> list:
    """Every worker and ps task's ``tf.distribute.Server``, started in this process."""
    spec = tf.train.ClusterSpec(cluster)
    config = server_config(tf, len(cluster["worker"]))
    return [tf.distribute.Server(spec, job_name=job, task_index=i, protocol="grpc",
                                 config=config if job == "worker" else None, start=True)
            for job in ("worker", "ps") for i in range(len(cluster[job]))]


def serve(tf, cluster: dict, job: str, index: int) -> None:
    """One worker or ps task of the separate-process variant: serve until killed."""
    config = server_config(tf, len(cluster["worker"])) if job == "worker" else None
    tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=job, task_index=index,
                         protocol="grpc", config=config, start=True).join()


def worker_batches(exercise: Exercise, data, worker: int):
    """(x, y, starts, sizes): worker ``worker``'s global batches, concatenated."""
    batches = list(global_batches(data, exercise.global_batch, exercise.steps,
                                  exercise.seed * 1009 + worker))
    sizes = np.array([len(x) for x, _ in batches], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return (np.concatenate([x for x, _ in batches]), np.concatenate([y for _, y in batches]),
            starts, sizes)


def order_kill(control: str, task: str, down) -> None:
    """Ask the launcher (through its ``control`` file) to SIGKILL server task ``task`` now
    and to start it again ``down`` seconds later (never, for None)."""
    with open(control, "a") as f:
        f.write(json.dumps({"task": task, "down_ms": None if down is None else down * 1e3})
                + "\n")


HOLD_S = 30.0  # the longest a failing worker's function waits for its SIGKILL


def hold_until_killed(tf, hold, worker, start):
    """In a function on ``worker``: while ``hold[worker]`` is armed (1), say it holds (2) and
    spin until the watcher releases it (0) after the kill it ordered, at most HOLD_S after
    ``start``. A 4-step function here takes 40 ms cold and 5 ms warm, against the launcher's
    look at its control file every 20 ms: without the hold, a kill ordered as a function
    began could land after it ended (a clean clone's test saw no function run again)."""
    def say_it_holds():
        with tf.control_dependencies([hold.scatter_update(tf.IndexedSlices(
                tf.constant([2], tf.int64), tf.reshape(worker, [1])))]):
            return tf.constant(2, tf.int64)

    armed = tf.gather(hold, worker)
    said = tf.cond(armed == 1, say_it_holds, lambda: armed)

    def spin(n):  # ~2 ms between looks at hold on ps:0
        until = tf.timestamp() + 0.002
        return tf.while_loop(lambda i: tf.timestamp() < until, lambda i: i + 1, [n])

    with tf.control_dependencies([said]):
        return tf.while_loop(
            lambda n: tf.logical_and(tf.gather(hold, worker) > 0,
                                     tf.timestamp() < start + HOLD_S),
            spin, [tf.constant(0, tf.int64)])


def kill_mid_function(tf, control: str, failures, hold, starts, stop: threading.Event):
    """A thread that, for each failing worker (task, seconds after now, seconds down or
    None), arms ``hold`` at that time (``train`` arms those due at 0), waits for a function
    of that worker to hold, orders the launcher (through its ``control`` file) to SIGKILL the
    worker and to restart it, and releases the hold once the function started again
    (``starts``, counted on ps:0) or HOLD_S passed."""
    def set_hold(worker, value):
        hold.scatter_update(tf.IndexedSlices(tf.constant([value], tf.int64), [worker]))

    def watch():
        began = time.monotonic()
        for task, at, down in sorted(failures, key=lambda f: f[1]):
            worker = int(task.split(":")[1])
            if stop.wait(max(0.0, began + at - time.monotonic())):
                return
            set_hold(worker, 1)
            while int(hold.numpy()[worker]) != 2:
                if stop.wait(0.002):
                    return
            held = starts.numpy()
            order_kill(control, task, down)
            until = time.monotonic() + HOLD_S
            while time.monotonic() < until and not stop.wait(0.01):
                if ((held > 0) & (starts.numpy() > held)).any():  # it started again
                    break
            set_hold(worker, 0)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def updates_since(graph, first: int) -> list:
    """The variable updates (assign_sub of a shard, scatter_sub of a table's shards) made in
    ``graph`` since its op number ``first``. ``strategy.run`` calls the replica function in
    a thread of its own, where the function's ``tf.control_dependencies`` do not reach and
    an ``iterations.assign_add`` that uses no data ran as the function began, before the
    step's updates and even in a run killed before its start was counted (one step counted
    twice, "none ran again" beside N+1 steps applied); a ShardedVariable's ``scatter_sub``
    returns the variable, not its ops, hence the ops by type."""
    return [op for op in graph.get_operations()[first:]
            if op.type in ("AssignSubVariableOp", "ResourceScatterSub")]


def train(tf, cluster: dict, exercise: Exercise, failures=(), control=None,
          emit=None, evaluation=None) -> dict:
    """Run the exercise on ``cluster`` from its chief; what the coordinator saw.
    ``failures``: (worker task, seconds after the training starts, seconds down or None),
    carried out by the launcher reading ``control``; ``emit("start_line", ns)`` tells it
    when the training started. ``evaluation`` (``realdist.training.parameter_server_eval``) sees
    every epoch's end (``saved``) and evaluates after training (its result in
    "evaluation")."""
    model, data = exercise.build()
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
    partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=MIN_SHARD_BYTES, max_shards=exercise.ps)
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        resolver, variable_partitioner=partitioner)
    k = exercise.steps_per_execution
    functions = math.ceil(exercise.steps / k)
    with strategy.scope():
        weights = make_variables(model.init(exercise.seed))
        iterations = tf.Variable(0, dtype=tf.int64, name="iterations")
    with tf.device("/job:ps/task:0"):  # outside the scope: one variable, not sharded
        starts_on_ps = tf.Variable(tf.zeros([functions], tf.int64), name="function_starts")
        # per worker: 1 armed, 2 a function holds for its kill (hold_until_killed)
        hold = tf.Variable([int(any(t == f"worker:{w}" and at <= 0 for t, at, _ in failures))
                            for w in range(exercise.workers)], dtype=tf.int64, name="hold")
        passes = tf.Variable(tf.zeros([functions], tf.int64), name="function_passes")
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    names = list(weights)
    loss_of = per_example_loss_fn(exercise.model)
    lr = tf.constant(exercise.learning_rate, tf.float32)
    parts = [worker_batches(exercise, data, w) for w in range(exercise.workers)]
    x_all = tf.constant(np.stack([p[0] for p in parts]))
    y_all = tf.constant(np.stack([p[1] for p in parts]))
    starts_all = tf.constant(np.stack([p[2] for p in parts]))
    sizes_all = tf.constant(np.stack([p[3] for p in parts]))

    def dataset_fn():
        w = tf.distribute.coordinator.experimental_get_current_worker_index()
        x, y = tf.gather(x_all, w), tf.gather(y_all, w)
        slices = tf.data.Dataset.from_tensor_slices((tf.gather(starts_all, w),
                                                     tf.gather(sizes_all, w)))
        return slices.map(lambda s, n: (x[s:s + n], y[s:s + n]))

    table = "embedding" if exercise.model == "embedding" else None  # looked up, not read

    def replica_fn(x, y):
        dense, rows, ids = weights, None, None
        if table is not None:  # only the rows of this batch's ids, as simdist does
            ids, inverse = tf.unique(tf.reshape(x, [-1]))
            x = tf.reshape(inverse, tf.shape(x))
            rows = tf.nn.embedding_lookup(weights[table], ids)
            dense = {n: v for n, v in weights.items() if n != table}
        with tf.GradientTape() as tape:
            if rows is not None:
                tape.watch(rows)
            loss = tf.reduce_mean(loss_of(dense if rows is None else {**dense, table: rows},
                                          x, y))
        shards = [p for v in dense.values() for p in getattr(v, "variables", [v])]
        grads = tape.gradient(loss, shards + ([] if rows is None else [rows]))
        graph = tf.compat.v1.get_default_graph()
        first = len(graph.get_operations())
        for shard, g in zip(shards, grads):  # each shard's own part of the gradient
            shard.assign_sub(lr * g)
        if rows is not None:
            weights[table].scatter_sub(
                tf.IndexedSlices(lr * tf.convert_to_tensor(grads[-1]), ids))
        with tf.control_dependencies(updates_since(graph, first)):
            iterations.assign_add(1)  # a step applied: counted after its updates only
        return loss

    @tf.function
    def step_fn(iterator, function_id, steps):
        start = tf.timestamp()
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        started = tf.gather(starts_on_ps.scatter_add(  # counted before it may hold
            tf.IndexedSlices(tf.ones([1], tf.int64), [function_id])), function_id)
        held = [started]
        if failures:  # the steps wait for ps:0 to count the run past its hold, a scatter
            # that takes the hold's loop count as data: a control dependency on the loop
            # alone let a held function's steps run in some runs (2 of 3 with 2 ps)
            with tf.control_dependencies([started]):
                spins = hold_until_killed(tf, hold, worker, start)
            held = [tf.gather(passes.scatter_add(tf.IndexedSlices(
                tf.reshape(tf.minimum(spins, 0) + 1, [1]), [function_id])), function_id)]
        losses = []
        with tf.control_dependencies(held):
            for _ in range(steps):
                x, y = next(iterator)
                losses.append(strategy.run(replica_fn, args=(x, y)))
        with tf.control_dependencies(losses):
            end = tf.timestamp()
        return tf.stack(losses), worker, start, end

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    steps_per_epoch = steps_per_epoch_of(exercise, len(data.x))
    losses, runs, epochs = [], [], []
    clock = time.time_ns() - time.monotonic_ns()  # tf.timestamp() is time.time()
    began = time.monotonic_ns()
    if emit is not None:
        emit("start_line", began)
    stop = threading.Event()
    if failures:
        kill_mid_function(tf, control, failures, hold, starts_on_ps, stop)
    fid = 0
    for epoch in range(math.ceil(exercise.steps / steps_per_epoch)):
        start = time.monotonic_ns()
        todo = min(steps_per_epoch, exercise.steps - epoch * steps_per_epoch)
        values = []
        while todo > 0:
            fn_id = tf.constant(fid, tf.int64)  # a tensor: one trace for every function
            values.append((fid, coordinator.schedule(step_fn, args=(iterator, fn_id,
                                                                     min(k, todo)))))
            fid, todo = fid + 1, todo - k
        coordinator.join()
        for f, value in values:
            out, worker, t0, t1 = value.fetch()
            runs.append({"function": f, "worker": int(worker), "steps": len(out),
                         "start": int(t0 * 1e9) - clock, "end": int(t1 * 1e9) - clock})
            losses.extend(float(loss) for loss in out)
        epochs.append({"epoch": epoch, "start": start, "end": time.monotonic_ns(),
                       "iterations": int(iterations.numpy())})
        if evaluation is not None:
            evaluation.saved(weights, iterations)
    stop.set()
    evaluated = {} if evaluation is None else {"evaluation": evaluation.after_training(
        strategy, coordinator, weights, fid)}
    pieces = {n: getattr(weights[n], "variables", [weights[n]]) for n in names}
    shards = {n: [v.device for v in pieces[n]] for n in names}
    shapes = {n: [v.shape.as_list() for v in pieces[n]] for n in names}
    return {"losses": losses, "runs": runs, "epochs": epochs, "began": began,
            "weights": {n: tf.convert_to_tensor(weights[n]).numpy().tolist() for n in names},
            "iterations": int(iterations.numpy()),
            "function_starts": starts_on_ps.numpy().tolist(), "shards": shards,
            "shard_shapes": shapes,
            "strategy_class": type(strategy).__name__, "tensorflow": tf.__version__,
            **evaluated}
