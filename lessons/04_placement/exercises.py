"""Lesson 04, Devices and placement: your exercises.

Copy this file to your workspace once (``simdist lesson start 04``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 04`` (or the
check cells of the notebook). ``tf`` is the TF module the caller passes in:
``simdist.graph`` in the simulator, ``tf.compat.v1`` on real TensorFlow.
"""


def split_devices(variable_device="/cpu:0", compute_device="/gpu:0"):
    """Exercise 1 (★): return a *device function* for ``tf.device(...)``.

    The function receives each op as it is created and returns a device string: put the
    variables (op types "VariableV2" for TF1 variables, "VarHandleOp" for resource variables)
    on ``variable_device`` and every other op on ``compute_device``.
    """
    raise NotImplementedError("exercise split_devices: return a function op -> device string")


def predict_placement():
    """Exercise 2 (★★): predict where each op of ``checks.placement_quiz`` runs.

    Read ``placement_quiz`` in lessons/04_placement/checks.py (do not run it!). It runs on a
    machine with two CPU devices and no GPU, with ``allow_soft_placement=True``. Return a dict
    {op name: full device name} for the ops "a", "b", "c", "v", "d" and "e", e.g.
    "/job:localhost/replica:0/task:0/device:CPU:0".
    """
    raise NotImplementedError("exercise predict_placement: return {op name: device}")


def ordered_sum(tf, x):
    """Exercise 3 (★): build p = reduce_sum(x) (name "p"), q = reduce_mean(x) (name "q") and
    big = matmul(x, x) (name "big"), so that ``big`` (memory-hungry) starts only after p and
    q have finished, though it does not use their values. Return (p, q, big)."""
    raise NotImplementedError("exercise ordered_sum: use tf.control_dependencies")


def gpu_plan(tf):
    """Exercise 4 (★★): plan the GPU memory of three processes on one machine.

    The machine has two GPUs. Three TensorFlow processes start on it, in this order: two
    trainers, each needing 60% of one GPU's memory, and an evaluator needing 25%. Return
    ``{"trainer0": config, "trainer1": config, "evaluator": config}``, one ``tf.ConfigProto``
    per process, with which all three start, each sees exactly one GPU, and none can ever
    take memory another one needs: every process is capped at a share that holds what it
    needs, and the caps on a GPU add up to at most all of it.
    """
    raise NotImplementedError("exercise gpu_plan: return a ConfigProto for each process")


def inter_op_threads(sessions, cores):
    """Exercise 5 (★★): predict how many ops of each run can run at once.

    One fresh Python process, on a machine with ``cores`` cores, creates local sessions one
    after another and runs each once, right after creating it. ``sessions`` is a list of
    ``(config, run_pool)`` pairs: the session's ``tf.ConfigProto`` and the
    ``RunOptions(inter_op_thread_pool=run_pool)`` of its run. Every run's graph has more
    independent ops, each on its own device, than any pool has threads.

    Return a list of ints, one per session: the most ops its run runs at once, that is the
    number of threads of the inter-op pool the run uses. Mind ``use_per_session_threads``,
    ``session_inter_op_thread_pool`` (entries with ``num_threads`` and ``global_name``) and
    what a session that sets neither gets (section 5).
    """
    raise NotImplementedError("exercise inter_op_threads: return the threads of each run's "
                              "inter-op pool")
