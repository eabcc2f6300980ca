"""Lesson 06, Queues and input pipelines: your exercises.

Copy this file to your workspace once (``simdist lesson start 06``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 06`` (or the
check cells of the notebook). ``tf`` is the TF module the caller passes in:
``simdist.graph`` in the simulator, ``tf.compat.v1`` on real TensorFlow.
"""


def choose_pipeline():
    """Exercise 1 (★★): predict, then run: the queue's capacity and the number of enqueue
    threads for a trainer that eats 3 elements a step.

    ``simdist.training.input_pipeline.loader_trainer(capacity, loader_threads, batch=3,
    steps=40)``: reads of 25 us that, one time in ten, stall for 775 us, as in section 4,
    but each step dequeues a batch of 3 instead of 2. Return ``(capacity, loader_threads)``
    with which the trainer is starved less than 5% of the time (``starved_fraction <
    0.05``), using the fewest loader threads, and with those the smallest capacity among 2,
    4, 8, 16 and 32. Work it out from section 4's batch of 2 before you run anything.
    """
    raise NotImplementedError("exercise choose_pipeline: return (capacity, loader_threads)")


def why_capacity_cannot_help():
    """Exercise 1b (★): with one loader thread fewer than exercise 1 needs, the trainer is
    starved about as much with a queue of 2 as with one of 32. Why? Return one letter:

    - ``"a"``: a queue of 32 is still too small to hold what the trainer eats in one stall;
    - ``"b"``: on average the readers bring fewer elements a second than the trainer eats,
      and a queue stores elements, it makes none;
    - ``"c"``: the enqueue threads take CPU time from the trainer;
    - ``"d"``: the elements fill the link to the queue's ps.
    """
    raise NotImplementedError("exercise why_capacity_cannot_help: return 'a', 'b', 'c' or 'd'")


def padded_batch_shape(queue_shape, element_shapes):
    """Exercise 2 (★): predict the shape of a PaddingFIFOQueue's batch.

    A ``tf.PaddingFIFOQueue(capacity, [tf.float32], shapes=[queue_shape])`` (``queue_shape``
    a tuple such as ``(None, 3)``, None for a dimension of any size) holds elements of the
    shapes ``element_shapes`` (a list of tuples). Return the shape (a tuple of ints) of the
    array that ``sess.run(queue.dequeue_many(len(element_shapes)))`` gives.
    """
    raise NotImplementedError("exercise padded_batch_shape: return a tuple of ints")


def aggregator(tf, target, prediction_queue, num_predictors, num_inputs, timeout_ms):
    """Exercise 3 (★★★): the aggregator client of an ensemble, which a slow predictor must
    not stall.

    Predictor ``k`` (another client, ``k`` in ``range(num_predictors)``) enqueues one element
    ``(input index, prediction)`` per input, in order, in the queue that
    ``prediction_queue(tf, k)`` creates in the current graph (an int32 and a float32; shared
    on the cluster under its ``shared_name``). In a graph of your own, with a session on
    ``target``, collect the predictions of each input ``i`` in ``range(num_inputs)`` and
    return a list: for each input the mean (a float) of the predictions of input ``i`` that
    came in time, None if none did. No dequeue may wait longer than ``timeout_ms``
    milliseconds: TF's ``ConfigProto(operation_timeout_in_ms=...)`` makes a run that waits
    longer raise ``tf.errors.DeadlineExceededError``. A predictor that missed the deadline of
    one input may be on time for the next one; a prediction that comes after its own input's
    deadline counts for no input.
    """
    raise NotImplementedError("exercise aggregator: collect the predictions with a timeout")


def choose_capacity():
    """Exercise 4 (★★): size a queue to the stalls it must absorb.

    One loader thread reads fast (20 us) from a remote file system that, one read in about
    33, stalls for 5 ms; the trainer's step takes 800 us and eats a batch of 2 (``loader_trainer(
    capacity, loader_threads=1, read_us=20, stall_us=5000, stall_probability=0.03,
    train_us=800, batch=2, steps=30, seed=3)``). Every element the queue holds is memory on
    ps:0: return the smallest capacity among 2, 4, 8, 16, 32 and 64 with which the trainer is
    starved less than 2% of the time. Exercise 5 runs your answer with the queue's ps, the
    trainer and the loader on MPI ranks (``pipeline_mpi.py``).
    """
    raise NotImplementedError("exercise choose_capacity: return the queue's capacity")


def predict_step_time(map_us, num_parallel_calls, batch_size, prefetch, train_us):
    """Exercise 6 (★★): predict a training step fed by ``tf.data``, once it runs steadily.

    The pipeline is ``Dataset.from_tensor_slices(...).map(decode,
    num_parallel_calls=num_parallel_calls).batch(batch_size)``, then ``.prefetch(prefetch)``
    when ``prefetch`` is at least 1 (0: no prefetch stage). One ``decode`` call takes
    ``map_us`` microseconds (``num_parallel_calls`` None: one call at a time; k: k calls at
    once). Each training step asks the iterator for its batch, then trains for ``train_us``
    microseconds. Return how long one step takes, in microseconds, once the pipeline runs
    steadily (not the first step). The step's own small ops add a few microseconds: the
    check accepts 5% (or 10 us) either way.
    """
    raise NotImplementedError("exercise predict_step_time: return the steady step time in us")
