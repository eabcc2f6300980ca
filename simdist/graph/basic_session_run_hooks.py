"""Models TF's basic session run hooks: ``StopAtStepHook`` (stop at a global step)."""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError
from simdist.graph.optimizers import get_global_step
from simdist.graph.session_run_hook import SessionRunArgs, SessionRunHook


class StopAtStepHook(SessionRunHook):
    """tf.compat.v1.train.StopAtStepHook(num_steps=None, last_step=None): request a stop once
    the global step reaches ``last_step`` (or ``num_steps`` past where it was when the
    session was created)."""

    def __init__(self, num_steps=None, last_step=None):
        if (num_steps is None) == (last_step is None):
            raise ValueError("One of num_steps or last_step must be specified.")
        for label, value in (("num_steps", num_steps), ("last_step", last_step)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise InvalidArgumentError(f"StopAtStepHook: {label}={value!r}, expected an "
                                           "int >= 0")
        self._num_steps, self._last_step = num_steps, last_step

    def begin(self):
        self._global_step = get_global_step()
        if self._global_step is None:
            raise RuntimeError("Global step should be created to use StopAtStepHook.")

    def after_create_session(self, session, coord):
        if self._last_step is None:
            self._last_step = int(session.run(self._global_step)) + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        # as TF: the step read before this run, plus this run's own increment, then a fresh
        # read to be sure (with SyncReplicasOptimizer the chief moves the step, not the run)
        if int(run_values.results) + 1 >= self._last_step:
            if int(run_context.session.run(self._global_step)) >= self._last_step:
                run_context.request_stop()


class CheckpointSaverHook(SessionRunHook):
    """tf.compat.v1.train.CheckpointSaverHook(checkpoint_dir, save_secs=None, save_steps=None,
    saver=None, checkpoint_basename="model.ckpt"): save when the session is created, every
    ``save_steps`` global steps or ``save_secs`` seconds of simulated time, and at the end."""

    def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None,
                 checkpoint_basename="model.ckpt"):
        if (save_secs is None) == (save_steps is None):
            raise ValueError("exactly one of every_n_secs and every_n_steps should be provided.")
        for label, value in (("save_secs", save_secs), ("save_steps", save_steps)):
            if value is not None and (isinstance(value, bool) or not isinstance(
                    value, (int, float)) or value <= 0):
                raise InvalidArgumentError(f"CheckpointSaverHook: {label}={value!r}, expected "
                                           "a number > 0")
        self._dir, self._secs, self._steps = checkpoint_dir, save_secs, save_steps
        self._saver, self._basename = saver, checkpoint_basename
        self.saved: list = []  # the checkpoints this hook wrote (prefixes)

    def begin(self):
        from simdist.graph.saver import Saver

        self._global_step = get_global_step()
        if self._global_step is None:
            raise RuntimeError("Global step should be created to use CheckpointSaverHook.")
        if self._saver is None:
            self._saver = Saver()

    def after_create_session(self, session, coord):
        self._save(session, int(session.run(self._global_step)))

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        session = run_context.session
        step = int(session.run(self._global_step))
        due = (step >= self._last_step + self._steps if self._steps is not None else
               session.world().env.now - self._last_time >= self._secs * 1e9)
        if due:
            self._save(session, step)

    def end(self, session):
        step = int(session.run(self._global_step))
        if step != self._last_step:
            self._save(session, step)

    def _save(self, session, step):
        import os

        os.makedirs(self._dir, exist_ok=True)
        self.saved.append(self._saver.save(session, os.path.join(self._dir, self._basename),
                                           global_step=step))
        self._last_step, self._last_time = step, session.world().env.now
