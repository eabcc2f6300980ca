"""Notices that every rank learns at the same instant: the end of the window they were
posted in.

A task's program posts a notice (``ctx.post("training ended")``: the coordinator's job is
over); the scheduler gathers each window's notices from every rank with its window report
(``scheduler.WindowReport.notices``) and, on every rank, runs the callbacks subscribed to
them (``ctx.on_notice(key, fn)``) before the next window starts. In one process it happens
at the same point, so a run stays identical at any rank count. It models nothing of TF: it
is how the ranks learn that the job is over, which in a real job is the launcher ending
every process, not a message between them.
"""

from __future__ import annotations


class Bulletin:
    """This rank's notices: those its tasks posted in the current window, and who listens."""

    def __init__(self):
        self._posted: list[str] = []
        self._subscribers: dict = {}  # key -> callbacks, in the order they subscribed
        #: the end of the window running now: a notice posted in it takes effect there, so
        #: events before it still happen on every rank
        self.window_end = 0

    def post(self, key: str) -> None:
        self._posted.append(key)

    def subscribe(self, key: str, callback) -> None:
        self._subscribers.setdefault(key, []).append(callback)

    def take(self) -> list[str]:
        """The notices posted since the last window's report (for this one)."""
        posted, self._posted = self._posted, []
        return posted

    def deliver(self, keys) -> None:
        """Run the callbacks of ``keys`` (every rank's notices of a window, in rank order)."""
        for key in keys:
            for callback in self._subscribers.get(key, ()):
                callback()
