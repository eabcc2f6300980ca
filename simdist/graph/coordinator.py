"""Models tf.train.Coordinator: threads that stop together, and the errors they hit.

Threads here are simulated ones (clients of a session's world, e.g. the threads of a
``QueueRunner``): ``should_stop`` is a plain check, while ``wait_for_stop`` and ``join`` wait
in simulated time. ``join`` gives the threads ``stop_grace_period_secs`` of simulated time
after a stop was requested, then raises TF's RuntimeError naming the ones still running;
an exception passed to ``request_stop`` is raised again by ``join``, as TF does.
"""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError, OutOfRangeError
from simdist.graph._sim.clients import current_client


class Coordinator:
    """tf.train.Coordinator(clean_stop_exception_types=None)."""

    def __init__(self, clean_stop_exception_types=None):
        self._clean = tuple(clean_stop_exception_types if clean_stop_exception_types
                            is not None else (OutOfRangeError,))
        self._stop = False
        self._exception = None
        self._threads: list = []
        self._stop_events: dict = {}  # world -> the event of the stop, in that world
        self.joined = False

    # -- stopping --------------------------------------------------------------------------

    def should_stop(self) -> bool:
        return self._stop

    def request_stop(self, ex=None):
        """Ask every thread to stop; ``ex`` (an exception, not a clean-stop one) given with
        the first request is raised again by ``join`` (later ones are dropped, as TF does);
        after ``join`` it is raised at once."""
        if isinstance(ex, self._clean):
            ex = None
        if self.joined and ex is not None:
            raise ex
        if not self._stop and ex is not None and self._exception is None:
            self._exception = ex
        if not self._stop:
            self._stop = True
            for event in self._stop_events.values():
                event.succeed()

    def clear_stop(self):
        self._stop, self._exception, self.joined = False, None, False
        self._stop_events.clear()

    def requested_exception(self):
        """The exception a stop was requested with, or None (simdist: TF keeps it private)."""
        return self._exception

    def raise_requested_exception(self):
        if self._exception is not None:
            raise self._exception

    def stop_event(self, world):
        """The event of the stop in ``world`` (already happened once stopped)."""
        if self._stop:
            return world.env.succeeded(desc="coordinator stop")
        if world not in self._stop_events:
            self._stop_events[world] = world.env.event(desc="coordinator stop")
        return self._stop_events[world]

    def wait_for_stop(self, timeout=None) -> bool:
        """Wait (in simulated time) until a stop is requested, or ``timeout`` seconds."""
        if self._stop:
            return True
        world = self._world()
        events = [self.stop_event(world)]
        if timeout is not None:
            events.append(world.env.timeout(_ns(timeout)))
        world.wait(world.env.any_of(events))
        if timeout is not None:
            events[1].cancel()
        return self._stop

    # -- threads ---------------------------------------------------------------------------

    def register_thread(self, thread):
        self._threads.append(thread)

    def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False):
        """Wait until ``threads`` (all registered ones when None) have ended; after a stop
        they get ``stop_grace_period_secs`` of simulated time."""
        threads = list(self._threads if threads is None else threads)
        self._threads = [t for t in self._threads if t not in threads]
        if threads:
            world = threads[0].world
            env = world.env
            ends = env.all_of([t.proc for t in threads])
            if not self._stop:
                world.wait(env.any_of([ends, self.stop_event(world)]))
            if not ends.triggered:
                grace = env.timeout(_ns(stop_grace_period_secs))
                world.wait(env.any_of([ends, grace]))
                grace.cancel()
            alive = [t.name for t in threads if t.is_alive()]
            if alive and not ignore_live_threads:
                self.joined = True
                raise RuntimeError(f"Coordinator stopped with threads still running: "
                                   f"{' '.join(alive)}")
        self.joined = True
        self.raise_requested_exception()

    def _world(self):
        client = current_client()
        if client is not None:
            return client.world
        for thread in self._threads:
            return thread.world
        raise InvalidArgumentError("wait_for_stop() outside any simulated thread and with no "
                                   "thread registered: nothing could ever request the stop")


def _ns(seconds) -> int:
    return int(round(float(seconds) * 1e9))
