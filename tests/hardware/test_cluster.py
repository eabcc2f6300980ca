"""Tests for simdist.hardware.cluster: ClusterSpec, the chief rule, TF_CONFIG and ranks."""

import json

import pytest

from simdist.hardware.cluster import (TASK_TYPES, ClusterSpec, ClusterSpecError, TaskId,
                                      TaskIndexError, UnknownTaskError, UnknownTaskTypeError,
                                      chief_task, task_to_rank)
from simdist.hardware.tf_config import TFConfig, TFConfigError, tf_config_for_all_tasks
from simdist.base.errors import InvalidArgumentError, NotFoundError, OutOfRangeError

from tests.conftest import literal



# ------------------------------------------------------------------------------------ TaskId


def test_task_id_name_and_parse():
    task = TaskId("worker", 1)
    assert task.name == "worker:1" and str(task) == "worker:1"
    for text in ("worker:1", "/job:worker/task:1", "/job:worker/replica:0/task:1"):
        assert TaskId.parse(text) == task
    assert TaskId.parse("chief:0") == TaskId("chief", 0)


@pytest.mark.parametrize("text", ["worker", "worker:x", "/job:worker", "worker:-1",
                                  "/job:worker/task:1/device:CPU:0", "9worker:1", ""])
def test_task_id_parse_malformed(text):
    with pytest.raises(InvalidArgumentError, match=literal(repr(text))) as info:
        TaskId.parse(text)
    assert "/job:worker/task:1" in str(info.value)


def test_task_id_bad_fields():
    with pytest.raises(InvalidArgumentError, match="-1"):
        TaskId("worker", -1)
    with pytest.raises(InvalidArgumentError, match="'my-job'"):
        TaskId("my-job", 0)
    assert TaskId.parse("Worker:1") == TaskId("Worker", 1)  # a job name TF's runtime takes


# -------------------------------------------------------------------------------- ClusterSpec


def test_task_types():
    assert TASK_TYPES == ("chief", "master", "worker", "ps", "evaluator")


def test_canonical_job_and_task_order():
    cluster = ClusterSpec({"zeta": 1, "ps": 2, "evaluator": 1, "alpha": 1, "worker": 2,
                           "chief": 1})
    assert cluster.jobs == ["zeta", "ps", "evaluator", "alpha", "worker", "chief"]  # as TF
    assert [t.name for t in cluster.tasks()] == [
        "chief:0", "worker:0", "worker:1", "ps:0", "ps:1", "evaluator:0", "alpha:0", "zeta:0"]
    assert cluster.num_tasks_total == 8
    assert cluster.task_order("ps:1") == 4
    assert cluster.task_order(TaskId("zeta", 0)) == 7
    assert cluster.task("/job:worker/task:1") == TaskId("worker", 1)


def test_counts_get_ports_in_canonical_order():
    cluster = ClusterSpec({"ps": 1, "worker": 2, "chief": 1})
    assert cluster.as_dict() == {
        "chief": ["localhost:2222"],
        "worker": ["localhost:2223", "localhost:2224"],
        "ps": ["localhost:2225"]}


def test_counts_skip_ports_given_explicitly():
    cluster = ClusterSpec({"worker": 2, "ps": ["localhost:2223"]})
    assert cluster.job_tasks("worker") == ["localhost:2222", "localhost:2224"]


def test_lists_and_queries():
    cluster = ClusterSpec({"worker": ["w0:2222", "w1:2222"], "ps": ("p0:2222",)})
    assert cluster.num_tasks("worker") == 2
    assert cluster.task_indices("worker") == [0, 1]
    assert cluster.task_address("worker", 1) == "w1:2222"
    assert cluster.job_tasks("ps") == ["p0:2222"]
    assert cluster.as_dict() == {"worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222"]}


def test_sparse_job_like_tf():
    cluster = ClusterSpec({"worker": {3: "w3:1", 1: "w1:1"}})
    assert cluster.num_tasks("worker") == 2
    assert cluster.task_indices("worker") == [1, 3]
    assert cluster.job_tasks("worker") == [None, "w1:1", None, "w3:1"]
    assert cluster.as_dict() == {"worker": {1: "w1:1", 3: "w3:1"}}
    assert [t.name for t in cluster.tasks()] == ["worker:1", "worker:3"]
    # A dense dict becomes a list, as in TF.
    assert ClusterSpec({"ps": {1: "b", 0: "a"}}).as_dict() == {"ps": ["a", "b"]}


def test_as_dict_round_trip_eq_and_repr():
    for spec in ({"chief": ["c:1"], "worker": {0: "w0:1", 2: "w2:1"}, "local": ["l:1"]},
                 {"worker": 3, "ps": 2}):
        cluster = ClusterSpec(spec)
        assert ClusterSpec(cluster.as_dict()) == cluster
        assert ClusterSpec(cluster) == cluster
        jobs = cluster.as_dict()
        assert repr(cluster) == "ClusterSpec({" + ", ".join(
            f"{job!r}: {jobs[job]!r}" for job in sorted(jobs)) + "})"  # TF sorts the jobs
    assert ClusterSpec({"worker": 2}) != ClusterSpec({"worker": 3})
    assert ClusterSpec({}).tasks() == []


@pytest.mark.parametrize("spec, shown", [
    ({"my-job": 2}, "'my-job'"),
    ({"9w": 2}, "'9w'"),
    ({3: 2}, "3"),
    ({"worker": 0}, "0"),
    ({"worker": -2}, "-2"),
    ({"worker": [1234]}, "1234"),
    ({"worker": ["ok:1", None]}, "None"),
    ({"worker": {0: 5}}, "5"),
    ({"worker": {-1: "a:1"}}, "-1"),
    ({"worker": "host:1"}, "'host:1'"),
    ({"worker": 2.0}, "2.0"),
    ({"worker": True}, "True"),
    ({"worker": [""]}, "''"),
    (["worker"], "['worker']"),
])
def test_bad_cluster_specs(spec, shown):
    with pytest.raises(ClusterSpecError, match=literal(shown)):
        ClusterSpec(spec)


def test_cluster_spec_error_classes():
    assert issubclass(ClusterSpecError, InvalidArgumentError)
    assert issubclass(UnknownTaskTypeError, NotFoundError)
    assert issubclass(UnknownTaskError, NotFoundError)
    assert issubclass(TaskIndexError, OutOfRangeError)
    assert issubclass(TFConfigError, InvalidArgumentError)


def test_bad_cluster_spec_message_names_job_and_expectation():
    with pytest.raises(ClusterSpecError, match=literal("job 'worker'")) as info:
        ClusterSpec({"worker": 1.5})
    assert "list of 'host:port' addresses" in str(info.value)


def test_unknown_job_lists_jobs():
    cluster = ClusterSpec({"chief": 1, "worker": 2})
    for call in (lambda: cluster.num_tasks("ps"), lambda: cluster.task_indices("ps"),
                 lambda: cluster.task_address("ps", 0), lambda: cluster.job_tasks("ps")):
        with pytest.raises(UnknownTaskTypeError, match=literal("'ps'")) as info:
            call()
        assert "chief, worker" in str(info.value)


def test_task_index_out_of_range():
    cluster = ClusterSpec({"worker": 4})
    with pytest.raises(TaskIndexError, match=literal(
            "task index 7 out of range for job 'worker': the cluster has worker:0..worker:3")):
        cluster.task_address("worker", 7)
    with pytest.raises(TaskIndexError, match=literal("worker:1, worker:3")):
        ClusterSpec({"worker": {1: "a:1", 3: "b:1"}}).task_address("worker", 2)
    with pytest.raises(InvalidArgumentError, match=literal("'1'")):
        cluster.task_address("worker", "1")


def test_unknown_task():
    cluster = ClusterSpec({"chief": 1, "worker": 4, "ps": 2})
    with pytest.raises(UnknownTaskError, match=literal("'worker:9'")) as info:
        cluster.task("worker:9")
    assert "chief:0, worker:0..worker:3, ps:0..ps:1" in str(info.value)
    with pytest.raises(UnknownTaskError, match=literal("'evaluator:0'")):
        cluster.task_order(TaskId("evaluator", 0))
    with pytest.raises(InvalidArgumentError, match=literal("'worker-1'")):
        cluster.task("worker-1")


def test_unknown_task_abbreviates_long_lists():
    cluster = ClusterSpec({"worker": {i: f"w{i}:1" for i in range(0, 40, 2)}})
    with pytest.raises(UnknownTaskError, match=literal("'worker:1'")) as info:
        cluster.task("worker:1")
    message = str(info.value)
    assert "more" in message and "worker:38" in message and "worker:20" not in message


# ------------------------------------------------------------------------------ chief rule


def test_chief_rule():
    assert chief_task(ClusterSpec({"chief": 1, "worker": 2, "ps": 1})) == TaskId("chief", 0)
    assert chief_task(ClusterSpec({"master": 1, "worker": 2, "ps": 1})) == TaskId("master", 0)
    assert chief_task(ClusterSpec({"worker": 3})) == TaskId("worker", 0)


def test_chief_rule_errors():
    with pytest.raises(ClusterSpecError, match=literal("'ps'")):
        chief_task(ClusterSpec({"ps": 2}))
    with pytest.raises(ClusterSpecError, match=literal("job 'chief' has 2 tasks")):
        chief_task(ClusterSpec({"chief": 2, "worker": 1}))
    with pytest.raises(ClusterSpecError, match="no chief"):
        chief_task(ClusterSpec({"worker": {1: "a:1"}}))


# ------------------------------------------------------------------------------- TF_CONFIG


def test_tf_config_parse_and_round_trip():
    text = json.dumps({"cluster": {"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"],
                                   "ps": ["p0:2222"]},
                       "task": {"type": "worker", "index": 1}})
    config = TFConfig.from_json(text)
    assert config.task == TaskId("worker", 1)
    assert config.cluster.num_tasks("worker") == 2
    assert not config.is_chief
    assert config.rpc_layer is None and config.environment is None
    assert TFConfig.from_json(config.to_json()) == config
    assert json.loads(config.to_json()) == json.loads(text)


def test_tf_config_to_json_is_deterministic():
    a = TFConfig(ClusterSpec({"worker": 2, "chief": 1}), "chief", 0, rpc_layer="grpc")
    b = TFConfig({"chief": 1, "worker": 2}, "chief", 0, rpc_layer="grpc")
    assert a == b and a.to_json() == b.to_json()
    assert a.to_json().startswith('{"cluster": {"chief": ["localhost:2222"]')
    assert a.is_chief


def test_tf_config_tfjob_master_form_and_cloud_environment():
    text = json.dumps({"cluster": {"master": ["m:2222"], "worker": ["w0:2222"], "ps": ["p:2222"]},
                       "task": {"type": "master", "index": 0}, "environment": "cloud"})
    config = TFConfig.from_json(text)
    assert config.is_chief
    assert config.environment == "cloud"
    assert json.loads(config.to_json())["environment"] == "cloud"
    assert TFConfig.from_json(config.to_json()) == config
    worker = TFConfig(config.cluster, "worker", 0)
    assert not worker.is_chief


def test_tf_config_without_task_and_sparse_round_trip():
    config = TFConfig.from_json('{"cluster": {"worker": {"1": "a:1", "3": "b:1"}}}')
    assert config.task_type is None and config.task_id is None
    assert TFConfig.from_json(config.to_json()) == config
    with pytest.raises(TFConfigError, match="no 'task'"):
        config.task


def test_tf_config_from_env():
    text = '{"cluster": {"worker": 2}, "task": {"type": "worker", "index": 0}}'
    assert TFConfig.from_env({"TF_CONFIG": text}).is_chief
    with pytest.raises(TFConfigError, match="TF_CONFIG is not set"):
        TFConfig.from_env({})


@pytest.mark.parametrize("text, shown", [
    ('{"cluster": {"worker": 2}', "'{\"cluster\": {\"worker\": 2}'"),
    ("not json", "'not json'"),
    ("[1, 2]", "'[1, 2]'"),
    ('{"cluster": {"worker": 2}, "task": {"type": "worker", "index": "x"}}', "'x'"),
    ('{"cluster": {"worker": 2}, "task": {"index": 0}}', "no 'type'"),
    ('{"cluster": {"worker": 2}, "task": {"type": "worker"}}', "no 'index'"),
    ('{"cluster": {"worker": 2}, "task": {"type": "worker", "index": true}}', "True"),
    ('{"cluster": {"worker": 2}, "task": {"type": "worker", "index": 1.0}}', "1.0"),
    ('{"cluster": {"worker": 2}, "task": "worker:0"}', "'worker:0'"),
    ('{"cluster": {"worker": 2}, "task": {"type": 3, "index": 0}}', "3"),
    ('{"cluster": {"worker": 2}, "environment": 5}', "5"),
])
def test_bad_tf_config(text, shown):
    with pytest.raises(TFConfigError, match=literal(shown)):
        TFConfig.from_json(text)


def test_bad_tf_config_json_error_position_and_truncation():
    text = '{"cluster": {"worker": ["' + "x" * 200 + '"]} oops'
    with pytest.raises(TFConfigError, match="line 1 column") as info:
        TFConfig.from_json(text)
    assert text[:80] in str(info.value) and text[:120] not in str(info.value)


def test_tf_config_unknown_task_type_and_index():
    with pytest.raises(UnknownTaskTypeError, match=literal("'evaluator'")) as info:
        TFConfig.from_json('{"cluster": {"worker": 2, "ps": 1}, '
                           '"task": {"type": "evaluator", "index": 0}}')
    assert "worker, ps" in str(info.value)
    with pytest.raises(TaskIndexError, match=literal("task index 5 out of range for job 'worker'")):
        TFConfig.from_json('{"cluster": {"worker": 2}, "task": {"type": "worker", "index": 5}}')
    with pytest.raises(ClusterSpecError, match=literal("'9worker'")):
        TFConfig.from_json('{"cluster": {"9worker": 2}}')
    with pytest.raises(TFConfigError, match="both or neither"):
        TFConfig(ClusterSpec({"worker": 1}), "worker", None)


def test_cluster_spec_as_tf_empty_jobs_and_truth():
    empty = ClusterSpec({})
    assert not empty and repr(empty) == "ClusterSpec({})" and empty.as_dict() == {}
    idle = ClusterSpec({"worker": [], "ps": ["p:1"]})
    assert idle and idle.as_dict() == {"worker": {}, "ps": ["p:1"]}
    assert idle.num_tasks("worker") == 0 and idle.job_tasks("worker") == []
    assert [t.name for t in idle.tasks()] == ["ps:0"]
    assert ClusterSpec({"Worker": ["w:1"]}).jobs == ["Worker"]


def test_tf_config_read_as_tf_does():
    config = TFConfig.from_json('{"cluster": {"worker": ["a:1", "b:1"]}, '
                                '"task": {"type": "worker", "index": "1"}}')
    assert config.task == TaskId("worker", 1)  # TF reads the index with int()
    local = TFConfig.from_json('{"task": {"type": "worker", "index": 0}}')
    assert not local.cluster and local.task == TaskId("worker", 0)  # a local task
    assert not TFConfig.from_json("{}").cluster


@pytest.mark.parametrize("cluster, task, chief", [
    ({"chief": ["c:1"], "worker": ["w:1"], "evaluator": ["e:1"]}, ("evaluator", 0), True),
    ({"worker": ["w:1", "w:2"], "evaluator": ["e:1"]}, ("evaluator", 0), True),
    ({"worker": ["w:1", "w:2"], "evaluator": ["e:1"]}, ("worker", 0), True),
    ({"chief": ["c:1"], "worker": ["w:1"]}, ("worker", 0), False),
    ({"worker": ["w:1"], "ps": ["p:1", "p:2"]}, ("ps", 0), False),
    ({"ps": ["p:1", "p:2"]}, ("ps", 0), False),
])
def test_chief_rule_as_multi_worker_util_is_chief(cluster, task, chief):
    assert TFConfig(cluster, *task).is_chief is chief


@pytest.mark.parametrize("text", [
    '{"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}}',
    '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}',
    '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}}',
    '{"cluster": {"worker": ["a:1"]}, "task": "worker:0"}',
    '{"cluster": {"worker": ["a:1"]}, "rpc_layer": 5}',
    '{"cluster": {"worker-a": ["a:1"]}}',
    '[1, 2]',
])
def test_tf_config_tf_accepts_and_simdist_refuses_says_so(text):
    with pytest.raises(ValueError, match="TensorFlow accepts this; simdist does not"):
        TFConfig.from_json(text)


def test_tf_config_for_all_tasks():
    cluster = ClusterSpec({"chief": 1, "worker": 2, "ps": 1})
    configs = tf_config_for_all_tasks(cluster)
    assert list(configs) == ["chief:0", "worker:0", "worker:1", "ps:0"]
    parsed = {name: TFConfig.from_json(text) for name, text in configs.items()}
    for name, config in parsed.items():
        assert config.task.name == name
        assert config.cluster == cluster
    assert len({json.dumps(json.loads(t)["cluster"]) for t in configs.values()}) == 1
    assert [name for name, c in parsed.items() if c.is_chief] == ["chief:0"]
    assert tf_config_for_all_tasks({"worker": 2}) == tf_config_for_all_tasks(
        ClusterSpec({"worker": 2}))


# ----------------------------------------------------------------------------- task_to_rank


@pytest.mark.parametrize("num_tasks, num_ranks, expected", [
    (1, 1, [0]),
    (4, 1, [0, 0, 0, 0]),
    (4, 4, [0, 1, 2, 3]),
    (5, 2, [0, 0, 0, 1, 1]),
    (7, 3, [0, 0, 0, 1, 1, 2, 2]),
    (8, 4, [0, 0, 1, 1, 2, 2, 3, 3]),
    (6, 4, [0, 0, 1, 1, 2, 3]),
])
def test_task_to_rank(num_tasks, num_ranks, expected):
    assert task_to_rank(num_tasks, num_ranks) == expected


def test_task_to_rank_errors():
    with pytest.raises(InvalidArgumentError, match=literal(
            "mpiexec -n 8 is larger than the number of simulated tasks (4): every MPI rank "
            "needs at least one task; use -n 4 or fewer")):
        task_to_rank(4, 8)
    with pytest.raises(InvalidArgumentError, match="ranks 0"):
        task_to_rank(4, 0)
    with pytest.raises(InvalidArgumentError, match="tasks 0"):
        task_to_rank(0, 1)
    with pytest.raises(InvalidArgumentError, match=literal("'2'")):
        task_to_rank(4, "2")
