"""The MPI watchdog names the rank the others wait for, never a healthy one beside it (issue
30, item 9): a rank that went on ahead (a gather's sender now in a barrier, a rank done with
its run) is waiting or done, not silent."""

import pytest

from simdist.sim.launcher import run_mpi
from simdist.sim.watchdog import DONE, WAITING, WORKING, silent_ranks

# rank 2 stops between two exchanges; rank 1 sends its part of the gather at once and waits
# in the barrier after it, while rank 0 waits in the gather for rank 2
SCRIPT = """\
import os, signal
from simdist.sim.transports import MPITransport
t = MPITransport(watchdog_s=2)
t.allgather(t.rank)
if t.rank == 2:
    os.kill(os.getpid(), signal.SIGSTOP)
t.gather(t.rank)
t.barrier()
"""


def test_the_rank_at_work_is_named_not_those_ahead_or_done():
    # rank 0 waits at exchange 2, rank 1 went ahead to exchange 3, rank 2 works at 1
    assert silent_ranks([(2, WAITING), (3, WAITING), (1, WORKING)]) == [2]
    assert silent_ranks([(2, WAITING), (2, DONE), (1, WORKING), (2, WAITING)]) == [2]
    # every rank waits (one stopped inside MPI): the one behind, else nobody in particular
    assert silent_ranks([(5, WAITING), (4, WAITING), (5, WAITING)]) == [1]
    assert silent_ranks([(5, WAITING), (5, WAITING)]) == []


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_stopped_rank_is_named_alone_when_another_went_ahead(tmp_path):
    script = tmp_path / "stops.py"
    script.write_text(SCRIPT)
    proc = run_mpi(3, [str(script)], timeout=60)
    assert proc.returncode != 0
    line = next(line for line in proc.stderr.splitlines() if "stopped answering" in line)
    blamed, said = line.split(" stopped answering: ")  # (the launcher may put a NUL first)
    assert blamed.split("simdist: error: ")[-1] == "rank 2 (at exchange 1)", line
    assert " waited 2 s (--timeout) for it at exchange " in said
