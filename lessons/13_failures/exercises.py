"""Lesson 13, Failures and recovery: your exercises.

Copy this file to your workspace once (``simdist lesson start 13``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 13`` (or the
check cells of the notebook).
"""


def which_failures_restore():
    """Exercise 1 (★): each task below fails and comes back. Which of these failures make
    the job restore its last checkpoint (the global step, or the epoch, goes back)?

    - "a": worker:1 of a TF1 between-graph job (``MonitoredTrainingSession``, checkpoints in
      ``checkpoint_dir``);
    - "b": ps:0 of that TF1 job;
    - "c": the chief (worker:0) of that TF1 job;
    - "d": worker:1 of a ParameterServerStrategy job (a ``ClusterCoordinator``, a checkpoint
      after every epoch);
    - "e": ps:0 of that ParameterServerStrategy job;
    - "f": the coordinator (chief) of that ParameterServerStrategy job.

    Return the set of letters, e.g. ``{"a", "d"}``.
    """
    raise NotImplementedError("exercise which_failures_restore: return a set of letters")


def why_the_chief_restores():
    """Exercise 2 (★): in a TF1 job the chief (worker:0) fails and comes back; no ps failed.
    Why does the global step go back to the last checkpoint?

    - "a": a chief's session always restores the latest checkpoint when there is one;
    - "b": the chief's failure wiped the ps's variables;
    - "c": the global step lived on the chief and died with it;
    - "d": the other workers ask the restarted chief to restore.

    Return the letter, e.g. ``"b"``.
    """
    raise NotImplementedError("exercise why_the_chief_restores: return a letter")


def predict_chief_restart():
    """Exercise 3 (★★): three synchronous workers train to global step 12, the chief saving
    a checkpoint every 4 steps (``train_on_ps(workers=3, mode="sync", steps=12,
    save_checkpoint_steps=4, checkpoint_dir=...)``, the first checkpoint at step 0). The
    chief, worker:0, fails 9 ms into the run, when the global step is 6, and is back 2 ms
    later (``failures=["worker:0@9ms+2ms"]``); no ps fails. Which checkpoint's step does
    the job go on from, and how many steps are redone? Return the pair of ints
    ``(restored_step, steps_redone)``; ``(6, 0)`` means nothing went back.
    """
    raise NotImplementedError("exercise predict_chief_restart: return (restored_step, "
                              "steps_redone)")


def predict_restart_epoch():
    """Exercise 4 (★★★): ParameterServerStrategy, 2 workers and 1 ps, 24 steps in epochs of
    4 steps (``Exercise(strategy="parameter_server", workers=2, steps=24,
    global_batch=256)``: 1024 examples, 256 per step), one step function per step. The
    coordinator schedules an epoch's 4 functions, joins, then saves a checkpoint (reading
    every variable, ``iterations`` too, from the ps) while it schedules the next epoch.
    An epoch takes 0.4886 ms: epoch 3 ends at 1.954 ms, and its checkpoint's save, begun
    then, is complete at 1.976 ms. ps:0 fails at 1.96 ms and is back 0.2 ms later
    (``failures=("ps:0@1960us+200us",)``). The coordinator restores the last complete
    checkpoint and starts again at epoch ``iterations // 4``. At which epoch, and how many
    step functions does it schedule in all (every ``schedule`` call, the cancelled ones
    too)? Return the pair of ints ``(starting_epoch, functions_scheduled)``. Exercise 5
    checks it with the tasks on MPI ranks (``restart_mpi.py``).
    """
    raise NotImplementedError("exercise predict_restart_epoch: return (starting_epoch, "
                              "functions_scheduled)")
