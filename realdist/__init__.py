"""realdist: the DistLab exercises on real TensorFlow (logical CPUs, localhost clusters, GPUs).

``run_exercise(exercise)`` trains a ``simdist.training.exercises.Exercise`` with a real
tf.distribute strategy and returns the same ``RunResult`` as
``simdist.training.simulate_exercise``: the same initial weights, batches and SGD math, so the
final weights agree within float32 round-off. It records the same trace schema as simdist
(``simdist.trace.schema``). TensorFlow is imported only when a run starts, never at simdist's
(or this package's) import time.

Its packages, bottom up, each importing those below it: ``runtime`` (TensorFlow, devices,
child processes, the localhost cluster in its private network), ``graph`` (TF1 snippets and
queue facts), ``training`` (loops and programs), ``distribute`` (the runners the strategy
records name), ``calibration`` (measured step times); ``cli`` and ``commands`` on top (the
``realdist`` command). This module may import the runners (by the dotted name a strategy
record gives) and simdist's registry; nothing at import time.
"""


def run_exercise(exercise, timeout: float = 300, on_step=None, **options):
    """Run ``exercise`` on real TF and return its ``RunResult``.

    The runner is the one its strategy record names (``simdist.distribute.registry``):
    default, one_device, mirrored and central_storage run in this process (its logical CPU
    devices are set up first, see ``realdist.runtime.devices``); multi_worker_mirrored runs one
    local process per worker. ``on_step(k, loss, step_ns)`` is called after every step; a run
    that passes ``timeout`` seconds ends with DeadlineExceededError. ``options`` go to the runner
    (parameter_server: ``processes``, one process per task).
    """
    import importlib

    from simdist.distribute.registry import strategy_named

    check_runs_on_tf(exercise)

    module, _, function = strategy_named(exercise.strategy).realdist.partition(":")
    run = getattr(importlib.import_module(module), function)
    return run(exercise, timeout=timeout, on_step=on_step, **options)


def check_runs_on_tf(exercise) -> None:
    """A one-line error for an exercise that only the simulator can run: stragglers drawn
    from a distribution (real TF's step times are the machine's own)."""
    from simdist.base.errors import InvalidArgumentError

    if exercise.straggler_draws().active:
        raise InvalidArgumentError(
            f"stragglers {exercise.stragglers}: realdist runs real TensorFlow, whose steps "
            "take what this machine takes; it cannot make them straggle (simdist run draws "
            "them): leave --stragglers out")
