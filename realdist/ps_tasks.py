"""The worker processes of realdist's parameter-server training, on real TF1
(``realdist.ps_programs`` sends this file's source after ``realdist.queue_tasks``'s, which
gives ``serve``, ``worker_server``, ``session_config`` and ``now``; nothing is imported here).

``ps_worker`` runs the program of ``simdist.graph.ps_training.train_on_ps`` on real TF:
``replica_device_setter``, ``get_or_create_global_step``, a linear model on the worker's
shard, a ``py_func`` that sleeps ``step_ms`` before the gradient, ``GradientDescentOptimizer``
(wrapped in ``SyncReplicasOptimizer`` with its hook for ``mode="sync"``), ``StopAtStepHook``
and ``MonitoredTrainingSession``. Around it, what the comparison needs:

- one clock for the steps: the workers meet at a barrier on ps:0 and agree on a start
  time ``T0`` (the latest arrival + ``START_MARGIN_MS``); each worker's first compute ends
  at ``T0 + step_ms``, so the first run's graph registration (hundreds of ms on a busy
  machine, different per worker, none in simdist) does not shift one worker against
  another; every later compute ends ``step_ms`` after its ``Session.run`` began, so TF's
  own few ms per run before the py_func are inside ``step_ms`` rather than added to it;
- observers that change nothing TF does: each sync run also fetches the local step its
  gradients carried (the accumulator apply's own ``local_step`` input), the time its
  gradients were applied (a ``py_func`` after the accumulator applies) and the global step
  read on ps:0 right after them;
- a bounded end: a non-chief waits for the chief's initialization itself (polling) so that
  ``MonitoredTrainingSession`` does not sleep its 30 s ``recovery_wait_secs``; a run that
  meets the token queue closed by the stopping chief (OutOfRangeError) ends the loop, as
  in TF; results are emitted before the session closes, the close (the chief waits
  ``stop_grace_period_secs`` for its queue runner, blocked in a take that no gradient will
  complete) gets a bounded time, and the process ends with ``os._exit``.
"""

START_MARGIN_MS = 1000


def accumulator_applies(graph):
    """SyncReplicasOptimizer's apply_grad ops (one per variable), in graph order."""
    return [op for op in graph.get_operations()
            if op.type in ("ResourceAccumulatorApplyGradient", "AccumulatorApplyGradient")]


def start_line_ops(workers, k):
    """Every worker puts its arrival time into each worker's queue on ps:0, then takes
    ``workers`` times from its own: all leave together, each knowing every arrival."""
    with tf1.device("/job:ps/task:0"):
        queues = [tf1.FIFOQueue(workers, tf.int64, shapes=[()], shared_name=f"start_{j}",
                                name=f"start_{j}") for j in range(workers)]
    arrival = tf1.placeholder(tf.int64, [])
    return arrival, [q.enqueue(arrival) for q in queues], queues[k].dequeue_many(workers)


def meet_at_start_line(sess, ops):
    """The common start time T0 (ns), once every worker has arrived."""
    arrival, put, take = ops
    sess.run(put, {arrival: now()})
    return int(max(sess.run(take))) + START_MARGIN_MS * 1_000_000


def compute_op(ms, log, began):
    """The worker's compute: a py_func that sleeps until ``ms`` after ``began[0]`` (the
    start line, then the start of each ``Session.run``); appends (start, end) to ``log``."""
    import time

    def body():
        start = now()
        until = began[0] + int(ms * 1e6)
        time.sleep(max(0, until - now()) / 1e9)
        log.append((start, now()))
        return np.float32(0)

    return tf1.py_func(body, [], tf.float32, stateful=True, name="compute")


def wait_until_initialized(sess, uninitialized):
    """Poll every 10 ms until the chief has initialized the global variables."""
    import time

    while len(sess.run(uninitialized)):
        time.sleep(0.01)


def ps_worker(k, options):
    """worker:k's TF1 program; emits its runs and compute spans, then how it closed."""
    import threading

    mode, workers, steps = options["mode"], options["workers"], options["steps"]
    server = worker_server(k)
    cluster = tf.train.ClusterSpec(CLUSTER)
    x_data = np.asarray(options["x"], np.float32)
    y_data = np.asarray(options["y"], np.float32)
    computes, began = [], [None]
    graph = tf1.Graph()
    with graph.as_default():
        start_line = start_line_ops(workers, k)
        setter = tf1.train.replica_device_setter(worker_device=f"/job:worker/task:{k}",
                                                 cluster=cluster)
        with tf1.device(setter):
            global_step = tf1.train.get_or_create_global_step()
            w = tf1.get_variable("w", initializer=np.zeros(x_data.shape[1], np.float32))
            b = tf1.get_variable("b", initializer=np.zeros((), np.float32))
            read_step = global_step.read_value()
            x = tf.constant(x_data) + 0.0 * compute_op(options["step_ms"][k], computes, began)
            error = tf.reduce_sum(x * w, axis=1) + b - tf.constant(y_data)
            loss = tf.reduce_mean(tf.square(error))
            optimizer = tf1.train.GradientDescentOptimizer(options["learning_rate"])
            hooks = [tf1.train.StopAtStepHook(last_step=steps)]
            if mode == "sync":
                optimizer = tf1.train.SyncReplicasOptimizer(
                    optimizer, replicas_to_aggregate=options["replicas_to_aggregate"],
                    total_num_replicas=workers)
                hooks.append(optimizer.make_session_run_hook(k == 0))
            train_op = optimizer.minimize(loss, global_step=global_step)
            with tf1.control_dependencies([train_op]):
                step_after = global_step.read_value()
        fetches = {"step_after": step_after, "step_read": read_step, "loss": loss}
        local_step = None
        if mode == "sync":
            applies = accumulator_applies(graph)
            fetches["local_step"] = applies[0].inputs[1]
            with tf1.control_dependencies(applies):
                with tf1.device(f"/job:worker/task:{k}"):
                    fetches["applied_at"] = tf1.py_func(now, [], tf.int64, stateful=True)
                fetches["step_at_apply"] = global_step.read_value()
            local_step = next(v for v in tf1.local_variables()
                              if v.op.name == "sync_rep_local_step")
            accumulators = {op.inputs[0].op.get_attr("shared_name").decode(): op.device
                            for op in applies}
        uninitialized = tf1.report_uninitialized_variables(tf1.global_variables())
        config = session_config(k)
        plain = tf1.Session(server.target, graph=graph, config=config)
        if k != 0:
            wait_until_initialized(plain, uninitialized)
        sess = tf1.train.MonitoredTrainingSession(
            master=server.target, is_chief=k == 0, hooks=hooks, config=config,
            stop_grace_period_secs=options["grace_secs"])
        t0 = began[0] = meet_at_start_line(plain, start_line)
        runs, ended_by = [], None
        while not sess.should_stop():
            begin = now()
            if runs:  # the first run's compute ends step_ms after t0, each other's after it began
                began[0] = begin
            try:
                values = sess.run(fetches)
            except tf.errors.OutOfRangeError as error:  # the chief closed sync_token_q
                ended_by = {"error": type(error).__name__,
                            "message": next((line.strip() for line in error.message.splitlines()
                                             if "closed" in line), error.message.strip()),
                            "local_step": int(plain.run(local_step))}
                break
            runs.append({"begin": begin, "end": now(),
                         **{key: value.item() for key, value in values.items()}})
        emit("worker", {"t0": t0, "runs": runs, "computes": computes,
                        "ended_by": ended_by, "left": now(),
                        "accumulators": accumulators if mode == "sync" else {}})
        closer = threading.Thread(target=sess.close, daemon=True)
        closer.start()
        closer.join(options["grace_secs"] + 10)
    emit("closed", None if closer.is_alive() else now())
    os._exit(0)
