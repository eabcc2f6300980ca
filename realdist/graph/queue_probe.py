"""What real TF1 queues do, probed in a child process (``realdist.graph.queues`` sends this
file's source and ``queue_probe_values``'s to a fresh Python after
``realdist.runtime.processes.PRELUDE``: TensorFlow comes in as ``tf`` and ``tf1``, nothing is
imported here).

``probe()`` builds every queue class of ``tf.compat.v1`` in graph mode and records the ops
each method adds, the static shapes of what it returns, and the error (class, code, message)
of each way a queue can fail, at graph build time or in ``Session.run``; with the values
queues hand out (``queue_probe_values``).
"""

CLASSES = ("FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue")


def make_queue(kind, capacity=3, shapes=((),), **kwargs):
    """A one-component int32 queue of class ``kind`` (PriorityQueue: plus its int64
    priority); RandomShuffleQueue gets ``min_after_dequeue=0`` and ``seed=1`` unless given
    (unseeded, its order would change from run to run)."""
    if kind == "RandomShuffleQueue":
        kwargs.setdefault("min_after_dequeue", 0)
        kwargs.setdefault("seed", 1)
    types = "types" if kind == "PriorityQueue" else "dtypes"  # TF's own argument names
    return getattr(tf1, kind)(capacity=capacity, shapes=list(shapes), **{types: [tf.int32]},
                              **kwargs)


def element(kind, value):
    """The enqueue argument for one element ``value`` (PriorityQueue: priority = value)."""
    return (value, value) if kind == "PriorityQueue" else (value,)


def shape_of(tensor):
    shape = tensor.shape
    return None if shape.rank is None else shape.as_list()


def outputs(result):
    """What a queue method returned: its kind and the static shapes of its tensors."""
    if result is None or isinstance(result, tf1.Operation):
        return {"returns": "Operation" if result is not None else "None"}
    if isinstance(result, dict):
        return {"returns": "dict", "shapes": {k: shape_of(v) for k, v in result.items()},
                "dtypes": {k: v.dtype.name for k, v in result.items()}}
    if isinstance(result, (list, tuple)):
        return {"returns": type(result).__name__, "shapes": [shape_of(t) for t in result],
                "dtypes": [t.dtype.name for t in result]}
    return {"returns": "Tensor", "shapes": shape_of(result), "dtypes": result.dtype.name}


def method_calls(kind, q):
    one, many = element(kind, 1), element(kind, [1, 2])
    if kind == "PaddingFIFOQueue":
        one, many = ([1, 2],), ([[1, 2], [3, 4]],)
    return [("enqueue", lambda: q.enqueue(one)), ("enqueue_many", lambda: q.enqueue_many(many)),
            ("dequeue", q.dequeue), ("dequeue_many", lambda: q.dequeue_many(2)),
            ("dequeue_up_to", lambda: q.dequeue_up_to(2)), ("size", q.size),
            ("close", q.close), ("is_closed", q.is_closed)]


def queue_ops(kind, name):
    """The queue op and each method's new ops [(name, type)] and outputs, in a fresh graph."""
    graph = tf1.Graph()
    with graph.as_default():
        shapes = [(None,)] if kind == "PaddingFIFOQueue" else [()]
        q = make_queue(kind, shapes=shapes, **({"name": name} if name else {}))
        op = q.queue_ref.op
        attrs = {k: op.get_attr(k) for k in sorted(op.node_def.attr)}
        attrs["component_types"] = [tf.as_dtype(t).name for t in attrs["component_types"]]
        attrs["shapes"] = [tf.TensorShape(s).as_list() for s in attrs["shapes"]]
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
        facts = {"queue": {"name": q.name, "op": [op.name, op.type], "device": op.device,
                           "attrs": attrs, "dtypes": [d.name for d in q.dtypes],
                           "shapes": [s.as_list() for s in q.shapes]}}
        for method, call in method_calls(kind, q):
            before = set(graph.get_operations())
            result = call()
            facts[method] = {"ops": [[o.name, o.type] for o in graph.get_operations()
                                     if o not in before], **outputs(result)}
    return facts


def static_shapes():
    """The static shapes dequeue methods give for queues with and without known shapes."""
    cases = {}
    with tf1.Graph().as_default():
        n = tf1.placeholder(tf.int32, [], name="n")
        queues = {
            "FIFOQueue(shapes=None)": tf1.FIFOQueue(3, [tf.int32, tf.float32]),
            "FIFOQueue(shapes=[(), (2,)], names=['a', 'b'])": tf1.FIFOQueue(
                3, [tf.int32, tf.float32], shapes=[(), (2,)], names=["a", "b"]),
            "PaddingFIFOQueue(shapes=[(None, 2)])": tf1.PaddingFIFOQueue(
                3, [tf.int32], shapes=[(None, 2)]),
            "RandomShuffleQueue(shapes=[(2,)])": tf1.RandomShuffleQueue(
                3, 0, [tf.int32], shapes=[(2,)]),
            "PriorityQueue(types=[tf.string], shapes=[()])": tf1.PriorityQueue(
                3, [tf.string], shapes=[()]),
        }
        for label, q in queues.items():
            cases[label] = {"dequeue": outputs(q.dequeue()),
                            "dequeue_many(2)": outputs(q.dequeue_many(2)),
                            "dequeue_many(n placeholder)": outputs(q.dequeue_many(n)),
                            "dequeue_up_to(2)": outputs(q.dequeue_up_to(2))}
    return cases


def error(e):
    """The raw error: class, code, node, ``e.message`` and ``str(e)`` (realdist.graph.queues
    normalises the stack frames in them)."""
    op = getattr(e, "op", None)
    return {"class": type(e).__name__, "code": getattr(e, "error_code", None),
            "node": op.name if op is not None else None,
            "e.message": getattr(e, "message", None), "str": str(e)}


def attempt(fn):
    """{"value": fn()} or {"error": error(e)}."""
    try:
        value = fn()
    except Exception as e:  # noqa: BLE001 - every class TF raises is the fact recorded
        return {"error": error(e)}
    if isinstance(value, bytes):
        value = value.decode()
    return {"value": value.tolist() if hasattr(value, "tolist") else value}


def ran(sess, fetch):
    sess.run(fetch)
    return "ran"


def timeout_config(ms=200):
    return tf1.ConfigProto(operation_timeout_in_ms=ms)


def runtime_errors(kind):
    """Closing, cancelling and timing out, for one queue class (each case a fresh session)."""
    facts = {}

    def case(name, body, capacity=3, config=None):
        graph = tf1.Graph()
        with graph.as_default():
            q = make_queue(kind, capacity=capacity)
            with tf1.Session(graph=graph, config=config) as sess:
                facts[name] = body(q, sess)

    def fill(q, sess, values):
        for v in values:
            sess.run(q.enqueue(element(kind, v)))

    def closed_empty_dequeue(q, sess):
        sess.run(q.close())
        return attempt(lambda: sess.run(q.dequeue()))

    def closed_dequeue_many_fewer(q, sess):
        fill(q, sess, [1, 2])
        sess.run(q.close())
        out = attempt(lambda: sess.run(q.dequeue_many(3)))
        out["size_after"] = int(sess.run(q.size()))
        return out

    def closed_dequeue_up_to(q, sess):
        fill(q, sess, [1, 2])
        sess.run(q.close())
        some = q.dequeue_up_to(3)
        return {"some_left": attempt(lambda: sess.run(some)),
                "none_left": attempt(lambda: sess.run(q.dequeue_up_to(3))),
                "is_closed": bool(sess.run(q.is_closed())), "size": int(sess.run(q.size()))}

    def closed_enqueue(q, sess):
        sess.run(q.close())
        return attempt(lambda: sess.run(q.enqueue(element(kind, 1))))

    def pending_dequeue_then_close(q, sess):
        return pending(sess, q.dequeue(), q.close())

    def pending_enqueue_then_cancel(q, sess):
        fill(q, sess, [1])
        return pending(sess, q.enqueue(element(kind, 2)),
                       q.close(cancel_pending_enqueues=True))

    def pending_enqueue_then_close(q, sess):
        fill(q, sess, [1])
        out = pending(sess, q.enqueue(element(kind, 2)), q.close(), release=q.dequeue())
        out["size_after"] = int(sess.run(q.size()))
        return out

    def close_twice(q, sess):
        sess.run(q.close())
        return {"close": attempt(lambda: ran(sess, q.close())),
                "close(cancel_pending_enqueues=True)": attempt(
                    lambda: ran(sess, q.close(cancel_pending_enqueues=True)))}

    def dequeue_timeout(q, sess):
        return attempt(lambda: sess.run(q.dequeue()))

    def enqueue_timeout(q, sess):
        fill(q, sess, [1])
        return attempt(lambda: sess.run(q.enqueue(element(kind, 2))))

    def dequeue_many_timeout(q, sess):
        fill(q, sess, [1])
        out = attempt(lambda: sess.run(q.dequeue_many(2)))
        out["size_after"] = int(sess.run(q.size()))
        return out

    case("closed_empty_dequeue", closed_empty_dequeue)
    case("closed_dequeue_many_fewer", closed_dequeue_many_fewer)
    case("closed_dequeue_up_to", closed_dequeue_up_to)
    case("closed_enqueue", closed_enqueue)
    case("pending_dequeue_then_close", pending_dequeue_then_close)
    case("pending_enqueue_then_cancel", pending_enqueue_then_cancel, capacity=1)
    case("pending_enqueue_then_close", pending_enqueue_then_close, capacity=1)
    case("close_twice", close_twice)
    case("dequeue_timeout", dequeue_timeout, config=timeout_config())
    case("enqueue_timeout", enqueue_timeout, capacity=1, config=timeout_config())
    case("dequeue_many_timeout", dequeue_many_timeout, config=timeout_config())
    return facts


def pending(sess, blocked, then, release=None):
    """Run ``blocked`` in a thread and, once it has had 0.3 s to block, ``then`` in another:
    what each got. If either is still blocked 0.5 s later, run ``release`` and say which."""
    import threading
    import time

    got = {"blocked": {}, "then": {}}

    def run(key, fetch):
        thread = threading.Thread(target=lambda: got[key].update(
            attempt(lambda: sess.run(fetch))))
        thread.start()
        return thread

    threads = [run("blocked", blocked)]
    time.sleep(0.3)
    threads.append(run("then", then))
    for thread in threads:
        thread.join(0.5)
    still = [key for key, thread in zip(got, threads) if thread.is_alive()]
    if still:
        got["still_blocked_before_release"] = still
        got["release"] = attempt(lambda: sess.run(release))
        for thread in threads:
            thread.join()
    return got


def built(result):
    """What a build call that did not fail made."""
    if isinstance(result, tf1.Operation):
        return {"op": result.type, "component_inputs": len(result.inputs) - 1}
    return {"made": type(result).__name__}


def build_errors():
    """Errors raised while building the graph (no session)."""
    facts = {}

    def case(name, fn):
        with tf1.Graph().as_default():
            facts[name] = attempt(lambda: built(fn()))

    def fifo():
        return tf1.FIFOQueue(3, [tf.int32], shapes=[()])

    case("enqueue_wrong_dtype_python_float", lambda: fifo().enqueue((1.5,)))
    case("enqueue_wrong_dtype_tensor",
         lambda: fifo().enqueue((tf1.constant(1.5),)))
    case("enqueue_wrong_shape", lambda: fifo().enqueue(([1, 2],)))
    case("enqueue_many_wrong_shape", lambda: fifo().enqueue_many(([[1, 2]],)))
    case("enqueue_many_scalar", lambda: fifo().enqueue_many((1,)))
    case("enqueue_wrong_number_of_components", lambda: fifo().enqueue((1, 2)))
    case("padding_fifo_queue_without_shapes",
         lambda: tf1.PaddingFIFOQueue(3, [tf.int32]))
    case("padding_fifo_queue_unknown_rank",
         lambda: tf1.PaddingFIFOQueue(3, [tf.int32], shapes=[None]))
    case("priority_queue_float_priority", lambda: tf1.PriorityQueue(
        3, [tf.int32], shapes=[()]).enqueue((1.5, 1)))
    case("fifo_queue_shapes_length_mismatch",
         lambda: tf1.FIFOQueue(3, [tf.int32, tf.int32], shapes=[()]))
    return facts


def session_errors():
    """Errors that appear only when a session runs the queue op."""
    facts = {}

    def shared(name, first, second):
        graph = tf1.Graph()
        with graph.as_default():
            a, b = first(f"shared_{name}"), second(f"shared_{name}")
            with tf1.Session(graph=graph) as sess:
                sess.run(a.queue_ref)
                out = attempt(lambda: ran(sess, b.queue_ref))
                if "error" not in out:
                    sess.run(a.enqueue((7,)))
                    out["size_seen_by_second"] = int(sess.run(b.size()))
                facts[f"shared_name_{name}"] = out

    def fifo(capacity=3, dtype=tf.int32, shape=()):
        return lambda s: tf1.FIFOQueue(capacity, [dtype], shapes=[shape], shared_name=s)

    shared("same", fifo(), fifo())
    shared("different_dtypes", fifo(), fifo(dtype=tf.float32))
    shared("different_capacities", fifo(), fifo(capacity=4))
    shared("different_shapes", fifo(), fifo(shape=(2,)))
    shared("different_classes", fifo(),
           lambda s: tf1.PaddingFIFOQueue(3, [tf.int32], shapes=[()], shared_name=s))

    def run_case(name, build):
        graph = tf1.Graph()
        with graph.as_default():
            fetch = build()
            with tf1.Session(graph=graph) as sess:
                facts[name] = attempt(lambda: sess.run(fetch))

    run_case("random_shuffle_queue_min_after_dequeue_equals_capacity",
             lambda: tf1.RandomShuffleQueue(10, 10, [tf.int32], shapes=[()]).queue_ref)
    run_case("random_shuffle_queue_min_after_dequeue_above_capacity",
             lambda: tf1.RandomShuffleQueue(10, 11, [tf.int32], shapes=[()]).queue_ref)

    def dequeue_many_without_shapes():
        q = tf1.FIFOQueue(3, [tf.int32])
        with tf1.control_dependencies([q.enqueue_many(([1, 2],))]):
            return q.dequeue_many(2)

    run_case("dequeue_many_without_shapes", dequeue_many_without_shapes)
    return facts


def probe():
    """Every fact, in one dict (the order of the calls fixes the N of "_N_name")."""
    return {
        "tensorflow": tf.__version__,
        "ops": {kind: {"default_name": queue_ops(kind, None), 'name="q"': queue_ops(kind, "q")}
                for kind in CLASSES},
        "static_shapes": static_shapes(),
        "build_errors": build_errors(),
        "session_errors": session_errors(),
        "runtime_errors": {kind: runtime_errors(kind) for kind in CLASSES},
        "random_shuffle_queue": [shuffle_values(None, 3), shuffle_values(1, 3),
                                 shuffle_values(0, 3), shuffle_values(1, None)],
        "priority_queue": priority_order(),
        "queue_runner": queue_runner(),
        "padding_fifo_queue": padding_examples(),
    }
