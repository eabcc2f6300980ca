"""Lesson 12, Evaluation while training: your exercises.

Copy this file to your workspace once (``simdist lesson start 12``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 12`` (or the
check cells of the notebook).
"""


def predict_eval_visits():
    """Exercise 1 (★★★): the run of section 3 (``Exercise(strategy="parameter_server",
    workers=2, steps=20)``, then 256 evaluation examples in 8 batches of 32, "distributed"
    style), but worker:1 fails at 2430 us instead of 2400 us
    (``failures=("worker:1@2430us+100us",)``): 44 us into eval_step#22, after that
    function's metric update has reached the ps (at 2425 us), before its reply came back.
    It is back 100 us later. How many evaluation examples are counted twice, and how many
    never? Return the pair of ints ``(counted_twice, never_counted)``.
    """
    raise NotImplementedError("exercise predict_eval_visits: return (counted_twice, "
                              "never_counted)")


def choose_exactly_once():
    """Exercise 2 (★★): the same failure as exercise 1. Choose the evaluation style (one of
    "inline", "distributed", "exactly_once", "sidecar") that counts every example exactly
    once while the workers do the evaluating, and its number of shards
    (tf_keras's ``pss_evaluation_shards``, which Keras 3 lacks: at least one per worker, at
    most one per batch). Then
    predict how many evaluation function runs the trace shows with your choice. Return
    ``(style, shards, runs)``.
    """
    raise NotImplementedError("exercise choose_exactly_once: return (style, shards, runs)")


def predict_sidecar():
    """Exercise 3 (★★): ``Exercise(strategy="parameter_server", workers=2, steps=40,
    global_batch=256)`` saves a checkpoint after every epoch of 4 steps: ckpt-0's save
    begins at 0.4885 ms, then one every 0.4885 ms (ckpt-9's at 4.886 ms), and a checkpoint
    is visible to the evaluator 32 us after its save begins (the save reads the variables
    from the ps; the directory's ``checkpoint`` file is written last). A side-car evaluator
    looks for the latest visible checkpoint every 0.7 ms from time 0 (``poll_ns=700_000``);
    evaluating one takes it 16 us. Return the names of the checkpoints it evaluates (a list
    such as ``["ckpt-0", ...]``); the others it skips.
    """
    raise NotImplementedError("exercise predict_sidecar: return a list of checkpoint names")
