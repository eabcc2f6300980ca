"""The processes of realdist's queue programs, on real TF1
(``realdist.training.queue_programs`` sends this file's source to each task after
``realdist.runtime.processes.PRELUDE``; a task of a localhost cluster also has ``CLUSTER`` and
``TASK``, see ``realdist.runtime.localcluster``; nothing is imported here).

Between-graph replication as TF1 did it: the ps task only serves (``server.join()``); each
worker process runs its own ``tf.distribute.Server`` and a client of it, with
``device_filters`` so that its session needs only the ps task and itself. The queues live on
``ps:0`` under a ``shared_name``; the clients start together at a barrier (a token each in a
shared queue). Work that should take a given time (reading an example, training, predicting)
is a ``tf1.py_func`` that sleeps, so that it runs where TF places it and the process records
when it ran (``time.monotonic_ns``, one clock for every process of the machine).
"""

QUEUE = "examples"


def now():
    import time

    return time.monotonic_ns()


def serve(job, index):
    """A task that only serves (the ps task)."""
    tf.distribute.Server(tf.train.ClusterSpec(CLUSTER), job, index).join()


def worker_server(index):
    """This process's own worker task (4 inter-op threads: blocked queue ops and py_funcs
    must not starve each other on a 2-core machine)."""
    config = tf1.ConfigProto(inter_op_parallelism_threads=4)
    server = tf.distribute.Server(tf.train.ClusterSpec(CLUSTER), "worker", index,
                                  config=config)
    wait_for_ps()
    return server


def wait_for_ps():
    """Wait until every ps task accepts connections: a session created before would leave
    gRPC backing off (1 s, 1.6 s, 2.6 s...) before it tries again."""
    import socket
    import time

    for address in CLUSTER["ps"]:
        host, port = address.rsplit(":", 1)
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                break
            except OSError:
                time.sleep(0.02)


def session_config(index, **options):
    return tf1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"], **options)


def barrier_ops(clients):
    with tf1.device("/job:ps/task:0"):
        tokens = tf1.FIFOQueue(clients, tf.int32, shapes=[()], shared_name="barrier",
                               name="barrier")
    return tokens.enqueue(1), tokens.size()


def wait_at_barrier(sess, ops, clients):
    """Put this client's token, then wait until every client has put one."""
    import time

    arrive, arrived = ops
    sess.run(arrive)
    while sess.run(arrived) < clients:
        time.sleep(0.005)
    return now()


def timed_py_func(name, ms, log, fn, inputs, dtype):
    """A py_func op that sleeps ``ms`` then returns ``fn(*inputs)``; appends (start, end)."""
    import time

    def body(*args):
        start = now()
        time.sleep(ms / 1000)
        log.append((start, now()))
        return fn(*args)

    return tf1.py_func(body, inputs, dtype, stateful=True, name=name)


# -- a loader and a trainer sharing a queue --------------------------------------------------


def examples_queue(capacity, element_size):
    with tf1.device("/job:ps/task:0"):
        return tf1.FIFOQueue(capacity, tf.float32, shapes=[(element_size,)],
                             shared_name=QUEUE, name=QUEUE)


def loader(capacity, threads, element_size, load_ms):
    """worker:1: ``threads`` QueueRunner threads, each reading one example per run."""
    import threading

    server = worker_server(1)
    reads, lock = [[] for _ in range(threads)], threading.Lock()
    count = [0]

    def example():
        with lock:
            count[0] += 1
            return np.full(element_size, count[0] - 1, np.float32)

    graph = tf1.Graph()
    with graph.as_default():
        queue = examples_queue(capacity, element_size)
        barrier = barrier_ops(2)
        with tf1.device("/job:worker/task:1"):
            elements = [timed_py_func(f"read_{i}", load_ms, reads[i], example, [], tf.float32)
                        for i in range(threads)]
        for element in elements:
            element.set_shape([element_size])
        # the trainer closes the queue under the runner: its enqueues end in CancelledError
        closed = (tf.errors.OutOfRangeError, tf.errors.CancelledError)
        runner = tf1.train.QueueRunner(queue, [queue.enqueue(e) for e in elements],
                                       queue_closed_exception_types=closed)
    with tf1.Session(server.target, graph=graph, config=session_config(1)) as sess:
        start = wait_at_barrier(sess, barrier, 2)
        coord = tf1.train.Coordinator()
        runner_threads = runner.create_threads(sess, coord, start=True)
        for thread in runner_threads[:-1]:  # the enqueue threads end when the trainer closes
            thread.join()
        coord.request_stop()  # ... and the closer thread waits for this
        coord.join(runner_threads)
    emit("loader", {"start": start, "reads": reads})


def trainer(capacity, batch, element_size, steps, train_ms, poll_ms):
    """worker:0: dequeue ``batch`` examples and train, ``steps`` times, while a thread polls
    the queue's size; then close the queue (cancelling the loader's pending enqueues)."""
    import threading
    import time

    server = worker_server(0)
    trains = []
    graph = tf1.Graph()
    with graph.as_default():
        queue = examples_queue(capacity, element_size)
        barrier = barrier_ops(2)
        examples = queue.dequeue_many(batch)
        with tf1.device("/job:worker/task:0"):
            step = timed_py_func("train", train_ms, trains, lambda x: x[:, 0], [examples],
                                 tf.float32)
        size, close = queue.size(), queue.close(cancel_pending_enqueues=True)
    with tf1.Session(server.target, graph=graph, config=session_config(0)) as sess:
        start = wait_at_barrier(sess, barrier, 2)
        done, sizes = threading.Event(), []

        def poll():
            while not done.is_set():
                sizes.append((now(), int(sess.run(size))))
                time.sleep(poll_ms / 1000)

        poller = threading.Thread(target=poll)
        poller.start()
        runs, ids = [], []
        try:
            for _ in range(steps):
                begin = now()
                ids += sess.run(step).astype(int).tolist()
                runs.append((begin, now()))
        finally:
            done.set()
            poller.join()
        sess.run(close)
    emit("trainer", {"start": start, "runs": runs, "trains": trains, "sizes": sizes,
                     "ids": ids})


def dataset_trainer(loaders, buffer, batch, element_size, steps, load_ms, train_ms, seed):
    """The same trainer fed by tf.data in one process: from_tensor_slices(example ids)
    .map(read, num_parallel_calls=loaders).shuffle(buffer).batch(batch).prefetch(1)."""
    reads, trains = [], []
    graph = tf1.Graph()
    with graph.as_default():
        ids = tf.data.Dataset.from_tensor_slices(np.arange(steps * batch, dtype=np.float32))

        def read(i):
            example = timed_py_func("read", load_ms, reads,
                                    lambda j: np.full(element_size, j, np.float32), [i],
                                    tf.float32)
            example.set_shape([element_size])
            return example

        data = (ids.map(read, num_parallel_calls=loaders).shuffle(buffer, seed=seed)
                .batch(batch).prefetch(1))
        examples = tf1.data.make_one_shot_iterator(data).get_next()
        step = timed_py_func("train", train_ms, trains, lambda x: x[:, 0], [examples],
                             tf.float32)
    runs, seen = [], []
    with tf1.Session(graph=graph) as sess:
        start = now()
        for _ in range(steps):
            begin = now()
            seen += sess.run(step).astype(int).tolist()
            runs.append((begin, now()))
    emit("trainer", {"start": start, "runs": runs, "trains": trains, "ids": seen,
                     "reads": reads})


# -- the between-graph ensemble --------------------------------------------------------------


def ensemble_queues(predictors, inputs):
    """Each predictor's input queue (a queue hands an element to one dequeuer only, so every
    model needs its own copy of each input) and the shared prediction queue, on ps:0."""
    with tf1.device("/job:ps/task:0"):
        ins = [tf1.FIFOQueue(inputs, tf.float32, shapes=[()], shared_name=f"inputs_{k}",
                             name=f"inputs_{k}") for k in range(predictors)]
        out = tf1.FIFOQueue(inputs * predictors, [tf.int32, tf.int32, tf.float32],
                            shapes=[(), (), ()], shared_name="predictions", name="predictions")
    return ins, out


def predictor(k, predictors, inputs, predict_ms):
    """worker:k+1: model k predicts input x (k + 1) for each input, taking ``predict_ms``;
    stops when the aggregator closes the queues."""
    server = worker_server(k + 1)
    predicts = []
    graph = tf1.Graph()
    with graph.as_default():
        ins, out = ensemble_queues(predictors, inputs)
        barrier = barrier_ops(predictors + 1)
        index = tf1.placeholder(tf.int32, [])
        value = ins[k].dequeue()
        with tf1.device(f"/job:worker/task:{k + 1}"):
            prediction = timed_py_func("predict", predict_ms, predicts,
                                       lambda v: v * np.float32(k + 1), [value], tf.float32)
            prediction.set_shape([])
        put = out.enqueue([index, k, prediction])
    ended = None
    with tf1.Session(server.target, graph=graph, config=session_config(k + 1)) as sess:
        start = wait_at_barrier(sess, barrier, predictors + 1)
        for i in range(inputs):
            try:
                sess.run(put, {index: i})
            except (tf.errors.OutOfRangeError, tf.errors.CancelledError) as error:
                ended = type(error).__name__
                break
    emit("predictor", {"start": start, "predicts": predicts, "ended_by": ended})


def aggregator(predictors, inputs, timeout_ms):
    """worker:0: put each input in every input queue, then take predictions for each input
    in a session with ``operation_timeout_in_ms``: a wait that times out ends that input
    (DeadlineExceededError), predictions of later inputs are kept for them, late ones
    dropped. Closes every queue at the end (cancelling pending enqueues)."""
    server = worker_server(0)
    graph = tf1.Graph()
    with graph.as_default():
        ins, out = ensemble_queues(predictors, inputs)
        barrier = barrier_ops(predictors + 1)
        value = tf1.placeholder(tf.float32, [])
        feeds = [q.enqueue(value) for q in ins]
        take = out.dequeue()
        closes = [q.close(cancel_pending_enqueues=True) for q in ins + [out]]
    with tf1.Session(server.target, graph=graph, config=session_config(0)) as sess:
        start = wait_at_barrier(sess, barrier, predictors + 1)
        for i in range(inputs):
            for feed in feeds:
                sess.run(feed, {value: float(i + 1)})
    received, early, late, waits = [], {}, [], []
    config = session_config(0, operation_timeout_in_ms=timeout_ms)
    with tf1.Session(server.target, graph=graph, config=config) as sess:
        for i in range(inputs):
            got = early.pop(i, {})
            while len(got) < predictors:
                begin = now()
                try:
                    index, k, prediction = (x.item() for x in sess.run(take))
                except tf.errors.DeadlineExceededError:
                    waits.append((i, begin, now(), None))
                    break
                waits.append((i, begin, now(), k))
                if index == i:
                    got[k] = prediction
                elif index > i:
                    early.setdefault(index, {})[k] = prediction
                else:
                    late.append((index, k))
            received.append(got)
        for close in closes:
            sess.run(close)
    emit("aggregator", {"start": start, "received": [{str(k): v for k, v in got.items()}
                                                     for got in received],
                        "late": late, "waits": waits})
