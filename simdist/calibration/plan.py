"""The plan of exercises a calibration measures on real TensorFlow (``calibration_plan``),
the strategies and sizes it covers (``SIZES``), and how an exercise is named in its tables
and progress (``label``)."""

from __future__ import annotations

from simdist.training.exercises import Exercise

#: the strategies measured and their sizes (replicas, or workers): every one realdist runs
#: on this machine (parameter_server: its workers and one ps on a localhost cluster)
SIZES = {"default": (1,), "one_device": (1,), "mirrored": (1, 2, 4),
         "central_storage": (1, 2, 4), "multi_worker_mirrored": (1, 2, 4),
         "parameter_server": (1, 2)}
#: the strategies whose steps are asynchronous (measured as the coordinator's step rate)
ASYNCHRONOUS = ("parameter_server",)
#: ParameterServerStrategy's steps per scheduled function in the calibration: two, so that
#: the fit tells the coordinator's cost per function (paid once per function) from a step's
#: (paid every step); ``simdist bench predict`` checks a count between them
PS_STEPS_PER_EXECUTION = (1, 4)


def sized_exercise(strategy, size, model, hidden, batch, steps,
                   steps_per_execution: int = 1) -> Exercise:
    """``strategy`` on ``size`` logical CPUs of one process, or on ``size`` workers for
    multi_worker_mirrored (a process each) and parameter_server (with one ps, and
    ``steps_per_execution`` steps per scheduled function)."""
    multi = strategy in ("multi_worker_mirrored", "parameter_server")
    ps = {"ps": 1, "steps_per_execution": steps_per_execution} \
        if strategy == "parameter_server" else {}
    return Exercise(strategy=strategy, model=model,
                    dataset="regression" if model == "linear" else "digits",
                    hidden=hidden, global_batch=batch, steps=steps,
                    workers=size if multi else 1, devices_per_worker=1 if multi else size, **ps)


def calibration_plan(steps: int, quick: bool = False) -> list[Exercise]:
    """What ``simdist calibrate`` measures: every strategy and size that ``simdist bench
    predict`` checks, with other batches and models: softmax regression on the digits at 64
    and 1024 (64 pixels an example: input bytes, few FLOPs) and a 256-unit MLP at 128 and 900
    (FLOPs, and the largest gradients). predict uses softmax at 128 and 512, between those,
    and a 64-unit MLP, a model calibrate never runs, at 64 and 1024.

    The span is the matrix's on purpose: a step's time does not grow in a line with the
    batch here (on 2026-11-26, fitted on softmax at 128 and 512, the in-process exercises at
    1024 came out 9-29% long), so the calibration brackets the batches it is asked about
    rather than leaving predict to extrapolate. At 1024 the digits' 1797 examples come in
    batches of 1024 and 773 in turn; the simulator's median step is the middle of the two,
    as the measured median is. 900 cuts them into two near-equal batches (900 and 897).

    ParameterServerStrategy (1 and 2 workers, one ps) runs softmax at 64, a step of little
    compute, at 1 and 4 steps per scheduled function (``PS_STEPS_PER_EXECUTION``): the
    coordinator's cost per function is most of its step time, and the two counts tell it from
    a step's own."""
    models = (("softmax", 32, 64), ("softmax", 32, 1024), ("mlp", 256, 128),
              ("mlp", 256, 900))
    if quick:
        plan = [("one_device", 1, "linear", 32, 128), ("mirrored", 2, "mlp", 256, 256),
                ("multi_worker_mirrored", 2, "linear", 32, 128)]
        return [sized_exercise(*row, steps) for row in plan]
    plan = [sized_exercise(strategy, n, *model, steps) for strategy, counts in SIZES.items()
            if strategy not in ASYNCHRONOUS for n in counts for model in models]
    return plan + [sized_exercise("parameter_server", n, "softmax", 32, 64, steps, k)
                   for n in SIZES["parameter_server"] for k in PS_STEPS_PER_EXECUTION]


def label(exercise) -> str:
    """``mirrored x2 mlp(512) batch 1024``: an exercise in a few words (parameter_server's
    with its steps per function: ``parameter_server x2 workers softmax batch 64 spe 4``)."""
    size = (f"x{exercise.num_workers} workers" if exercise.num_workers > 1
            else f"x{exercise.devices_per_worker}")
    if exercise.strategy in ASYNCHRONOUS and exercise.num_workers == 1:
        size = "x1 worker"
    model = f"mlp({exercise.hidden})" if exercise.model == "mlp" else exercise.model
    spe = (f" spe {exercise.steps_per_execution}" if exercise.strategy in ASYNCHRONOUS
           else "")
    return f"{exercise.strategy} {size} {model} batch {exercise.global_batch}{spe}"
