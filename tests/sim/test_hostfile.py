"""Across machines (issue 26, deliverable 4), on the loopback: a job whose hostfile names
localhost twice runs as any other (the trace the same as in one process, the run report's
placement lines those of two ranks), and a job whose ranks run other versions is refused
in one line naming the rank and the versions. What two real hosts add (Open MPI's remote
launch, a network between the ranks) is in docs/guides/simulator.md's 'Across machines'."""

from importlib import metadata

import pytest

from simdist.commands.cli import main as simdist_main
from simdist.sim.launcher import run_mpi
from simdist.sim.rank_report import RankVersions, local_versions, version_mismatch

from tests.conftest import ROOT
from tests.sim.test_mpi_placement import check_placement_report


def test_the_versions_name_nothing_machine_specific():
    mine = local_versions("4.1.2", "Open MPI v5.0.11, package: Open MPI\nmore")
    assert mine.mpi == "Open MPI v5.0.11, package: Open MPI" and len(mine.source) == 12
    text = repr(mine)
    for specific in (str(ROOT), "/tmp", "localhost"):
        assert specific not in text


def test_a_rank_with_other_versions_is_named_with_both_versions():
    same = RankVersions("CPython 3.11.7", "0.1.0", "abc", "2.1.0", "4.1.2", "Open MPI v5")
    assert version_mismatch([same, same]) is None
    line = version_mismatch([same, same, same._replace(python="CPython 3.10.2"),
                             same._replace(numpy="1.26.4")])
    assert line.startswith("MPI rank 2 runs other versions than rank 0 (and 1 more rank(s)): "
                           "Python 'CPython 3.10.2' (rank 0: 'CPython 3.11.7'). Every host")
    assert "\n" not in line


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_a_hostfile_naming_localhost_twice_runs_the_same_trace(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost\nlocalhost\n")  # a slot on each line
    args = ["run", "token_ring", "--seed", "3", "--quiet"]
    assert simdist_main([*args, "--trace", str(tmp_path / "one.json")]) == 0
    proc = run_mpi(2, ["-m", "simdist", *args, "--trace", str(tmp_path / "two.json")],
                   timeout=150, cwd=ROOT, mpiexec_args=["--hostfile", str(hostfile)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--hostfile" in proc.args and "mpi, 2 rank(s)" in proc.stdout
    assert (tmp_path / "two.json").read_bytes() == (tmp_path / "one.json").read_bytes()
    check_placement_report(proc, 2)  # the run report's placement lines at two ranks


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_ranks_with_other_versions_are_refused_in_one_line(tmp_path):
    program = tmp_path / "other_version.py"
    program.write_text(
        "import sys\n"
        "from simdist.sim import rank_report\n"
        "from simdist.sim.launcher import mpiexec_world\n"
        "if mpiexec_world()[0] == 1:  # this rank runs another release\n"
        "    real = rank_report.local_versions\n"
        "    rank_report.local_versions = lambda *a: real(*a)._replace(distlab='0.0.9')\n"
        "from simdist.commands.cli import main\n"
        "sys.exit(main(['run', 'token_ring', '--quiet']))\n")
    proc = run_mpi(2, [str(program)], timeout=150, cwd=ROOT)
    assert proc.returncode != 0 and "simdist: token_ring" not in proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("simdist: error:")]
    ours = metadata.version("distlab")
    assert errors == ["simdist: error: MPI rank 1 runs other versions than rank 0: DistLab "
                      f"'0.0.9' (rank 0: {ours!r}). Every host of a job needs the same "
                      "Python, DistLab and simdist source, numpy, mpi4py and MPI "
                      "(docs/guides/simulator.md, 'Across machines')"]
    assert "Traceback" not in proc.stderr and "MPI_ABORT" not in proc.stderr
