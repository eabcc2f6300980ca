"""MultiWorkerMirroredStrategy on localhost: one process per worker, as on a real cluster.

The launcher picks free ports, writes every worker's ``TF_CONFIG``
(simdist.hardware.cluster's ``tf_config_for_all_tasks``) and starts ``python -m
realdist.distribute.multiworker DIR`` once per worker, forked by the caller's TF zygote
(``realdist.runtime.zygote``: TensorFlow imported once, not once per worker) and named after
its task (``worker:0``, what ``ps`` shows). A worker sets up its devices, creates the
strategy (before any other TF op: that starts the runtime) with
``CommunicationOptions(implementation=RING|NCCL|AUTO, timeout_seconds=...)`` and trains;
worker 0 (the chief) reports every step as it goes. The launcher watches them: a worker that
exits with an error ends the run at once (UnavailableError with the end of its log), one
that hangs ends it at the timeout (DeadlineExceededError), and every worker is killed in
``finally``, so no child outlives the run (nor a killed launcher: its zygote and the workers
die with it). The workers run in a private network
(``realdist.runtime.localcluster.PrivateNetwork``) on 127.0.0.1: TF's servers cannot be
reached from another machine. A launcher killed outright leaves its job directory behind;
the next launch removes it.

On CPUs TF's MultiWorkerMirroredStrategy runs ONE replica per worker (it uses CPU:0 only; it
ignores logical CPUs), so more replicas per worker need that many GPUs per worker.

``REALDIST_FAULT=crash:TASK:STEP`` (or ``hang:TASK:STEP``) makes worker TASK exit with code 3
(or sleep forever) before step STEP: how the tests check the failure handling.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from simdist.hardware.cluster import ClusterSpec
from simdist.hardware.tf_config import tf_config_for_all_tasks
from simdist.base.errors import (DeadlineExceededError, InvalidArgumentError, SimdistError,
                                 UnavailableError, brief)
from simdist.training.exercises import Exercise

from realdist.runtime.localcluster import PrivateNetwork
from realdist.runtime.processes import TF_ENV_DEFAULTS, free_ports, log_tail, read_back
from realdist.runtime.tempdirs import owned_tempdir
from realdist.runtime.watch import describe_exit
from realdist.runtime.zygote import start_program
from realdist.training.loop_result import result_from_workers

FAULT_ENV = "REALDIST_FAULT"
#: a job directory is TMPDIR/realdist-mwms-PID-XXXX, PID being its launcher's
JOB_DIR_PREFIX = "realdist-mwms-"
#: the most worker processes realdist starts on one machine
MAX_LOCAL_WORKERS = 16
PROGRESS = "progress.jsonl"
COUNT_GPUS = "import tensorflow as tf\nprint(len(tf.config.list_physical_devices('GPU')))\n"


def worker_devices_env(exercise: Exercise, num_gpus: int) -> list[dict]:
    """Each worker's CUDA_VISIBLE_DEVICES: its own slice of GPUs, or none (CPU:0 only)."""
    per = exercise.devices_per_worker
    if num_gpus >= exercise.workers * per:
        return [{"CUDA_VISIBLE_DEVICES": ",".join(str(i * per + d) for d in range(per))}
                for i in range(exercise.workers)]
    if per != 1:
        raise InvalidArgumentError(
            f"{per} replicas per worker: TF's MultiWorkerMirroredStrategy uses one replica "
            f"per worker on CPUs (CPU:0; it ignores logical CPUs) and this machine has "
            f"{num_gpus} GPUs, not the {exercise.workers * per} needed: use --replicas 1 "
            f"(simdist can simulate {per} per worker)")
    return [{"CUDA_VISIBLE_DEVICES": ""} for _ in range(exercise.workers)]


def visible_gpus(timeout: float = 120) -> int:
    """How many GPUs TensorFlow sees here (``tf.config.list_physical_devices``), asked of a
    program that the workers' zygote forks: the launcher itself never imports TensorFlow."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = start_program(COUNT_GPUS, [], {**TF_ENV_DEFAULTS, **os.environ}, out.fileno(),
                             err.fileno(), "count-gpus")
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise DeadlineExceededError(f"counting the GPUs TensorFlow sees took over "
                                        f"{timeout:g} s") from None
        finally:
            proc.kill()
            proc.wait()
        if proc.returncode != 0:
            raise UnavailableError(f"counting the GPUs TensorFlow sees failed (exit "
                                   f"{proc.returncode}):\n{read_back(err)[-2000:]}")
        return int(read_back(out))


def run_multi_worker(exercise: Exercise, timeout: float = 300, on_step=None):
    """Train a multi_worker_mirrored exercise with one local process per worker."""
    if exercise.strategy != "multi_worker_mirrored":
        raise InvalidArgumentError(f"strategy {exercise.strategy!r} is not "
                                   "multi_worker_mirrored")
    if exercise.workers > MAX_LOCAL_WORKERS:
        raise InvalidArgumentError(
            f"--workers {exercise.workers}: each worker is a TensorFlow process of its own "
            f"(hundreds of MB); at most {MAX_LOCAL_WORKERS} on one machine (simdist "
            "simulates more)")
    envs = worker_devices_env(exercise, visible_gpus())
    # the collectives' own timeout backs up the launcher's (which fires first, naming who hangs)
    job = {"mode": "train", "exercise": exercise.to_dict(), "timeout": timeout + 10}
    outs = launch(job, envs, timeout, on_step)
    metadata = {**outs[0]["metadata"],
                "devices": [d for out in outs for d in out["metadata"]["devices"]]}
    for out in outs:
        out["weights"] = {k: np.asarray(v, np.float32) for k, v in out["weights"].items()}
    return result_from_workers(exercise, outs, metadata)


def multi_worker_split(workers: int, examples: int, global_batch: int, timeout: float = 120,
                       **launch_options):
    """The ids every replica of a ``workers`` x 1 cluster receives, per worker and step."""
    job = {"mode": "split", "examples": examples, "global_batch": global_batch,
           "timeout": timeout + 10}
    outs = launch(job, [{"CUDA_VISIBLE_DEVICES": ""}] * workers, timeout, **launch_options)
    return [out["ids"] for out in outs]


def launch(job: dict, envs: list[dict], timeout: float, on_step=None,
           worker: tuple = ("-m", "realdist.distribute.multiworker")) -> list[dict]:
    """Start one worker per entry of ``envs``, watch them, return their outputs in order.

    ``worker`` is the Python program each one runs (given the job directory as its argument),
    as ``python``'s arguments: ``("-m", MODULE)``, ``("-c", CODE)`` or ``(PATH,)``; this
    module's ``worker_main`` unless a test wraps it.
    """
    deadline = time.monotonic() + timeout
    cluster = ClusterSpec({"worker": [f"127.0.0.1:{p}" for p in free_ports(len(envs))]})
    configs = tf_config_for_all_tasks(cluster)
    code = _program(worker)
    with PrivateNetwork() as net, owned_tempdir(JOB_DIR_PREFIX) as tmp:
        tmp = Path(tmp)
        (tmp / "job.json").write_text(json.dumps(job))
        procs = []
        try:
            for i, env in enumerate(envs):
                with open(tmp / f"worker{i}.log", "wb") as log:
                    # in the private network: TF's servers reachable from no other machine
                    procs.append(start_program(
                        code, [str(tmp)],
                        # tfenv's defaults: the zygote imports TF as the worker would
                        {**TF_ENV_DEFAULTS, **os.environ, **env,
                         "TF_CONFIG": configs[f"worker:{i}"],
                         "TMPDIR": str(tmp)},  # AutoGraph's files go with tmp
                        log.fileno(), log.fileno(), f"worker:{i}", network=net))
            _watch(procs, tmp, deadline, timeout, on_step)
        finally:
            for p in procs:
                p.kill()
                p.wait()
        return [json.loads((tmp / f"worker{i}.json").read_text()) for i in range(len(envs))]


def _program(worker: tuple) -> str:
    """The code ``python *worker`` runs, for ``start_program`` (which runs code)."""
    if worker[0] == "-c":
        return worker[1]
    if worker[0] == "-m":
        return (f"import runpy\nrunpy.run_module({worker[1]!r}, run_name='__main__', "
                "alter_sys=True)\n")
    return f"import runpy\nrunpy.run_path({worker[0]!r}, run_name='__main__')\n"


def _watch(procs, tmp: Path, deadline: float, timeout: float, on_step) -> None:
    reported = 0
    while True:
        reported = _report_progress(tmp / PROGRESS, reported, on_step)
        codes = [p.poll() for p in procs]
        for i, code in enumerate(codes):
            if code not in (None, 0):
                raise UnavailableError(
                    f"worker:{i} exited with code {code} ({describe_exit(code)}); the run is "
                    f"stopped and every worker killed. End of its log:\n"
                    f"{log_tail(tmp / f'worker{i}.log')}")
        if all(code == 0 for code in codes):
            _report_progress(tmp / PROGRESS, reported, on_step)
            return
        if time.monotonic() > deadline:
            running = [i for i, code in enumerate(codes) if code is None]
            raise DeadlineExceededError(
                f"the multi-worker run did not finish within its timeout of {timeout:g} s "
                f"({reported} steps reported by the chief); still running: "
                f"{', '.join(f'worker:{i}' for i in running)} -- killed. A worker that hangs "
                f"(or waits for a peer that never comes) looks like this. Their logs end:\n"
                + "\n".join(f"  worker:{i}:\n{log_tail(tmp / f'worker{i}.log', 6)}"
                            for i in running))
        time.sleep(0.05)


def _report_progress(path: Path, reported: int, on_step) -> int:
    if not path.exists():
        return reported
    complete = path.read_text().split("\n")[:-1]  # the last piece may be half written
    for line in complete[reported:]:
        step = json.loads(line)
        if on_step is not None:
            on_step(step["step"], step["loss"], step["ns"])
    return len(complete)


# ------------------------------------------------------------------------- worker process


def _fault(task_id: int):
    """The fault REALDIST_FAULT asks this worker for, as a ``before_step`` hook (or None)."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    kind, task, step = spec.split(":")
    if kind not in ("crash", "hang"):
        raise InvalidArgumentError(f"{FAULT_ENV}={spec!r}: expected crash:TASK:STEP or "
                                   "hang:TASK:STEP")
    if int(task) != task_id:
        return None

    def before_step(k):
        if k == int(step):
            verb = {"crash": "crashes", "hang": "hangs"}[kind]
            print(f"{FAULT_ENV}: worker:{task_id} {verb} before step {k}", flush=True)
            if kind == "crash":
                os._exit(3)
            time.sleep(10 ** 6)

    return before_step


def make_strategy(communication: str, timeout: float):
    """TF's MultiWorkerMirroredStrategy from TF_CONFIG, with a collective timeout."""
    from realdist.runtime.tfenv import tf

    implementation = getattr(tf.distribute.experimental.CommunicationImplementation,
                             communication.upper())
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementation, timeout_seconds=timeout)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def worker_main(directory: str) -> None:
    """One worker: read the job, train (or report the split), write ``workerI.json``."""
    from simdist.hardware.tf_config import TFConfig

    tmp = Path(directory)
    job = json.loads((tmp / "job.json").read_text())
    task_id = TFConfig.from_env().task_id
    if job["mode"] == "split":
        strategy = make_strategy("ring", job["timeout"])
        from realdist.distribute.split import received_ids

        out = {"ids": received_ids(strategy, job["examples"], job["global_batch"])}
    else:
        exercise = Exercise.from_dict(job["exercise"])
        strategy = make_strategy(exercise.communication, job["timeout"])
        out = _train_worker(strategy, exercise, task_id, tmp)
    part = tmp / f"worker{task_id}.json.part"
    part.write_text(json.dumps(out))
    part.rename(tmp / f"worker{task_id}.json")


def _train_worker(strategy, exercise, task_id: int, tmp: Path) -> dict:
    from realdist.training.loop import train
    from realdist.distribute.strategies import describe_reduction
    from realdist.runtime.tfenv import tf

    def on_step(k, loss, ns):
        with open(tmp / PROGRESS, "a") as f:
            f.write(json.dumps({"step": k, "loss": loss, "ns": ns}) + "\n")

    out = train(strategy, exercise, on_step=on_step if task_id == 0 else None,
                before_step=_fault(task_id))
    out["weights"] = {k: v.tolist() for k, v in out["weights"].items()}
    out["metadata"] = {"tensorflow": tf.__version__,
                       "strategy_class": type(strategy).__name__,
                       "devices": list(strategy.extended.worker_devices),
                       "cross_device_ops": describe_reduction(strategy),
                       "communication": exercise.communication}
    return out


def main(argv=None) -> int:
    """``python -m realdist.distribute.multiworker DIR``: one worker, started by ``launch`` with its
    TF_CONFIG; bad input is one line and exit status 2."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if len(argv) != 1 or not (Path(argv[0]) / "job.json").is_file():
            raise InvalidArgumentError(
                f"expected one job directory holding job.json, got {brief(argv)}: this is "
                "the worker of 'realdist run multi_worker_mirrored', which starts it")
        worker_main(argv[0])
    except SimdistError as error:
        print(f"realdist worker: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
