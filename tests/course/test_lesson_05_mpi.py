"""Lesson 05, exercise 3 under mpiexec (tf_config_mpi.py): a {ps: 1, worker: 3} job whose
tasks each start their server with the learner's server_from_tf_config from their own
TF_CONFIG, over 1, 2 and 4 MPI ranks; a function that starts another task's server is
refused as TF refuses it (the port is that task's), the same at any rank count (the stub:
test_lesson_mpi_stubs.py)."""

from pathlib import Path

import pytest

from tests.conftest import lesson_mpi

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(150)]

TF_CONFIG_MPI = Path("lessons") / "05_clusters_sessions" / "tf_config_mpi.py"


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_tf_config_mpi_passes_with_the_solution(ranks):
    proc = lesson_mpi(TF_CONFIG_MPI, ranks, "--solution")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"ps:0 and 3 workers over {ranks} MPI rank(s)" in proc.stdout, proc.stdout
    for task in ("ps:0", "worker:0", "worker:1", "worker:2"):
        assert f"  {task}: started {task} at grpc://localhost:" in proc.stdout, proc.stdout
    assert ("✓ every task started its own server from its TF_CONFIG: 4 servers, each its "
            "task's; the counter reached 3 x 5 = 15") in proc.stdout, proc.stdout


@pytest.mark.parametrize("ranks", [1, 2])
def test_tf_config_mpi_refuses_another_tasks_server_at_any_rank_count(ranks, tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text("import json\n\n\ndef server_from_tf_config(tf, tf_config):\n"
                    "    c = json.loads(tf_config)\n    return tf.train.Server(tf.train."
                    "ClusterSpec(c['cluster']), job_name=c['task']['type'], task_index=0)\n")
    proc = lesson_mpi(TF_CONFIG_MPI, ranks, "--file", str(mine))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("tf_config_mpi: ✗ UnknownError: Could not start gRPC server: worker:1's process "
            "starts the server of /job:worker/task:0, whose address localhost:2322 is in use "
            "by that task's own process") in proc.stdout, proc.stdout
