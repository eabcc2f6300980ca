"""What values real TF1 queues hand out, and how a QueueRunner ends: the second half of
``realdist.graph.queue_probe`` (sent after it to the same child, which defines ``tf``, ``tf1``,
``np``, ``attempt``, ``make_queue`` and ``timeout_config``; nothing is imported here).
"""


def shuffle_values(graph_seed, seed, timeout_ms=300):
    """The order RandomShuffleQueue(capacity=10, min_after_dequeue=2, int32, seed) gives 0..5
    dequeued one at a time: four while open, a fifth that blocks (size 2 is not above
    min_after_dequeue), then the rest after close; and its seed attrs."""
    graph = tf1.Graph()
    with graph.as_default():
        if graph_seed is not None:
            tf1.set_random_seed(graph_seed)
        q = tf1.RandomShuffleQueue(capacity=10, min_after_dequeue=2, dtypes=tf.int32,
                                   shapes=[()], seed=seed)
        enqueue, dequeue = q.enqueue_many(([0, 1, 2, 3, 4, 5],)), q.dequeue()
        config = timeout_config(timeout_ms)
        with tf1.Session(graph=graph, config=config) as sess:
            sess.run(enqueue)
            values = [int(sess.run(dequeue)) for _ in range(4)]
            blocked = attempt(lambda: sess.run(dequeue))
            sess.run(q.close())
            values += [int(sess.run(dequeue)) for _ in range(2)]
        with tf1.Session(graph=graph, config=config) as sess:
            sess.run(enqueue)
            sess.run(q.close())
            closed_first = [int(sess.run(dequeue)) for _ in range(6)]
        op = q.queue_ref.op
        return {"graph_seed": graph_seed, "seed": seed, "seed_attr": op.get_attr("seed"),
                "seed2_attr": op.get_attr("seed2"), "values": values,
                "fifth_while_open": blocked["error"]["class"] if "error" in blocked else blocked,
                "values_when_closed_first": closed_first}


def priority_order():
    """PriorityQueue: the order of (priority, value) pairs, ties included."""
    with tf1.Graph().as_default() as graph:
        q = tf1.PriorityQueue(10, [tf.string], shapes=[()])
        pairs = [(3, "c"), (1, "a"), (2, "b"), (1, "a2"), (-1, "neg"), (2, "b2"), (1, "a3")]
        enqueue = [q.enqueue(pair) for pair in pairs]
        dequeue, many = q.dequeue(), q.dequeue_many(len(pairs))
        with tf1.Session(graph=graph) as sess:
            for op in enqueue:
                sess.run(op)
            one_by_one = [sess.run(dequeue) for _ in pairs]
            sess.run(q.enqueue_many(([p for p, _ in pairs], [v for _, v in pairs])))
            at_once = sess.run(many)
    return {"enqueued": [list(p) for p in pairs],
            "dequeue_one_by_one": [[int(p), v.decode()] for p, v in one_by_one],
            "enqueue_many_then_dequeue_many": [[int(p), v.decode()]
                                               for p, v in zip(*at_once)]}


def padded(shapes, dtypes, values, n=None):
    """What PaddingFIFOQueue.dequeue_many(n) gives for ``values`` (one tuple per element),
    and its static shapes."""
    with tf1.Graph().as_default() as graph:
        q = tf1.PaddingFIFOQueue(len(values) + 1, [tf.as_dtype(d) for d in dtypes],
                                 shapes=shapes)
        enqueue = [q.enqueue(tuple(v)) for v in values]
        batch = q.dequeue_many(len(values) if n is None else n)
        with tf1.Session(graph=graph) as sess:
            for op in enqueue:
                sess.run(op)
            got = sess.run(batch)
    got = got if isinstance(got, list) else [got]
    return {"static_shapes": [shape_of(t) for t in (batch if isinstance(batch, list)
                                                    else [batch])],
            "values": [g.astype(str).tolist() if g.dtype.kind in "OSU" else g.tolist()
                       for g in got],
            "shapes": [list(g.shape) for g in got]}


def padding_examples():
    return {
        "vectors": padded([(None,)], ["int32"], [([1],), ([2, 3, 4],), ([5, 6],)]),
        "matrices": padded([(None, None)], ["float32"],
                           [([[1.0]],), ([[1.0, 2.0], [3.0, 4.0]],), ([[5.0, 6.0, 7.0]],)]),
        "strings_and_ints": padded([(None,), ()], ["string", "int32"],
                                   [(["a"], 1), (["b", "c"], 2)]),
    }


def queue_runner():
    """A QueueRunner of two enqueue threads on a full queue: what ``coord.join`` raises when
    the consumer closes the queue under it (by default only OutOfRangeError means
    "closed"), when CancelledError is declared a closed-queue error too, and when the
    coordinator stops it."""
    import time

    def run(name, stop, closed_types=None):
        graph = tf1.Graph()
        with graph.as_default():
            q = make_queue("FIFOQueue", capacity=1)
            runner = tf1.train.QueueRunner(q, [q.enqueue((1,))] * 2,
                                           queue_closed_exception_types=closed_types)
            close = q.close(cancel_pending_enqueues=True)
            with tf1.Session(graph=graph) as sess:
                coord = tf1.train.Coordinator()
                threads = runner.create_threads(sess, coord, start=True)
                time.sleep(0.2)
                if stop:
                    coord.request_stop()
                else:
                    sess.run(close)
                    for thread in threads[:-1]:
                        thread.join(5)
                    coord.request_stop()
                out = attempt(lambda: coord.join(threads, stop_grace_period_secs=5))
                out.update(threads=len(threads), is_closed=bool(sess.run(q.is_closed())),
                           size=int(sess.run(q.size())))
        return name, out

    return dict([run("closed_by_consumer", False),
                 run("closed_by_consumer_cancelled_is_closed", False,
                     (tf.errors.OutOfRangeError, tf.errors.CancelledError)),
                 run("coord_request_stop", True)])
