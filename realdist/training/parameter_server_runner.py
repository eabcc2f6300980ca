"""``run_parameter_server``: a parameter_server exercise trained on real TensorFlow's
ParameterServerStrategy, on a localhost cluster in ``realdist.runtime.localcluster``'s
private network: in process (DESIGN.md's recipe: one ``tf.distribute.Server`` per worker and
ps task in the coordinator's own process) or one process per task (``server_tasks``).

The coordinator (the chief task) runs simdist's custom training loop
(``realdist.training.parameter_server_loop``), evaluates if asked
(``realdist.training.parameter_server_eval``), and its report becomes the RunResult
(``realdist.training.parameter_server_result``). A worker failure in the exercise
(``worker:1@2s+1s``) SIGKILLs that worker's process 2 s (wall clock) after the first
function started and restarts it 1 s later.
"""

from __future__ import annotations

import json

from simdist.base import errors
from simdist.base.checks import check_footprint
from simdist.distribute.failures import check_failures

from realdist.runtime.localcluster import Task, run_cluster
from realdist.runtime.tempdirs import owned_tempdir
from realdist.training.parameter_server_result import run_result

_CHIEF = r"""
tf1.enable_eager_execution()  # the prelude is TF1's; ParameterServerStrategy is TF2
from realdist.training import parameter_server_loop as loop
from simdist.training.exercises import Exercise
job = json.loads(JOB)
servers = [] if job["processes"] else loop.serve_in_process(tf, CLUSTER)
exercise = Exercise.from_dict(job["exercise"])
evaluation = None
if job["evaluation"]:
    from realdist.training.parameter_server_eval import Evaluation
    evaluation = Evaluation(tf, exercise, job["evaluation"], job["checkpoint_dir"], CONTROL)
emit("out", loop.train(tf, CLUSTER, exercise, job["failures"], CONTROL, emit, evaluation))
sys.stdout.flush()
os._exit(0)  # the servers' threads would keep the process alive
"""

_EVALUATOR = r"""
tf1.enable_eager_execution()
from realdist.training.parameter_server_eval import sidecar
from simdist.training.exercises import Exercise
job = json.loads(JOB)
sidecar(tf, Exercise.from_dict(job["exercise"]), job["evaluation"], job["checkpoint_dir"],
        emit)
"""

_SERVER = r"""
from realdist.training.parameter_server_loop import serve
job, index = TASK.split(":")
serve(tf, CLUSTER, job, int(index))
"""


#: measured with TF 2.21 on 2 cores: a process with TensorFlow (the coordinator's, or one
#: task's), and each further server in the coordinator's process (2 workers: 0.73 GB in
#: all, 32 workers: 2.0 GB; 2 workers and a ps in processes: 2.4 GB in 7 processes)
PROCESS_BYTES, SERVER_BYTES = 350 << 20, 45 << 20


def check_memory(workers: int, ps: int, processes: bool) -> None:
    """Refuse a cluster whose TensorFlow servers would not fit (500 in one process also
    run out of threads: TF aborts with "pthread_create failed")."""
    tasks = workers + ps
    if processes:
        nbytes, how = (tasks + 3) * PROCESS_BYTES, "a TensorFlow process of about 350 MiB " \
            "per task, the coordinator's and the launcher's"
    else:
        nbytes, how = 2 * PROCESS_BYTES + tasks * SERVER_BYTES, "the coordinator's " \
            "TensorFlow, about 700 MiB, and a server of about 45 MiB per task in it"
    check_footprint(nbytes, f"--workers {workers} --ps {ps}"
                    + (" in a process each" if processes else " in one process"), how,
                    "give fewer workers or ps")


def run_parameter_server(exercise, timeout: float = 300, on_step=None,
                         processes: bool | None = None, evaluation: dict | None = None):
    """Train a parameter_server exercise on real TF; its RunResult. ``processes``: one
    process per task (True), every task in the coordinator's process (False), or the
    former only when the exercise injects failures or the evaluation kills a worker (None:
    a process to kill). ``evaluation``: ``parameter_server_eval.check_options``'s dict, to
    evaluate after training (``metadata["evaluation"]``)."""
    if exercise.strategy != "parameter_server":
        raise errors.InvalidArgumentError(f"strategy {exercise.strategy!r} is not "
                                          "parameter_server")
    exercise.validate()
    failures = _real_failures(exercise)
    kills = bool(failures) or bool(evaluation and evaluation["kill"])
    processes = kills if processes is None else processes
    if kills and not processes:
        raise errors.InvalidArgumentError(
            f"failures {list(exercise.failures) or [evaluation['kill']]} need one process per "
            "task (a worker to kill), not the in-process cluster")
    check_memory(exercise.workers, exercise.ps, processes)
    with owned_tempdir("realdist-checkpoints-") as checkpoints:
        job = {"exercise": exercise.to_dict(), "processes": processes, "failures": failures,
               "evaluation": evaluation, "checkpoint_dir": checkpoints}
        code = f"JOB = {json.dumps(json.dumps(job))}\n"
        tasks = [Task("chief", code + _CHIEF)]
        if evaluation and evaluation["style"] == "sidecar":
            tasks.append(Task("evaluator", code + _EVALUATOR))
        if processes:
            tasks += server_tasks(exercise)
        report = run_cluster({"chief": 1, "worker": exercise.workers, "ps": exercise.ps},
                             tasks, timeout)
    result = run_result(exercise, report, processes)
    if on_step is not None:  # the coordinator reports when the run is over
        for k, (loss, ns) in enumerate(zip(result.losses, result.step_times_ns)):
            on_step(k, loss, ns)
    return result


def server_tasks(exercise) -> list[Task]:
    """A process of its own for every worker and ps task, serving until killed; a worker's
    death the coordinator rides out (it runs the worker's functions on another), a ps's
    ends the run."""
    return [Task(f"{name}:{i}", _SERVER, server=True, survivable=name == "worker")
            for name, n in (("worker", exercise.workers), ("ps", exercise.ps))
            for i in range(n)]


def _real_failures(exercise) -> list:
    """The exercise's failures as (worker task, seconds after the first function, seconds
    down or None): on real TF only workers fail (a ps failure needs the checkpoint restore
    that simdist models)."""
    out = []
    for f in check_failures(exercise):
        if not f.task.startswith("worker:"):
            raise errors.UnimplementedError(
                f"failure of {f.task}: realdist kills worker processes only (a ps failure "
                "cancels the epoch and needs a checkpoint restore; simdist run "
                "parameter_server simulates it)")
        out.append([f.task, f.at_ns / 1e9, None if f.down_ns is None else f.down_ns / 1e9])
    return out
