"""Models the TF_CONFIG environment variable as TensorFlow's ``TFConfigClusterResolver`` reads
it: the cluster and which task this process is, as JSON.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from simdist.base.errors import InvalidArgumentError, brief, stricter_than_tf
from simdist.hardware.cluster import (ClusterSpec, TaskId, TaskIndexError, UnknownTaskTypeError,
                                      _is_int, chief_task)


class TFConfigError(InvalidArgumentError):
    """The TF_CONFIG environment variable is missing or malformed."""


_TASK_FORM = '{"type": "worker", "index": 0}'
#: why simdist refuses a TF_CONFIG task that TFConfigClusterResolver reads without a check
_TASK_WHY = ("TFConfigClusterResolver reads any task unchecked and the mistake shows only "
             "later, when the server cannot start")


@dataclass
class TFConfig:
    """Models the TF_CONFIG environment variable as TFConfigClusterResolver reads it: the
    cluster and which task this process is. Without a cluster it is a local task (TF's
    resolver gives an empty ClusterSpec and the master ''), whose task is not checked."""

    cluster: ClusterSpec
    task_type: str | None
    task_id: int | None
    rpc_layer: str | None = None
    environment: str | None = None

    def __post_init__(self):
        if not isinstance(self.cluster, ClusterSpec):
            self.cluster = ClusterSpec(self.cluster)
        if (self.task_type is None) != (self.task_id is None):
            raise TFConfigError(
                f"TF_CONFIG task has type {brief(self.task_type)} and index {brief(self.task_id)}: "
                "give both or neither" + stricter_than_tf(_TASK_WHY))
        if self.task_type is not None:
            if not _is_int(self.task_id):
                raise TFConfigError(
                    f"TF_CONFIG task index {brief(self.task_id)} must be an int, "
                    f"such as {_TASK_FORM}")
            if self.cluster:
                try:
                    self.cluster.task_address(self.task_type, self.task_id)
                except (UnknownTaskTypeError, TaskIndexError) as error:
                    raise type(error)(f"{error}" + stricter_than_tf(_TASK_WHY)) from None
        for key in ("rpc_layer", "environment"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise TFConfigError(f"TF_CONFIG {key!r} is {brief(value)}: expected a string"
                                    + stricter_than_tf("it names a protocol or a platform"))

    @classmethod
    def from_json(cls, text: str) -> TFConfig:
        try:
            config = json.loads(text)
        except json.JSONDecodeError as error:
            shown = text[:80] + ("..." if len(text) > 80 else "")
            raise TFConfigError(
                f"TF_CONFIG is not valid JSON ({error.msg} at line {error.lineno} column "
                f"{error.colno}, char {error.pos}): {shown!r}") from None
        except TypeError:
            raise TFConfigError(f"TF_CONFIG must be a JSON string, got {brief(text)}") from None
        except RecursionError:
            raise TFConfigError("TF_CONFIG nests JSON arrays or objects too deeply to "
                                "read") from None
        if not isinstance(config, dict):
            raise TFConfigError(
                f"TF_CONFIG must be a JSON object such as {{\"cluster\": ..., \"task\": ...}}, "
                f"got {text[:80]!r}" + stricter_than_tf(
                    "a TF_CONFIG that is not an object is always a mistake (TF reads some of "
                    "them as no cluster and no task)"))
        task = config.get("task")
        task_type = task_id = None
        if task is not None:
            if not isinstance(task, dict):
                raise TFConfigError(
                    f"TF_CONFIG 'task' is {brief(task)}: expected an object such as "
                    f"{_TASK_FORM}" + stricter_than_tf(_TASK_WHY))
            for key in ("type", "index"):
                if key not in task:
                    raise TFConfigError(
                        f"TF_CONFIG 'task' {brief(task)} has no {key!r}: expected an object "
                        f"such as {_TASK_FORM}" + stricter_than_tf(_TASK_WHY))
            task_type, task_id = task["type"], _task_index(task["index"])
            if not isinstance(task_type, str):
                raise TFConfigError(f"TF_CONFIG task type {brief(task_type)} must be a string"
                                    + stricter_than_tf(_TASK_WHY))
        return cls(ClusterSpec(config.get("cluster", {})), task_type, task_id,
                   config.get("rpc_layer"), config.get("environment"))

    @classmethod
    def from_env(cls, environ=None) -> TFConfig:
        """Read TF_CONFIG from ``environ`` (default: os.environ)."""
        environ = os.environ if environ is None else environ
        text = environ.get("TF_CONFIG")
        if not text:
            raise TFConfigError(
                "TF_CONFIG is not set: set it to a JSON object such as "
                '{"cluster": {"worker": ["localhost:2222"]}, "task": {"type": "worker", '
                '"index": 0}}')
        return cls.from_json(text)

    def to_json(self) -> str:
        config: dict = {"cluster": self.cluster.as_dict()}
        if self.task_type is not None:
            config["task"] = {"type": self.task_type, "index": self.task_id}
        if self.rpc_layer is not None:
            config["rpc_layer"] = self.rpc_layer
        if self.environment is not None:
            config["environment"] = self.environment
        return json.dumps(config, sort_keys=True)

    @property
    def task(self) -> TaskId:
        if self.task_type is None:
            raise TFConfigError("TF_CONFIG has no 'task': this process is not a cluster task")
        return TaskId(self.task_type, self.task_id)

    @property
    def is_chief(self) -> bool:
        """TF's ``multi_worker_util.is_chief``: the chief task, an evaluator (a chief of its
        own: it trains nothing), or worker 0 of a cluster without a chief job; simdist also
        counts a TFJob "master" as the chief."""
        if self.task_type in ("chief", "evaluator"):
            return True
        if "chief" in self.cluster.jobs or "master" in self.cluster.jobs:
            return self.task == chief_task(self.cluster)
        return (self.task_type, self.task_id) == ("worker", 0)


def _task_index(index) -> int:
    """TF_CONFIG's task "index": an int, or a string TF reads with ``int()``."""
    if isinstance(index, str):
        try:
            return int(index)
        except ValueError:
            raise TFConfigError(f"TF_CONFIG task index {brief(index)} is not an integer, "
                                f"such as {_TASK_FORM}") from None
    if not _is_int(index):
        why = stricter_than_tf("int() would silently truncate it") \
            if isinstance(index, (bool, float)) else ""
        raise TFConfigError(f"TF_CONFIG task index {brief(index)} must be an int, such as "
                            f"{_TASK_FORM}{why}")
    return index


def tf_config_for_all_tasks(cluster) -> dict[str, str]:
    """The TF_CONFIG JSON of every task, by task name, in canonical task order."""
    cluster = ClusterSpec(cluster)
    return {task.name: TFConfig(cluster, task.task_type, task.task_id).to_json()
            for task in cluster.tasks()}
