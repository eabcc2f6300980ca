"""Lesson 12, exercise 3 under mpiexec (sidecar_mpi.py): the chief, the workers, the ps and
the side-car evaluator spread over 1, 2 and 4 MPI ranks; the reference passes with the same
checkpoints as in one process, and a wrong list is reported once, from rank 0, with its hint
(the stub: test_lesson_mpi_stubs.py)."""

from pathlib import Path

import pytest

from tests.conftest import lesson_mpi

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(150)]

SIDECAR_MPI = Path("lessons") / "12_evaluation" / "sidecar_mpi.py"
VISIBLE = ("  the evaluator could see: ckpt-0 at 0.521 ms, ckpt-1 at 1.009 ms, ckpt-2 at 1.498 "
           "ms, ckpt-3 at 1.986 ms")


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_sidecar_mpi_passes_with_the_solution(ranks):
    proc = lesson_mpi(SIDECAR_MPI, ranks, "--solution")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"a chief, 2 workers, a ps and the evaluator over {ranks} MPI rank(s)" in proc.stdout
    assert VISIBLE in proc.stdout, proc.stdout  # the same times on any number of ranks
    assert ("✓ the checkpoints the side-car evaluates: it evaluates ckpt-0, ckpt-1, ckpt-3, "
            "ckpt-4, ckpt-6, ckpt-7, ckpt-8, ckpt-9 and skips ckpt-2, ckpt-5") in proc.stdout
    if ranks == 4:  # the evaluator on a rank of its own: the checkpoints are MPI messages
        assert ("(chief:0 on rank 0, worker:0 on rank 0, worker:1 on rank 1, ps:0 on rank 2, "
                "evaluator:0 on rank 3)") in proc.stdout, proc.stdout


def test_sidecar_mpi_reports_the_save_begin_times_from_rank_0(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text("def predict_sidecar():\n    return ['ckpt-0', 'ckpt-1', 'ckpt-3', "
                    "'ckpt-4', 'ckpt-6', 'ckpt-7', 'ckpt-9']\n")
    proc = lesson_mpi(SIDECAR_MPI, 4, "--file", str(mine))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("  ✗ predict_sidecar returned ['ckpt-0', 'ckpt-1', 'ckpt-3', 'ckpt-4', 'ckpt-6', "
            "'ckpt-7', 'ckpt-9']: it leaves out ['ckpt-8'], which it evaluates\n      hint: a "
            "checkpoint counts once its save is complete") in proc.stdout, proc.stdout
