"""simdist.graph's queues, ConditionalAccumulator, QueueRunner and Coordinator, against the
behaviour of TF 2.21 (op names and types, shapes, error classes and messages, checked on
real TF with tf.compat.v1 in graph mode), and queues shared between concurrent clients."""

import threading

import numpy as np
import pytest

import simdist.graph as tf
from simdist.sim.core import SimulationDeadlock

pytestmark = pytest.mark.usefixtures("fresh_tf1")
errors = tf.errors


def test_queue_ops_have_tf_names_types_and_shapes():
    q = tf.FIFOQueue(3, tf.float32, shapes=[()], name="q")
    ops = [q.enqueue(1.0), q.enqueue_many([[1.0, 2.0]]), q.close()]
    assert [op.name for op in ops] == ["q_enqueue", "q_EnqueueMany", "q_Close"]
    assert [op.type for op in ops] == ["QueueEnqueueV2", "QueueEnqueueManyV2", "QueueCloseV2"]
    tensors = [q.dequeue(), q.dequeue_many(3), q.dequeue_up_to(3), q.size(), q.is_closed()]
    assert [t.name for t in tensors] == ["q_Dequeue:0", "q_DequeueMany:0", "q_DequeueUpTo:0",
                                         "q_Size:0", "q_Is_Closed:0"]
    assert [t.shape for t in tensors[:3]] == [(), (3,), (None,)]
    assert (q.name, q.queue_ref.op.type) == ("q", "FIFOQueueV2")
    assert tf.FIFOQueue(2, tf.int32).name == "fifo_queue"


def test_queue_ops_run_on_the_queues_device():
    with tf.device("/cpu:0"):
        q = tf.FIFOQueue(3, tf.float32, shapes=[()], name="q")
    with tf.device("/cpu:1"):
        deq = q.dequeue()
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as sess:
        sess._placer.place(sess.graph.get_operations())
        assert sess.last_placement["q_Dequeue"].endswith("/device:CPU:0")


def test_a_closed_queue_raises_what_tf_raises():
    q = tf.FIFOQueue(3, tf.float32, shapes=[()], name="q")
    with tf.Session() as sess:
        sess.run(q.enqueue_many([[1.0, 2.0]]))
        sess.run(q.close())
        assert bool(sess.run(q.is_closed()))
        with pytest.raises(errors.OutOfRangeError) as error:
            sess.run(q.dequeue_many(3))
        assert str(error.value) == ("FIFOQueue 'q' is closed and has insufficient elements "
                                    "(requested 3, current size 2)\n\t [[{node q_DequeueMany}}]]"
                                    .replace("[{node", "[{{node"))
        np.testing.assert_array_equal(sess.run(q.dequeue_up_to(3)), [1.0, 2.0])
        with pytest.raises(errors.OutOfRangeError, match=r"requested 3, current size 0"):
            sess.run(q.dequeue_up_to(3))
        with pytest.raises(errors.CancelledError, match=r"^FIFOQueue 'q' is closed\.\n"):
            sess.run(q.enqueue(3.0))
        with pytest.raises(errors.CancelledError, match=r"^Queue 'q' is already closed\.\n"):
            sess.run(q.close())


def test_operation_timeout_gives_deadline_exceeded():
    q = tf.FIFOQueue(3, tf.float32, shapes=[()], name="q")
    config = tf.ConfigProto(operation_timeout_in_ms=100)
    with tf.Session(config=config) as sess:
        with pytest.raises(errors.DeadlineExceededError,
                           match="^Timed out waiting for notification$"):
            sess.run(q.dequeue())


def test_an_empty_queue_with_nobody_to_fill_it_is_a_deadlock_report_not_a_hang():
    q = tf.FIFOQueue(3, tf.float32, shapes=[()], name="q")
    with tf.Session() as sess:
        with pytest.raises(SimulationDeadlock, match=r"q_Dequeue \(QueueDequeueV2\) waits on "
                                                     r"get 1 from q"):
            sess.run(q.dequeue())
        sess.run(q.enqueue(5.0))  # the next run starts afresh; the queue kept its state
        assert float(sess.run(q.dequeue())) == 5.0


def test_shared_queues_must_agree_as_in_tf():
    a = tf.FIFOQueue(3, tf.float32, shared_name="shared", name="a")
    b = tf.FIFOQueue(3, tf.int32, shared_name="shared", name="b")
    c = tf.FIFOQueue(4, tf.float32, shared_name="shared", name="c")
    with tf.Session() as sess:
        sess.run(a.size())
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"^Shared queue 'shared' has component types float but "
                                 r"requested component types were int32\n\t \[\[\{\{node b\}\}"):
            sess.run(b.size())
        with pytest.raises(errors.InvalidArgumentError,
                           match="has capacity 3 but requested capacity was 4"):
            sess.run(c.size())


def test_wrong_dtype_or_shape_is_refused_when_the_op_is_built():
    q = tf.FIFOQueue(3, [tf.int32, tf.float32], shapes=[(), (2,)])
    with pytest.raises(TypeError, match=r"^Expected int32, but got 1\.5 of type 'float'\.$"):
        q.enqueue([1.5, [1.0, 2.0]])
    with pytest.raises(ValueError, match=r"^Shapes \(3,\) and \(2,\) are incompatible$"):
        q.enqueue([1, [1.0, 2.0, 3.0]])


def test_padding_priority_and_random_shuffle_queues():
    pq = tf.PaddingFIFOQueue(5, [tf.int32], shapes=[(None,)])
    ops = [pq.enqueue([[1, 2]]), pq.enqueue([[3]]), pq.enqueue([[4, 5, 6]])]
    batch = pq.dequeue_many(3)
    assert batch.shape == (3, None)  # as TF's static shape
    prio = tf.PriorityQueue(10, [tf.int32], shapes=[()])
    shuffle = tf.RandomShuffleQueue(10, 2, tf.int32, shapes=[()], seed=3)
    with tf.Session() as sess:
        for op in ops:
            sess.run(op)
        np.testing.assert_array_equal(sess.run(batch), [[1, 2, 0], [3, 0, 0], [4, 5, 6]])
        sess.run(prio.enqueue_many([[3, 1, 2], [30, 10, 20]]))
        priorities, values = sess.run(prio.dequeue_many(3))
        assert priorities.tolist() == [1, 2, 3] and values.tolist() == [10, 20, 30]
        sess.run(shuffle.enqueue_many([list(range(6))]))
        taken = [int(sess.run(shuffle.dequeue())) for _ in range(4)]
        assert sorted(taken) != taken or len(set(taken)) == 4  # a permutation's prefix
        assert int(sess.run(shuffle.size())) == 2  # min_after_dequeue stays behind...
        sess.run(shuffle.close())
        assert sorted(sess.run(shuffle.dequeue_many(2)).tolist() + taken) == list(range(6))


def test_conditional_accumulator_as_tf():
    acc = tf.ConditionalAccumulator(tf.float32, shape=(), name="acc")
    apply0 = acc.apply_grad(1.0, local_step=0)
    take = acc.take_grad(2)
    num = acc.num_accumulated()
    assert (acc.name, apply0.name, take.name, num.name) == (
        "acc", "ResourceAccumulatorApplyGradient", "ResourceAccumulatorTakeGradient:0",
        "acc_NumAccumulated:0")
    with tf.Session() as sess:
        sess.run(apply0)
        sess.run(acc.apply_grad(3.0, local_step=0))
        assert int(sess.run(num)) == 2
        assert float(sess.run(take)) == 2.0  # the mean; the global step moves to 1
        sess.run(apply0)  # stale (local step 0 < 1): dropped silently
        assert int(sess.run(num)) == 0
        sess.run(acc.apply_grad(5.0, local_step=1))
        sess.run(acc.set_global_step(5))
        sess.run(acc.apply_grad(5.0, local_step=3))  # stale again
        assert int(sess.run(num)) == 1
        with pytest.raises(errors.InvalidArgumentError,
                           match="Argument num_required must be positive, but was 0"):
            sess.run(acc.take_grad(0))
    with pytest.raises(ValueError, match=r"Shapes \(2,\) and \(\) are incompatible"):
        acc.apply_grad([1.0, 2.0])


def _input_pipeline(capacity=4, runners=2):
    q = tf.FIFOQueue(capacity, tf.float32, shapes=[64, 64], name="input")
    example = tf.ones([64, 64]) * 2.0
    enqueue = q.enqueue(tf.matmul(example, example))  # the loading work of one element
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [enqueue] * runners))
    return q, tf.reduce_sum(q.dequeue_many(2))


def test_queue_runners_fill_the_queue_while_the_training_loop_runs():
    q, loss = _input_pipeline()
    threads_before = threading.active_count()
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        assert len(threads) == 3  # two enqueue threads and the closer
        starts, sizes, traces = [], [], []
        for _ in range(4):
            assert float(sess.run(loss)) == 2 * 64 * 64 * 256.0
            starts.append(sess.last_run.start_time)
            traces.append(sess.last_trace)
            sizes.append(int(sess.run(q.size())))
        assert starts == sorted(starts) and starts[0] == 0  # one clock for the job
        assert max(sizes) == 4  # the runners filled the queue to capacity meanwhile
        coord.request_stop()
        coord.join(threads)  # the closer cancels the runners blocked on a full queue
        assert not any(t.is_alive() for t in threads)
    assert threading.active_count() == threads_before
    depth = [c.values["size"] for t in traces for c in t.counters if c.name == "queue input"]
    assert depth and max(depth) <= 4  # the queue's occupancy is a counter in the trace
    lanes = {s.pid for t in traces for s in t.spans}
    assert lanes == {"localhost:0"}


def test_an_error_in_a_runner_reaches_coord_join():
    q = tf.FIFOQueue(2, tf.float32, shapes=[2], name="q")
    bad = q.enqueue(tf.placeholder(tf.float32, [2], name="never_fed"))
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.QueueRunner(q, [bad]).create_threads(sess, coord=coord)
        with pytest.raises(errors.InvalidArgumentError, match="You must feed a value"):
            coord.join(threads)


def test_session_run_from_an_unscheduled_python_thread_is_a_clear_error():
    constant = tf.constant(1.0)
    seen = []
    with tf.Session() as sess:
        def work():
            try:
                sess.run(constant)
            except errors.InvalidArgumentError as error:
                seen.append(str(error))
        thread = threading.Thread(target=work, name="my thread")
        thread.start()
        thread.join()
    assert "Session.run from the Python thread 'my thread'" in seen[0]


def test_a_queue_shared_by_two_clients_of_a_cluster():
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"],
                                    "worker": ["localhost:2223", "localhost:2224"]})
    servers = [tf.train.Server(cluster, "ps", 0), tf.train.Server(cluster, "worker", 0),
               tf.train.Server(cluster, "worker", 1)]

    def build():
        with tf.device("/job:ps/task:0"):
            q = tf.FIFOQueue(2, tf.float32, shapes=[()], shared_name="work", name="work")
        return q

    def loader():
        graph = tf.Graph()
        with graph.as_default():
            q = build()
            value = tf.placeholder(tf.float32, [])
            enqueue, close = q.enqueue(value), q.close()
        with tf.Session(servers[2].target, graph=graph) as sess:
            for i in range(5):
                sess.run(enqueue, {value: float(i)})
            sess.run(close)

    def trainer():
        graph = tf.Graph()
        with graph.as_default():
            dequeue = build().dequeue()
        seen = []
        with tf.Session(servers[1].target, graph=graph) as sess:
            try:
                while True:
                    seen.append(float(sess.run(dequeue)))
            except errors.OutOfRangeError:
                return seen

    result = tf.simulate_clients({"trainer": trainer, "loader": loader,
                                  "ps": servers[0].join})
    assert result.returns["trainer"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    sizes = [c.values["size"] for c in result.trace.counters if c.name == "queue work"]
    assert max(sizes) <= 2 and sizes[-1] == 0


def test_queue_runner_runs_are_deterministic():
    def once():
        tf.reset_default_graph()
        _, loss = _input_pipeline(capacity=3, runners=3)
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            traces = []
            for _ in range(3):
                sess.run(loss)
                traces.append(sess.last_trace.to_chrome())
            coord.request_stop()
            coord.join(threads)
        return traces

    assert once() == once()


def test_a_failed_run_stops_its_ops_and_gives_their_threads_back():
    q = tf.FIFOQueue(3, tf.float32, shapes=[()], name="q")
    blocked = q.dequeue()  # waits on the empty queue ...
    variable = tf.Variable(np.zeros(2, np.float32), name="v")
    value = tf.placeholder(tf.float32, None)
    bad = tf.assign(variable, value)  # ... while this fails (fed the wrong shape)
    config = tf.ConfigProto(inter_op_parallelism_threads=1, use_per_session_threads=True)
    with tf.Session(config=config) as sess:
        sess.run(variable.initializer)
        with pytest.raises(errors.InvalidArgumentError, match="Assign requires shapes"):
            sess.run([blocked, bad], {value: np.zeros(3, np.float32)})
        sess.run(q.enqueue(7.0))  # the withdrawn dequeue does not take it, ...
        assert float(sess.run(q.dequeue())) == 7.0  # ... and the one thread is free again
        assert sess.last_run.start_time > 0  # the job's clock went on: nothing was reset


def test_a_timeout_inside_a_client_leaves_the_simulation_clean():
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})
    servers = [tf.train.Server(cluster, "ps", 0), tf.train.Server(cluster, "worker", 0)]
    with tf.device("/job:ps/task:0"):
        q = tf.FIFOQueue(3, tf.float32, shapes=[()], name="q")
    dequeue = q.dequeue()

    def impatient():
        config = tf.ConfigProto(operation_timeout_in_ms=2)
        with tf.Session(servers[1].target, config=config) as sess:
            try:
                sess.run(dequeue)
            except errors.DeadlineExceededError:
                return "gave up"

    result = tf.simulate_clients({"impatient": impatient, "ps": servers[0].join})
    assert result.returns["impatient"] == "gave up"
    assert result.end_time - result.start_time < 3_000_000  # nothing ran on to a deadline


def _two_clients(taker, feeder):
    """Run ``taker`` and ``feeder`` (functions of a session target) as two clients of a
    one-ps cluster, the taker first; their return values."""
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"],
                                    "worker": ["localhost:2223", "localhost:2224"]})
    servers = [tf.train.Server(cluster, "ps", 0), tf.train.Server(cluster, "worker", 0),
               tf.train.Server(cluster, "worker", 1)]
    result = tf.simulate_clients({"taker": lambda: taker(servers[1].target),
                                  "feeder": lambda: feeder(servers[2].target),
                                  "ps": servers[0].join})
    return result.returns["taker"], result.returns["feeder"]


def test_a_waiting_dequeue_many_takes_elements_as_they_come_as_in_tf():
    # real TF 2.21: the blocked DequeueMany holds what it took, so size() reads 0, and it can
    # ask for more than the capacity; closed short, it puts them back in front and fails with
    # the count still missing and the size before that ("requested 1, current size 0")
    with tf.device("/job:ps/task:0"):
        q = tf.FIFOQueue(2, tf.float32, shapes=[()], name="q")
    value = tf.placeholder(tf.float32, [])
    enqueue, size, close = q.enqueue(value), q.size(), q.close()
    take, dequeue = q.dequeue_many(3), q.dequeue()
    pause = tf.timed_py_func([], 1000)  # 1 ms: the taker's next dequeue_many is waiting

    def taker(target):
        with tf.Session(target) as sess:
            first = sess.run(take).tolist()
            with pytest.raises(errors.OutOfRangeError) as error:
                sess.run(take)
            return first, str(error.value).splitlines()[0], int(sess.run(size)), \
                float(sess.run(dequeue))

    def feeder(target):
        sizes = []
        with tf.Session(target) as sess:
            for v in (1.0, 2.0, 3.0, 7.0, 8.0):
                sess.run(pause)
                sess.run(enqueue, {value: v})
                sizes.append(int(sess.run(size)))
            sess.run(close)
        return sizes

    (first, message, size_after, head), sizes = _two_clients(taker, feeder)
    assert first == [1.0, 2.0, 3.0] and sizes == [0, 0, 0, 0, 0]
    assert message == ("FIFOQueue 'q' is closed and has insufficient elements "
                       "(requested 1, current size 0)")
    assert (size_after, head) == (2, 7.0)


def test_a_timed_out_dequeue_many_loses_what_it_took_as_in_tf():
    q = tf.FIFOQueue(8, tf.float32, shapes=[()], name="q")
    with tf.Session(config=tf.ConfigProto(operation_timeout_in_ms=5)) as sess:
        sess.run(q.enqueue(3.0))
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(q.dequeue_many(2))
        assert int(sess.run(q.size())) == 0  # real TF 2.21: size 0 after the timeout


def test_a_random_shuffle_dequeue_many_keeps_min_after_dequeue_behind_while_it_waits():
    with tf.device("/job:ps/task:0"):
        q = tf.RandomShuffleQueue(2, 1, tf.float32, shapes=[()], seed=1, name="q")
    value = tf.placeholder(tf.float32, [])
    enqueue, size, take = q.enqueue(value), q.size(), q.dequeue_many(3)

    def taker(target):
        with tf.Session(target, config=tf.ConfigProto(operation_timeout_in_ms=50)) as sess:
            with pytest.raises(errors.DeadlineExceededError):
                sess.run(take)

    def feeder(target):
        with tf.Session(target) as sess:
            sizes = []
            for v in (1.0, 2.0, 3.0):
                sess.run(enqueue, {value: v})
                sizes.append(int(sess.run(size)))
            return sizes

    assert _two_clients(taker, feeder)[1] == [1, 1, 1]  # as real TF 2.21 shows


# -- issue 27: building and running as TF 2.21 does (each message checked on TF 2.21) -----------


def test_queue_ops_under_a_ps_device_and_a_failed_build_keeps_its_name():
    with tf.device("/job:ps/task:0"):
        q = tf.FIFOQueue(10, [tf.float32, tf.int32], shapes=[[], []], name="q")
    assert q.queue_ref.op.device == "/job:ps/task:0/device:CPU:*"
    with pytest.raises(ValueError, match="^Shape \\(\\) must have rank at least 1$"):
        q.enqueue_many([1.0, [1, 2]])
    with pytest.raises(ValueError, match="^Dimensions 2 and 3 are not compatible$"):
        q.enqueue_many([[1.0, 2.0], [1, 2, 3]])
    op = q.enqueue_many([[1.0], [1]])
    assert op.name == "q_EnqueueMany_2"  # TF's name scope took q_EnqueueMany, _1
    assert [t.op.name for t in op.inputs[1:]] == ["q_EnqueueMany_2/component_0",
                                                  "q_EnqueueMany_2/component_1"]
    assert op.attrs["Tcomponents"] == [tf.float32, tf.int32]


def test_enqueue_values_are_checked_as_tf_checks_them():
    q = tf.FIFOQueue(10, [tf.float32, tf.int32], shapes=[[], []], name="q")
    named = tf.FIFOQueue(10, [tf.float32, tf.int32], shapes=[[], []], names=["a", "b"])
    with pytest.raises(TypeError, match="^Expected int32, but got 1.5 of type 'float'.$"):
        q.enqueue([1.0, 1.5])
    with pytest.raises(TypeError, match="^Expected bool, but got 1.5 of type 'float'.$"):
        tf.FIFOQueue(10, ["bool"], shapes=[[]]).enqueue(1.5)
    with pytest.raises(ValueError, match=r"^Keys in dictionary to enqueue do not match names "
                                         r"of Queue.  Dictionary: \['a', 'c'\],Queue: "
                                         r"\['a', 'b'\]$"):
        named.enqueue({"a": 1.0, "c": 2})
    with pytest.raises(ValueError, match="^You must enqueue a dictionary in a Queue with "
                                         "names$"):
        named.enqueue([1.0, 2])
    assert len(q.enqueue([1.0, 2, 3]).inputs) == 3  # the extra value is dropped, as in TF
    with pytest.raises(IndexError):
        tf.FIFOQueue(10, [tf.int32], shapes=[[]]).enqueue_many([])


def test_construction_is_checked_as_tf_checks_it():
    with pytest.raises(ValueError, match=r"^All shapes must be fully defined: "
                                         r"\[TensorShape\(\[None, 2\]\)\]$"):
        tf.FIFOQueue(10, [tf.float32], shapes=[[None, 2]])
    with pytest.raises(ValueError, match="^When providing partial shapes, a list of shapes "
                                         "must be provided.$"):
        tf.PaddingFIFOQueue(10, [tf.float32], shapes=[None])
    with pytest.raises(ValueError, match="^Attr 'component_types' of 'FIFOQueueV2' Op passed "
                                         "list of length 0 less than minimum 1.$"):
        tf.FIFOQueue(10, [])
    q = tf.FIFOQueue(10, [tf.float32, tf.int32])
    assert q.shapes == [None, None]
    assert q.name == "fifo_queue_1"  # the refused FIFOQueue(10, []) took fifo_queue, as in TF


def test_running_checks_as_tf():
    q = tf.FIFOQueue(10, [tf.float32], shapes=[[3, 3]], name="q")
    x, n = tf.placeholder(tf.float32), tf.placeholder(tf.int32)
    with tf.Session(config=tf.ConfigProto(operation_timeout_in_ms=50)) as sess:
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"^Shape mismatch in tuple component 0. Expected \[3,3\], "
                                 r"got \[3,4\]\n"):
            sess.run(q.enqueue([x]), {x: np.zeros((3, 4))})
        sess.run(q.enqueue_many([x]), {x: np.ones((3, 3, 3))})
        assert sess.run(q.dequeue_many(n), {n: [2, 7]}).shape == (2, 3, 3)  # TF: the first
        sess.run(q.close())
        sess.run(q.close(cancel_pending_enqueues=True))
