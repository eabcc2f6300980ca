"""Flow fidelity accounts each NIC's busy time as message mode does (issue 30, item 9: it
reported every NIC 0.0 s busy): each member's bytes of each phase at the speed it ran."""

import pytest

from simdist.commands.cli import main


UNITS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3}


def _nic_busy(capsys, *extra):
    """Each NIC's busy time (ms) and busy %."""
    assert main(["run", "data_parallel", "--steps", "3", *extra]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if line.startswith("machine:") and " NIC " in line]
    assert len(rows) == 4
    return [float(row[2]) * UNITS[row[3]] for row in rows], [float(row[6]) for row in rows]


@pytest.mark.parametrize("extra", [
    ["--workers", "4"],
    ["--workers", "8", "--algorithm", "hierarchical", "--tasks-per-machine", "2"],
    ["--workers", "4", "--algorithm", "recursive-doubling"],
    ["--workers", "8", "--tasks-per-machine", "2"]])
def test_flow_mode_nics_are_as_busy_as_message_mode_s(capsys, extra):
    message, _ = _nic_busy(capsys, *extra)
    flow, percent = _nic_busy(capsys, "--fidelity", "flow", *extra)
    assert min(percent) > 10
    assert flow == pytest.approx(message, rel=0.01)
