"""The worker processes of realdist's parameter-server training, on real TF1
(``realdist.training.ps_programs`` sends this file's source after
``realdist.training.queue_tasks``'s, which gives ``serve``, ``worker_server``,
``session_config`` and ``now``; nothing is imported here).

``ps_worker`` runs the program of ``simdist.training.ps_training.train_on_ps`` on real TF:
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
- failures (``realdist.runtime.localcluster`` kills and restarts a task's process): each run is
  emitted as it ends, so a killed worker leaves what it did; ``watch_sessions`` emits what
  TF logs when a MonitoredSession makes a new session, restores or saves a checkpoint; a
  restarted worker skips the start line;
- a bounded end: a non-chief waits for the chief's initialization itself (polling) so that
  ``MonitoredTrainingSession`` does not sleep its 30 s ``recovery_wait_secs`` (and its
  SessionManager, after a failure, polls every 50 ms: ``quick_recovery``); a run that
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


def wait_until_initialized(new_session, uninitialized):
    """Poll every 10 ms until the chief has initialized the global variables; a session
    that meets a ps down (a restarted worker) is made again. Returns the session."""
    import time

    while True:
        sess = new_session()
        try:
            while len(sess.run(uninitialized)):
                time.sleep(0.01)
            return sess
        except (tf.errors.UnavailableError, tf.errors.AbortedError):
            time.sleep(0.05)


def greedy_by_bytes(num_tasks):
    """tf.contrib.training.GreedyLoadBalancingStrategy(num_tasks, byte_size_load_fn), which
    TF 2 no longer ships: each variable goes to the ps task with the fewest bytes so far
    (the lowest index on ties), as simdist's ``train_on_ps`` places its weights."""
    loads = [0] * num_tasks

    def strategy(op):
        task = min(range(num_tasks), key=lambda i: loads[i])
        shape = tf.TensorShape(op.get_attr("shape"))
        loads[task] += shape.num_elements() * tf.as_dtype(op.get_attr("dtype")).size
        return task

    return strategy


def quick_recovery(secs):
    """MonitoredTrainingSession's SessionManager with ``recovery_wait_secs=secs`` (TF's is
    30 s, not an argument of MonitoredTrainingSession: a non-chief that finds the model not
    ready, at the start or after a ps restart, sleeps that long; simdist's ``train_on_ps``
    also waits 1 ms)."""
    import functools

    from tensorflow.python.training import monitored_session, session_manager

    monitored_session.sm = type("sm", (), {"SessionManager": functools.partial(
        session_manager.SessionManager, recovery_wait_secs=secs)})


def watch_sessions(k):
    """Emit, as ``event[]``, what TF logs when a MonitoredSession makes a new session after
    an AbortedError or UnavailableError (a task failed), and the checkpoints the saver
    restores and the CheckpointSaverHook writes: {"t", "kind", ...}. Changes nothing TF
    does."""
    import logging

    class Watch(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            event = None
            if message.startswith("An error was raised"):
                error = next((a for a in record.args or () if isinstance(a, Exception)), None)
                event = {"kind": "creating" if "being created" in message else "recreate",
                         "error": type(error).__name__ if error is not None else "?",
                         "message": str(error).strip().splitlines()[0] if error else ""}
            elif message.startswith("Restoring parameters from "):
                event = {"kind": "restore", "path": message.split(" from ", 1)[1]}
            elif message.startswith("Saving checkpoints for "):
                event = {"kind": "save", "step": int(message.split()[3])}
            if event is not None:
                emit("event[]", {"t": now(), **event})

    logger = logging.getLogger("tensorflow")
    logger.setLevel(logging.INFO)
    logger.addHandler(Watch())


def ps_worker(k, options):
    """worker:k's TF1 program; emits its runs and compute spans as they happen (a killed
    worker leaves what it did), the recoveries, then how it closed. A restarted worker
    (``DISTLAB_INCARNATION`` > 0) skips the start line."""
    import threading

    incarnation = int(os.environ.get("DISTLAB_INCARNATION", "0"))
    mode, workers, steps, ps = (options[key] for key in ("mode", "workers", "steps", "ps"))
    server = worker_server(k)
    cluster = tf.train.ClusterSpec(CLUSTER)
    x_data = np.asarray(options["x"], np.float32)
    y_data = np.asarray(options["y"], np.float32)
    computes, began = [], [None]
    graph = tf1.Graph()
    with graph.as_default():
        start_line = start_line_ops(workers, k)
        # with several ps tasks the weights are cut in one part per ps, placed by size
        setter = tf1.train.replica_device_setter(
            worker_device=f"/job:worker/task:{k}", cluster=cluster,
            ps_strategy=greedy_by_bytes(ps) if ps > 1 else None)
        with tf1.device(setter):
            global_step = tf1.train.get_or_create_global_step()
            columns = np.array_split(np.arange(options["features"]), ps)
            parts = [tf1.get_variable("w" if ps == 1 else f"w_part_{i}",
                                      initializer=np.zeros(len(c), np.float32))
                     for i, c in enumerate(columns)]
            b = tf1.get_variable("b", initializer=np.zeros((), np.float32))
            read_step = global_step.read_value()
            compute = compute_op(options["step_ms"][k], computes, began)
            predicted = b - tf.constant(y_data) + 0.0 * compute
            if options["model"] == "sparse":  # each example uses 8 of the weights: a lookup
                rows = tf1.nn.embedding_lookup(parts[0], tf.constant(
                    np.asarray(options["ids"], np.int32)))
                predicted = predicted + tf.reduce_sum(rows * tf.constant(x_data), axis=1)
            for part, c in zip(parts if options["model"] == "dense" else [], columns):
                predicted = predicted + tf.reduce_sum(tf.constant(x_data[:, c]) * part, axis=1)
            loss = tf.reduce_mean(tf.square(predicted))
            optimizer = tf1.train.GradientDescentOptimizer(options["learning_rate"])
            hooks = [tf1.train.StopAtStepHook(last_step=steps)]
            if mode == "sync":
                optimizer = tf1.train.SyncReplicasOptimizer(
                    optimizer, replicas_to_aggregate=options["replicas_to_aggregate"],
                    total_num_replicas=workers)
                hooks.append(optimizer.make_session_run_hook(k == 0))
            train_op = optimizer.minimize(loss, global_step=global_step,
                                          var_list=parts + [b])
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
            emit("accumulators", {op.inputs[0].op.get_attr("shared_name").decode(): op.device
                                  for op in applies})
        uninitialized = tf1.report_uninitialized_variables(tf1.global_variables())
        config = session_config(k)

        def new_session():
            return tf1.Session(server.target, graph=graph, config=config)

        plain = wait_until_initialized(new_session, uninitialized) if k != 0 else new_session()
        quick_recovery(0.05)
        watch_sessions(k)
        checkpoints = {}
        if options["checkpoint_dir"] is not None:  # no summaries; TF's 600 s without steps
            checkpoints = {"checkpoint_dir": options["checkpoint_dir"],
                           "save_summaries_steps": None, "save_summaries_secs": None,
                           "log_step_count_steps": None}
            if options["save_checkpoint_steps"] is not None:
                checkpoints.update(save_checkpoint_steps=options["save_checkpoint_steps"],
                                   save_checkpoint_secs=None)
        sess = tf1.train.MonitoredTrainingSession(
            master=server.target, is_chief=k == 0, hooks=hooks, config=config,
            stop_grace_period_secs=options["grace_secs"], **checkpoints)
        if incarnation == 0:
            began[0] = meet_at_start_line(plain, start_line)
            emit("start_line", began[0])
        ended_by, last_compute = None, None
        while not sess.should_stop():
            begin = began[0] = max(now(), began[0] or 0)
            computed = len(computes)
            try:
                values = sess.run(fetches)
            except tf.errors.OutOfRangeError as error:  # the chief closed sync_token_q
                ended_by = {"error": type(error).__name__,
                            "message": next((line.strip() for line in error.message.splitlines()
                                             if "closed" in line), error.message.strip())}
                try:
                    ended_by["local_step"] = int(plain.run(local_step))
                except tf.errors.OpError:  # the plain session met a failed task before
                    pass
                if len(computes) > computed:  # the run computed, then met the closed queue
                    last_compute = computes[-1]
                break
            emit("run[]", {"begin": begin, "end": now(), "compute": computes[-1],
                           **{key: value.item() for key, value in values.items()}})
        emit("ended_by", ended_by)
        emit("left", now())
        if last_compute is not None:
            emit("last_compute", last_compute)
        closer = threading.Thread(target=sess.close, daemon=True)
        closer.start()
        closer.join(options["grace_secs"] + 10)
    emit("closed", None if closer.is_alive() else now())
    os._exit(0)
