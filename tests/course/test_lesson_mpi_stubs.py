"""Every lesson's mpiexec exercise fails on the lesson's own stub, as not done, in one process
and at 4 ranks: every rank stops at the stub's NotImplementedError before simulating, rank 0
alone reports it with the hint, and the job ends normally with exit code 1 (no MPI_Abort).
(2 ranks add nothing here: the stub stops each rank before any message crosses.)"""

from pathlib import Path

import pytest

from tests.conftest import lesson_mpi

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(120)]

#: each lesson's mpiexec program and the exercise it runs
PROGRAMS = {
    "05_clusters_sessions/tf_config_mpi.py": "server_from_tf_config",
    "06_queues/pipeline_mpi.py": "choose_capacity",
    "07_sync_replicas/straggler_mpi.py": "predict_applied",
    "08_replication/in_graph_mpi.py": "master_requests",
    "09_network/ps_nic_mpi.py": "choose_ps_for_float16",
    "10_parameter_server_strategy/coordinator_mpi.py": "register_functions",
    "11_tpu/slice_mpi.py": "ici_bytes_per_chip",
    "12_evaluation/sidecar_mpi.py": "predict_sidecar",
    "13_failures/restart_mpi.py": "predict_restart_epoch",
    "14_speedups/grouped_mpi.py": "predict_grouped",
    "15_capstone/choose_mpi.py": "choose_and_predict",
}


@pytest.mark.parametrize("ranks", [1, 4])
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_the_mpiexec_exercise_fails_on_the_stub_as_not_done(program, ranks):
    path = Path("lessons") / program
    proc = lesson_mpi(path, ranks)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (f"{path.stem}: ✗ not done yet: exercise {PROGRAMS[program]}\nhint: replace the "
            "`raise NotImplementedError`") in proc.stdout, proc.stdout
