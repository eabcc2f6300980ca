"""Models tf.compat.v1.train.SessionRunHook and the objects a hook sees around each run.

A hook of a ``MonitoredSession`` is called at ``begin`` (the graph can still change),
``after_create_session``, ``before_run`` (it may ask for more fetches with
``SessionRunArgs``), ``after_run`` (it sees their values and may ``request_stop``) and
``end``; TF's ``session_run_hook.py`` defines the same five calls and three objects.
"""

from __future__ import annotations

from typing import NamedTuple


class SessionRunHook:
    """tf.compat.v1.train.SessionRunHook: every call does nothing until overridden."""

    def begin(self):
        pass

    def after_create_session(self, session, coord):
        pass

    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass

    def end(self, session):
        pass


class SessionRunArgs(NamedTuple):
    """What a hook adds to a run: fetches (any structure ``Session.run`` takes), feeds."""

    fetches: object
    feed_dict: dict | None = None
    options: object = None


class SessionRunValues(NamedTuple):
    """What a hook gets back: the values of the fetches it asked for."""

    results: object
    options: object = None
    run_metadata: object = None


class SessionRunContext:
    """The run being made: the caller's fetches and feeds, the raw session, and a way for a
    hook to stop the loop (``request_stop``: ``should_stop()`` becomes True after it)."""

    def __init__(self, original_args: SessionRunArgs, session):
        self.original_args, self.session = original_args, session
        self._stop_requested = False

    def request_stop(self):
        self._stop_requested = True

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested
