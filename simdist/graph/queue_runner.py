"""Models tf.train.QueueRunner: threads that run enqueue ops again and again.

``create_threads(sess, coord)`` starts one simulated thread per enqueue op in the session's
world (see ``world.py``): each runs ``sess.run(enqueue_op)`` until its queue is closed or the
coordinator asks it to stop; the last one to end closes the queue. With a coordinator, one
more thread waits for the stop and then closes the queue with ``cancel_pending_enqueues``,
so that an enqueue blocked on a full queue ends too. The threads advance whenever the
world's simulated time does: during the training loop's own ``Session.run`` calls, and in
``coord.join``.
"""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError, OutOfRangeError
from simdist.graph.graph import get_collection, get_default_graph

QUEUE_RUNNERS = "queue_runners"


class QueueRunner:
    """tf.train.QueueRunner(queue, enqueue_ops, close_op=None, cancel_op=None,
    queue_closed_exception_types=None)."""

    def __init__(self, queue=None, enqueue_ops=None, close_op=None, cancel_op=None,
                 queue_closed_exception_types=None):
        if queue is None or not enqueue_ops:
            raise InvalidArgumentError("QueueRunner needs a queue and a list of enqueue ops, "
                                       f"got queue={queue!r}, enqueue_ops={enqueue_ops!r}")
        self.queue, self.enqueue_ops = queue, list(enqueue_ops)
        self.close_op = close_op if close_op is not None else queue.close()
        self.cancel_op = cancel_op if cancel_op is not None else \
            queue.close(cancel_pending_enqueues=True)
        self.queue_closed_exception_types = tuple(queue_closed_exception_types or
                                                  (OutOfRangeError,))
        self.exceptions_raised: list = []
        self._running: dict = {}

    @property
    def name(self) -> str:
        return self.queue.name

    def create_threads(self, sess, coord=None, daemon=False, start=False) -> list:
        """One thread per enqueue op (plus the closer, with ``coord``); simdist's threads
        always start (``start`` is accepted for TF's signature). ``daemon`` threads may be
        left waiting when the program ends, as Python's daemon threads are."""
        world = sess.world()
        self._running[sess] = len(self.enqueue_ops)
        threads = [world.start_client(f"{self.name}/QueueRunner {i}",
                                      lambda op=op: self._run(sess, op, coord), daemon,
                                      sess.default_task, thread=True)
                   for i, op in enumerate(self.enqueue_ops)]
        if coord is not None:
            threads.append(world.start_client(f"{self.name}/close_on_stop",
                                              lambda: self._close_on_stop(sess, coord),
                                              daemon, sess.default_task, thread=True))
            for thread in threads:
                coord.register_thread(thread)
        return threads

    def _run(self, sess, enqueue_op, coord):
        try:
            while not (coord and coord.should_stop()):
                try:
                    sess.run(enqueue_op)
                except self.queue_closed_exception_types:
                    self._running[sess] -= 1
                    if self._running[sess] == 0:
                        try:
                            sess.run(self.close_op)
                        except Exception:  # noqa: BLE001 (as TF: e.g. closed already)
                            pass
                    return
        except Exception as error:  # noqa: BLE001 (TF hands every error to the coordinator)
            self.exceptions_raised.append(error)
            if coord is None:
                raise
            coord.request_stop(error)
        self._running[sess] -= 1

    def _close_on_stop(self, sess, coord):
        coord.wait_for_stop()
        try:
            sess.run(self.cancel_op)
        except Exception:  # noqa: BLE001 (as TF: the queue may be gone already)
            pass


def add_queue_runner(qr, collection=QUEUE_RUNNERS):
    get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess=None, coord=None, daemon=True, start=True,
                        collection=QUEUE_RUNNERS) -> list:
    """Start the threads of every QueueRunner in ``collection`` of the session's graph."""
    from simdist.graph.session import get_default_session

    sess = sess or get_default_session()
    with sess.graph.as_default():
        runners = get_collection(collection)
    return [t for qr in runners for t in qr.create_threads(sess, coord, daemon, start)]
