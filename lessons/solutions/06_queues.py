"""Lesson 06, Queues and input pipelines: reference solutions."""


def choose_pipeline():
    """(capacity, loader_threads) for checks.PIPELINE: a batch of 3 asks for 1.5 times the
    reads of section 4's batch of 2, which took 3 threads: 4.5, so 5. Four starve the trainer
    about 15% whatever the capacity (they do not keep up on average); with five, a queue of
    4 still runs dry in a stall (5.4%), one of 8 carries the trainer through (4.0%)."""
    return 8, 5


def why_capacity_cannot_help():
    """Too few readers fall behind on average: the queue empties and stays empty, whatever
    its size; capacity only absorbs a stall once the readers keep up."""
    return "b"


def padded_batch_shape(queue_shape, element_shapes):
    """The batch size, then each dimension: a known one as is, a None one padded to the
    largest size among the elements."""
    return (len(element_shapes),) + tuple(
        max(shape[d] for shape in element_shapes) if size is None else size
        for d, size in enumerate(queue_shape))


def aggregator(tf, target, prediction_queue, num_predictors, num_inputs, timeout_ms):
    """For each input, ask every predictor for its prediction, waiting at most
    ``timeout_ms``: a dequeue that times out leaves that predictor out of this input (and it
    is asked again for the next one); a prediction of an earlier input, which came too late
    for it, is stale: drop it and dequeue again, the in-time one may sit right behind it."""
    graph = tf.Graph()
    with graph.as_default():
        dequeues = [prediction_queue(tf, k).dequeue() for k in range(num_predictors)]
    config = tf.ConfigProto(operation_timeout_in_ms=timeout_ms)
    means = []
    with tf.Session(target, graph=graph, config=config) as sess:
        for i in range(num_inputs):
            predictions = []
            for k in range(num_predictors):
                try:
                    index, value = sess.run(dequeues[k])
                    while int(index) < i:  # stale: it belongs to an earlier input
                        index, value = sess.run(dequeues[k])
                except tf.errors.DeadlineExceededError:
                    continue
                predictions.append(float(value))
            means.append(sum(predictions) / len(predictions) if predictions else None)
    return means


def choose_capacity():
    """The loader keeps up on average (a read and its enqueue take far less than the
    trainer's 400 us per element), so only a stall reaches the trainer: for 5 ms the one
    reader brings nothing while the trainer eats 2 elements a step of a little over 0.8 ms,
    about 6 steps or 12 elements. A queue of 8 runs dry during a stall (4.0% starved), one of
    16 carries the trainer through (0.3%)."""
    return 16


def predict_step_time(map_us, num_parallel_calls, batch_size, prefetch, train_us):
    """A batch takes batch_size map calls, num_parallel_calls of them at once; without
    prefetch the step waits for its batch, then trains (the sum); with prefetch the next
    batch is made while this step trains (the longer of the two)."""
    batch_us = batch_size * map_us / (num_parallel_calls or 1)
    return max(train_us, batch_us) if prefetch else train_us + batch_us
