"""Models tf.compat.v1.train.MonitoredTrainingSession: a session that runs hooks, and that
the chief initializes while the other workers wait for it.

As TF's ``MonitoredSession`` and ``SessionManager`` do it:

- on creation every hook's ``begin`` runs, then the graph is finalized;
- the chief creates its session, runs the variables' initializer, then the local
  initializer (``local_variables_initializer``: each client's own variables, such as
  SyncReplicasOptimizer's local step), and checks that every variable is initialized;
- a non-chief worker creates a session, and while the chief has not initialized every
  global variable yet it closes it, sleeps ``recovery_wait_secs`` (TF's default: 30 s of
  simulated time here) and tries again, for at most ``max_wait_secs``; the trace shows that
  wait on the worker's "session" lane;
- then every hook's ``after_create_session`` runs (SyncReplicasOptimizer's hook starts the
  chief's queue runner here), and each ``run`` calls ``before_run`` / ``after_run``, any of
  which may stop the loop (``should_stop()``);
- leaving the ``with`` block runs every hook's ``end``, asks the coordinator to stop and
  gives the threads ``stop_grace_period_secs`` to end before going on without them, as TF
  does (a SyncReplicasOptimizer chief whose queue runner waits for gradients that will
  never come therefore waits the whole grace period: 120 s by default).

With ``checkpoint_dir`` the chief restores the latest checkpoint there instead of
initializing (TF's SessionManager), and saves one when the session is created, every
``save_checkpoint_steps`` global steps or ``save_checkpoint_secs`` simulated seconds (600 by
default) and at the end (``CheckpointSaverHook``). Not simulated yet: summaries, scaffolds,
and the recreation of a session after a task fails.
"""

from __future__ import annotations

from simdist.base.errors import (AbortedError, DeadlineExceededError, InvalidArgumentError,
                                 OutOfRangeError, UnavailableError, stricter_than_tf)
from simdist.graph.basic_session_run_hooks import CheckpointSaverHook
from simdist.graph.coordinator import Coordinator
from simdist.graph.graph import get_default_graph
from simdist.graph.saver import Saver, latest_checkpoint
from simdist.graph.server import connect
from simdist.graph.session import Session
from simdist.graph.session_run_hook import SessionRunArgs, SessionRunContext, SessionRunValues
from simdist.graph.variables import (global_variables, global_variables_initializer,
                                     is_variable_initialized, local_variables,
                                     local_variables_initializer)


#: the errors after which TF's MonitoredSession makes a new session and goes on
PREEMPTION_ERRORS = (AbortedError, UnavailableError)


class MonitoredSession:
    """A session with hooks (what ``MonitoredTrainingSession`` returns). Like TF's, it is
    recoverable: when a run (or a queue runner thread) fails with ``AbortedError`` or
    ``UnavailableError`` (a task failed), it closes the session, makes a new one as at the
    start (the chief restores the latest checkpoint or initializes, the others wait until
    the model is ready; a try that fails is retried after ``recovery_wait_secs``), calls
    the hooks' ``after_create_session`` again, and runs the call again."""

    def __init__(self, master, is_chief, hooks, config, stop_grace_period_secs,
                 max_wait_secs, recovery_wait_secs, checkpoint_dir=None, saver=None):
        graph = get_default_graph()
        self.graph, self._hooks = graph, list(hooks)
        self._master, self._is_chief, self._config = master, is_chief, config
        self._stop_grace_period_secs = stop_grace_period_secs
        self._max_wait_secs, self._recovery_wait_secs = max_wait_secs, recovery_wait_secs
        self._checkpoint_dir, self._saver = checkpoint_dir, saver
        _check_one_chief(master, is_chief)
        for hook in self._hooks:
            hook.begin()
        self._init_op = global_variables_initializer()
        self._local_init_op = local_variables_initializer()
        self._global_ready = [is_variable_initialized(v) for v in global_variables()]
        self._all_ready = self._global_ready + [is_variable_initialized(v)
                                                for v in local_variables()]
        graph.finalize()
        self.restored_from = None
        self.recoveries = 0  # how many times a task's failure made a new session
        self._stop = False
        self._sess = self.coord = None
        self._create_session()

    def _create_session(self):
        """Make the session (retrying after a task's failure), then run the hooks'
        ``after_create_session`` with a new coordinator."""
        waited = 0.0
        while True:
            sess = Session(self._master, graph=self.graph, config=self._config)
            try:
                _wait_for_failed_tasks(sess)
                if self._is_chief:
                    self._prepare(sess)
                else:
                    self._wait_until_ready(sess, waited)
                self._sess, self.coord = sess, Coordinator()
                for hook in self._hooks:
                    hook.after_create_session(sess, self.coord)
                return
            except PREEMPTION_ERRORS:
                _close_quietly(sess)
                if waited + self._recovery_wait_secs > self._max_wait_secs:
                    raise
                world = sess.world()
                world.wait(world.env.timeout(int(round(self._recovery_wait_secs * 1e9))))
                waited += self._recovery_wait_secs

    def _prepare(self, sess):
        """TF's SessionManager.prepare_session: restore the latest checkpoint, else
        initialize; then the local initializer."""
        restore_from = latest_checkpoint(self._checkpoint_dir) if self._checkpoint_dir \
            else None
        if restore_from is not None:
            self._saver.restore(sess, restore_from)
            self.restored_from = restore_from
        else:
            sess.run(self._init_op)
        sess.run(self._local_init_op)
        if not all(sess.run(self._all_ready)):
            raise RuntimeError("Init operations did not make model ready: some variables "
                               "are still uninitialized")

    def _wait_until_ready(self, sess, waited):
        """TF's SessionManager.wait_for_session: retry until the chief has initialized."""
        world = sess.world()
        began = world.env.now
        while True:
            if all(sess.run(self._global_ready)):
                sess.run(self._local_init_op)
                if all(sess.run(self._all_ready)):
                    if world.env.now > began:
                        world.tasks.contexts[sess.default_task].span(
                            "session", "wait_for_session", "wait", began,
                            world.env.now - began, reason="the chief had not initialized "
                            "the variables yet")
                    return
            if waited + self._recovery_wait_secs > self._max_wait_secs:
                raise DeadlineExceededError(f"Session was not ready after waiting "
                                            f"{self._max_wait_secs} secs.")
            world.wait(world.env.timeout(int(round(self._recovery_wait_secs * 1e9))))
            waited += self._recovery_wait_secs

    def _recover(self):
        """A task failed: drop this session (its threads get the grace period) and make a
        new one."""
        self.recoveries += 1
        self._close_session()
        self._create_session()

    # -- TF's API ----------------------------------------------------------------------------

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Run ``fetches`` with every hook's ``before_run`` fetches; returns the caller's."""
        while True:
            try:
                return self._run_once(fetches, feed_dict, options, run_metadata)
            except PREEMPTION_ERRORS:
                self._recover()

    def _run_once(self, fetches, feed_dict, options, run_metadata):
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict), self._sess)
        asked = [hook.before_run(context) for hook in self._hooks]
        feeds = dict(feed_dict or {})
        for args in asked:
            if args is not None and args.feed_dict:
                clash = set(feeds) & set(args.feed_dict)
                if clash:
                    raise RuntimeError(f"Same tensor is fed by a SessionRunHook and user: "
                                       f"{sorted(t.name for t in clash)}")
                feeds.update(args.feed_dict)
        extra = {k: args.fetches for k, args in enumerate(asked) if args is not None}
        results, extra_values = self._sess.run([fetches, extra], feeds, options, run_metadata)
        for k, hook in enumerate(self._hooks):
            hook.after_run(context, SessionRunValues(extra_values.get(k)))
        self._stop = self._stop or context.stop_requested
        return results

    def should_stop(self) -> bool:
        """True once a hook asked to stop or the coordinator stopped; a thread's
        ``AbortedError`` / ``UnavailableError`` makes a new session instead (as TF)."""
        if self._stop:
            return True
        if isinstance(self.coord.requested_exception(), PREEMPTION_ERRORS):
            self._recover()
            return False
        return self.coord.should_stop()

    @property
    def last_run(self):
        return self._sess.last_run

    def run_step_fn(self, step_fn):
        raise InvalidArgumentError("MonitoredSession.run_step_fn is not simulated by simdist")

    def _close_session(self):
        self.coord.request_stop()
        try:
            self.coord.join(stop_grace_period_secs=self._stop_grace_period_secs,
                            ignore_live_threads=True)
        except PREEMPTION_ERRORS:
            pass  # the failure that brought us here
        _close_quietly(self._sess)

    def close(self, _exception=None):
        if self._sess.closed:
            return
        try:
            if _exception is None:
                for hook in self._hooks:
                    hook.end(self._sess)
        finally:
            self.coord.request_stop()
            self.coord.join(stop_grace_period_secs=self._stop_grace_period_secs,
                            ignore_live_threads=True)
            self._sess.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and issubclass(exc_type, (OutOfRangeError, StopIteration)):
            exc_type = exc = None  # as TF: the end of the input ends the loop quietly
        self.close(exc)
        return exc_type is None


def MonitoredTrainingSession(master="", is_chief=True, checkpoint_dir=None, scaffold=None,
                             hooks=None, chief_only_hooks=None, save_checkpoint_secs=None,
                             save_summaries_steps=None, save_summaries_secs=None,
                             config=None, stop_grace_period_secs=120, log_step_count_steps=100,
                             max_wait_secs=7200, save_checkpoint_steps=None,
                             summary_dir=None, recovery_wait_secs=30):
    """tf.compat.v1.train.MonitoredTrainingSession (see the module docstring);
    ``recovery_wait_secs`` is the SessionManager's (30 s in TF, not an argument there)."""
    if scaffold is not None:
        raise InvalidArgumentError("MonitoredTrainingSession: scaffold is not simulated by "
                                   "simdist; leave it None")
    for label, value in (("stop_grace_period_secs", stop_grace_period_secs),
                         ("max_wait_secs", max_wait_secs),
                         ("recovery_wait_secs", recovery_wait_secs)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise InvalidArgumentError(f"MonitoredTrainingSession: {label}={value!r}, "
                                       "expected a number of seconds >= 0")
    all_hooks = list(hooks or []) + (list(chief_only_hooks or []) if is_chief else [])
    saver = None
    if checkpoint_dir is not None:
        saver = Saver()  # TF's Scaffold: a sharded saver of every global variable
        if is_chief:
            secs = save_checkpoint_secs if save_checkpoint_steps is None else None
            if secs is None and save_checkpoint_steps is None:
                secs = 600  # TF's default when neither is given
            all_hooks.append(CheckpointSaverHook(checkpoint_dir, save_secs=secs,
                                                 save_steps=save_checkpoint_steps,
                                                 saver=saver))
    return MonitoredSession(master, is_chief, all_hooks, config, stop_grace_period_secs,
                            max_wait_secs, recovery_wait_secs, checkpoint_dir, saver)


def _wait_for_failed_tasks(sess):
    """Making a session waits while a task of the cluster is down (TF 2.21's master keeps
    trying to reach it; probed with a killed ps): a span on the session's lane."""
    world = sess.world()
    for task, runtime in sorted(sess.runtimes.items()):
        if runtime.down:
            began = world.env.now
            world.wait(world.task_back(task))
            world.tasks.contexts[sess.default_task].span(
                "session", f"wait for {task}", "wait", began, world.env.now - began,
                reason=f"{task} is down: the new session waits until it is back")


def _check_one_chief(master, is_chief):
    """In a cluster with a "chief" job, chief:0 is the chief: a worker that also says
    is_chief=True would initialize the variables again and, with SyncReplicasOptimizer, run
    a second queue runner taking gradients and handing out tokens."""
    if not is_chief or not master:
        return
    server, _, _ = connect(master)
    if "chief" in server.cluster.jobs and server.job_name != "chief":
        raise InvalidArgumentError(
            f"MonitoredTrainingSession: is_chief=True on {server.job_name}:{server.task_index}, "
            "but this cluster has a chief job, so chief:0 is the chief; pass is_chief=False "
            "here" + stricter_than_tf("two chiefs would both initialize the variables and "
                                      "both run the chief's queue runners"))


def _close_quietly(sess):
    """Close a session that a preemption ended: TF's _RecoverableSession logs and ignores
    the AbortedError a session closed by Session.reset gives on close."""
    try:
        sess.close()
    except PREEMPTION_ERRORS:
        pass
