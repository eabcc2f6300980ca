"""Cluster description: tasks, tf.train.ClusterSpec and TF_CONFIG.

A TensorFlow cluster is a set of *jobs* ("chief", "worker", "ps", ...), each a list of *tasks*
reached at a "host:port" address. A process learns which task it is from the ``TF_CONFIG``
environment variable. This module models the first two, the rule that picks the chief, and the
rule that spreads the simulated tasks over MPI ranks; ``TF_CONFIG`` is in ``tf_config.py``. Device strings
(``/job:worker/replica:0/task:1/device:GPU:0``, tf.DeviceSpec) are in ``device_spec.py``.

Every task has a place in the *canonical task order*: jobs in ``TASK_TYPES`` order first, other
job names sorted after them, task indices ascending within a job. Simulated time breaks ties by
this order, so it must never depend on dict insertion order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from simdist.base.checks import MAX_TASKS
from simdist.base.errors import (InvalidArgumentError, NotFoundError, OutOfRangeError, brief,
                                 stricter_than_tf)

TASK_TYPES = ("chief", "master", "worker", "ps", "evaluator")

# TF's runtime parses "/job:NAME" for these names only (device_name_utils.cc)
_JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_JOB_RULE = "letters, digits and '_', starting with a letter, such as 'worker'"
_JOB_WHY = ("TensorFlow's servers name their devices '/job:NAME/...', and its runtime parses "
            "such names only for " + _JOB_RULE)
_FIRST_PORT = 2222
_MAX_LISTED = 8  # how many items an error message lists before abbreviating


class ClusterSpecError(InvalidArgumentError):
    """A cluster description (ClusterSpec or the chief rule) is malformed."""


class UnknownTaskTypeError(NotFoundError):
    """A job (task type) that the cluster does not have."""


class UnknownTaskError(NotFoundError):
    """A task name ("worker:7") that the cluster does not have."""


class TaskIndexError(OutOfRangeError):
    """A task index outside the tasks of its job."""


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _job_sort_key(job: str):
    return (TASK_TYPES.index(job), "") if job in TASK_TYPES else (len(TASK_TYPES), job)


def _abbreviate(items: list[str]) -> str:
    if len(items) <= _MAX_LISTED:
        return ", ".join(items)
    head = ", ".join(items[: _MAX_LISTED - 1])
    return f"{head}, ... ({len(items) - _MAX_LISTED} more), {items[-1]}"


# ----------------------------------------------------------------------------------- TaskId


@dataclass(frozen=True)
class TaskId:
    """One task of a cluster, the (task_type, task_id) pair of TF_CONFIG's "task"."""

    task_type: str
    task_id: int

    def __post_init__(self):
        if not isinstance(self.task_type, str) or not _JOB_NAME.fullmatch(self.task_type):
            raise InvalidArgumentError(
                f"task_type {brief(self.task_type)} is not a job name: expected {_JOB_RULE}")
        if not _is_int(self.task_id) or self.task_id < 0:
            raise InvalidArgumentError(
                f"task_id {brief(self.task_id)} of task type {brief(self.task_type)} must be an "
                "int >= 0")

    @property
    def name(self) -> str:
        return f"{self.task_type}:{self.task_id}"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """Parse "worker:1", "/job:worker/task:1" or "/job:worker/replica:0/task:1"."""
        if isinstance(text, str):
            match = (re.fullmatch(r"([A-Za-z][A-Za-z0-9_]*):(\d+)", text)
                     or re.fullmatch(r"/job:([A-Za-z][A-Za-z0-9_]*)(?:/replica:\d+)?/task:(\d+)",
                                     text))
            if match:
                return cls(match.group(1), int(match.group(2)))
        raise InvalidArgumentError(
            f"cannot parse task name {brief(text)}: expected 'worker:1', '/job:worker/task:1' "
            "or '/job:worker/replica:0/task:1'")


# -------------------------------------------------------------------------------- ClusterSpec


class ClusterSpec:
    """Models tf.train.ClusterSpec: job name -> {task index: "host:port"}.

    Each job is given as a list of addresses or a dict {index: address} (sparse, as TF
    allows), possibly empty, or, as our extension, a task count: addresses are then
    "localhost:2222", "localhost:2223", ... in canonical task order. As in TF, ``jobs`` and
    ``as_dict`` keep the order the jobs were given in, ``repr`` sorts them, and an empty
    ClusterSpec is falsy; ``tasks()`` is in canonical task order.
    """

    def __init__(self, cluster):
        if isinstance(cluster, ClusterSpec):
            self._jobs = {job: dict(tasks) for job, tasks in cluster._jobs.items()}
        elif isinstance(cluster, dict):
            self._jobs = self._parse(cluster)
        else:
            raise ClusterSpecError(
                f"cannot build a ClusterSpec from {brief(cluster)} ({type(cluster).__name__}): "
                "expected a dict job name -> list of 'host:port' addresses, "
                "{index: address} dict, or task count")
        self._tasks = [TaskId(job, index) for job in sorted(self._jobs, key=_job_sort_key)
                       for index in self._jobs[job]]
        self._order = {task: position for position, task in enumerate(self._tasks)}

    @staticmethod
    def _parse(cluster: dict) -> dict[str, dict[int, str]]:
        for job in cluster:
            if not isinstance(job, str) or not _JOB_NAME.fullmatch(job):
                why = stricter_than_tf(_JOB_WHY) if isinstance(job, str) else ""
                raise ClusterSpecError(
                    f"invalid job name {brief(job)}: expected {_JOB_RULE} or 'ps'{why}")
        jobs: dict[str, dict[int, str] | int] = {}
        counts = {job: value if _is_int(value) else len(value) for job, value in cluster.items()
                  if _is_int(value) or isinstance(value, (list, tuple, dict))}
        if sum(counts.values()) > MAX_TASKS:
            raise ClusterSpecError(
                f"a cluster of {sum(counts.values()):,} tasks ("
                + ", ".join(f"{job}: {n:,}" for job, n in counts.items())
                + f"): expected at most {MAX_TASKS:,}, simdist's cap"
                + stricter_than_tf("every task is a simulated process with its own state "
                                   "and queues, and localhost ports end at 65535"))
        for job, value in cluster.items():
            if _is_int(value):
                if value < 1:
                    raise ClusterSpecError(
                        f"job {brief(job)} has task count {value}: expected a count >= 1")
                jobs[job] = value
            elif isinstance(value, (list, tuple)):
                jobs[job] = {index: _check_address(job, index, address)
                             for index, address in enumerate(value)}
            elif isinstance(value, dict):
                jobs[job] = {_check_index(job, index): _check_address(job, index, address)
                             for index, address in value.items()}
            else:
                raise ClusterSpecError(
                    f"job {brief(job)} has value {brief(value)} ({type(value).__name__}): "
                    "expected a list of 'host:port' addresses, a dict {index: address}, or a "
                    "task count")
        # Counted jobs get localhost ports in canonical task order, skipping ports in use.
        used = {address for tasks in jobs.values() if isinstance(tasks, dict)
                for address in tasks.values()}
        port = _FIRST_PORT
        counted = {}
        for job in sorted(jobs, key=_job_sort_key):
            if isinstance(jobs[job], int):
                counted[job] = {}
                for index in range(jobs[job]):
                    while f"localhost:{port}" in used:
                        port += 1
                    counted[job][index] = f"localhost:{port}"
                    port += 1
        return {job: dict(sorted(counted.get(job, tasks).items()))
                for job, tasks in jobs.items()}

    # -- TF's API
    @property
    def jobs(self) -> list[str]:
        return list(self._jobs)

    def num_tasks(self, job_name: str) -> int:
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        return list(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        tasks = self._job(job_name)
        if not _is_int(task_index):
            raise InvalidArgumentError(
                f"task index {brief(task_index)} for job {brief(job_name)} must be an int")
        if task_index not in tasks:
            raise TaskIndexError(
                f"task index {task_index} out of range for job {brief(job_name)}: "
                f"the cluster has {_describe_job(job_name, tasks)}")
        return tasks[task_index]

    def job_tasks(self, job_name: str) -> list[str | None]:
        """Addresses of the job by index, None for the gaps of a sparse job (like TF)."""
        tasks = self._job(job_name)
        return [tasks.get(index) for index in range(max(tasks, default=-1) + 1)]

    def as_dict(self) -> dict[str, list[str] | dict[int, str]]:
        """job -> list of addresses, or {index: address} for a sparse or empty job (as TF)."""
        return {job: list(tasks.values()) if tasks and list(tasks) == list(range(len(tasks)))
                else dict(tasks) for job, tasks in self._jobs.items()}

    # -- task order
    def tasks(self) -> list[TaskId]:
        return list(self._tasks)

    def task_tuple(self) -> tuple[TaskId, ...]:
        """Every task in task order, as one tuple that every caller shares (each of
        thousands of simulated tasks keeps it: a copy each would cost tasks^2)."""
        tasks = self.__dict__.get("_task_tuple")
        if tasks is None:
            tasks = self._task_tuple = tuple(self._tasks)
        return tasks

    def task_names(self) -> tuple[str, ...]:
        """Every task's name ("worker:0"), in task order, shared as ``task_tuple``."""
        names = self.__dict__.get("_task_names")
        if names is None:
            names = self._task_names = tuple(t.name for t in self._tasks)
        return names

    @property
    def num_tasks_total(self) -> int:
        return len(self._tasks)

    def task(self, name_or_task: str | TaskId) -> TaskId:
        """The TaskId of "worker:1" (or of a TaskId), checking that the cluster has it."""
        task = name_or_task if isinstance(name_or_task, TaskId) else TaskId.parse(name_or_task)
        if task not in self._order:
            described = [_describe_job(job, tasks) for job, tasks in self._jobs.items()
                         if tasks]
            raise UnknownTaskError(
                f"no task {brief(task.name)} in the cluster: it has "
                f"{_abbreviate(described) or 'no tasks'}")
        return task

    def task_order(self, name_or_task: str | TaskId) -> int:
        return self._order[self.task(name_or_task)]

    def _job(self, job_name: str) -> dict[int, str]:
        if job_name not in self._jobs:
            raise UnknownTaskTypeError(
                f"job {brief(job_name)} is not in the cluster: its jobs are "
                f"{', '.join(self._jobs) or '(none)'}")
        return self._jobs[job_name]

    def __eq__(self, other):
        if isinstance(other, ClusterSpec):
            return self._jobs == other._jobs
        return NotImplemented

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __repr__(self) -> str:
        jobs = self.as_dict()
        return "ClusterSpec({" + ", ".join(f"{job!r}: {jobs[job]!r}"
                                          for job in sorted(jobs)) + "})"


def _check_index(job: str, index) -> int:
    if isinstance(index, str) and index.isdigit():  # JSON object keys are strings
        index = int(index)
    if not _is_int(index) or index < 0:
        why = stricter_than_tf("no task has a negative index") if _is_int(index) else ""
        raise ClusterSpecError(f"job {brief(job)} has task index {brief(index)}: expected an "
                               f"int >= 0{why}")
    return index


def _check_address(job: str, index, address) -> str:
    if not isinstance(address, str) or not address:
        why = stricter_than_tf("a task needs an address to be reached at") \
            if address == "" else ""
        raise ClusterSpecError(
            f"task {job}:{index} has address {brief(address)}: expected a 'host:port' "
            f"string{why}")
    return address


def _describe_job(job: str, tasks: dict[int, str]) -> str:
    """'worker:0..worker:3' for a dense job, 'worker:1, worker:4' for a sparse one."""
    indices = list(tasks)
    if not indices:
        return f"no {job} task"
    if len(indices) > 1 and indices == list(range(indices[0], indices[-1] + 1)):
        return f"{job}:{indices[0]}..{job}:{indices[-1]}"
    return _abbreviate([f"{job}:{index}" for index in indices])


def chief_task(cluster: ClusterSpec) -> TaskId:
    """The chief: the "chief" task, else "master:0" (TFJob form), else "worker:0"."""
    for job in ("chief", "master"):
        if job in cluster.jobs:
            indices = cluster.task_indices(job)
            if len(indices) != 1:
                raise ClusterSpecError(
                    f"job {brief(job)} has {len(indices)} tasks: a cluster has exactly one chief")
            return TaskId(job, indices[0])
    if "worker" in cluster.jobs and 0 in cluster.task_indices("worker"):
        return TaskId("worker", 0)
    raise ClusterSpecError(
        f"cluster {brief(cluster)} has no chief: expected a 'chief' job, a 'master' job, "
        "or a task 'worker:0'")


# ------------------------------------------------------------------------------- MPI ranks


def task_to_rank(num_tasks: int, num_ranks: int) -> list[int]:
    """The MPI rank that runs each task (by task order): contiguous, balanced blocks."""
    if not _is_int(num_tasks) or num_tasks < 1:
        raise InvalidArgumentError(f"number of tasks {brief(num_tasks)} must be an int >= 1")
    if not _is_int(num_ranks) or num_ranks < 1:
        raise InvalidArgumentError(f"number of MPI ranks {brief(num_ranks)} must be an int >= 1")
    if num_ranks > num_tasks:
        raise InvalidArgumentError(
            f"mpiexec -n {num_ranks} is larger than the number of simulated tasks "
            f"({num_tasks}): every MPI rank needs at least one task; use -n {num_tasks} or fewer")
    base, extra = divmod(num_tasks, num_ranks)
    ranks = []
    for rank in range(num_ranks):
        ranks += [rank] * (base + (1 if rank < extra else 0))
    return ranks
