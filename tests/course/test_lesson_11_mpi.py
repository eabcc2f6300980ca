"""Lesson 11, exercise 1 under mpiexec (slice_mpi.py): a v3-32's 4 hosts spread over 1, 2 and
4 MPI ranks; the reference formula passes on every host, and a wrong formula is reported
once, from rank 0, with its hint (the stub: test_lesson_mpi_stubs.py)."""

from pathlib import Path

import pytest

from tests.conftest import lesson_mpi

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(150)]

SLICE_MPI = Path("lessons") / "11_tpu" / "slice_mpi.py"


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_slice_mpi_passes_with_the_solution(ranks):
    proc = lesson_mpi(SLICE_MPI, ranks, "--solution")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (f"a v3-32 (4x4 chips, 4 hosts of 8 cores) over {ranks} MPI rank(s)"
            in proc.stdout), proc.stdout
    for host in range(4):  # every host's cores sent the same, whichever rank ran it
        assert (f"  worker:{host}: core 0 all-reduced 76,840 B (230,520 B over ICI per "
                "chip), 4 B (12 B over ICI per chip)") in proc.stdout, proc.stdout
    assert ("✓ each chip's ICI bytes in the slice's all-reduce: right to the byte on every "
            "host of the 4x4 torus") in proc.stdout
    if ranks == 4:
        assert ("(worker:0 on rank 0, worker:1 on rank 1, worker:2 on rank 2, worker:3 on "
                "rank 3)") in proc.stdout


def test_slice_mpi_reports_a_single_ring_from_rank_0(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text("import math\n\n\ndef ici_bytes_per_chip(x, y, nbytes):\n"
                    "    p = x * y\n    return 2 * (p - 1) * math.ceil(nbytes / p)\n")
    proc = lesson_mpi(SLICE_MPI, 2, "--file", str(mine))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("  ✗ ici_bytes_per_chip(4, 4, 76840) returned 144,090; each chip of the simulated "
            "4x4 slice sent 230,520 bytes over ICI\n      hint: the torus does not run one ring "
            "through every chip") in proc.stdout, proc.stdout
