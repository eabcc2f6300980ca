"""The run report's placement lines under mpiexec (issue 26, deliverable 3): tasks and
machines per rank, the window (lookahead) and the links that cross ranks, the windows and
events, and a one-line warning, with its figure, when ranks cannot help. The lines go to
stderr (stdout keeps what one process prints), never into the trace."""

import io

import pytest

from simdist.commands.cli import main as simdist_main
from simdist.commands.placement import (LATENCY_BOUND_EVENTS, placement, print_report,
                                        report_lines, warnings)
from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.sim.rank_report import WindowTally

from tests.conftest import mpi_simdist


def _hardware(tasks_per_machine: int) -> Hardware:
    return Hardware.from_catalog(HardwareCatalog.default(), "cpu",
                                 Layout(tasks_per_machine=tasks_per_machine))


def test_whole_machines_on_each_rank_leave_only_the_network_crossing_ranks():
    hw = _hardware(4)
    p = placement(16, 2, hw)
    assert (p.tasks_per_rank, p.machines_per_rank, p.machines, p.split) == \
        ([8, 8], [2, 2], 4, [])
    assert p.window_ns == hw.intra_link.latency_ns  # the smallest link sets the window
    assert p.window_link == f"{hw.intra_link.name} inside a machine"
    assert p.crossing == [f"{hw.network.name} between machines"]


def test_a_machine_split_over_ranks_is_named_and_its_link_crosses_ranks():
    hw = _hardware(4)
    p = placement(8, 3, hw)  # 3, 3, 2 tasks: machine 0 on ranks 0-1, machine 1 on ranks 1-2
    assert (p.tasks_per_rank, p.machines_per_rank, p.split) == ([3, 3, 2], [1, 2, 1], [0, 1])
    assert p.crossing == [f"{hw.network.name} between machines",
                          f"{hw.intra_link.name} inside a machine"]
    first = report_lines(p, 0, [])[0]
    assert first == ("placement: 8 tasks on 3 rank(s), 2 to 3 a rank; 2 machine(s) of 4 "
                     "task(s), 1 to 2 a rank, 2 split over ranks (machines 0, 1)")


def test_one_rank_crosses_nothing_and_one_task_a_machine_has_the_network_window():
    hw = _hardware(1)
    p = placement(4, 1, hw)
    assert p.crossing == [] and p.window_ns == hw.network.latency_ns
    assert "crossing ranks: nothing" in report_lines(p, 10, [400])[1]


def test_few_events_a_window_and_rank_is_latency_bound_with_its_figure():
    p = placement(4, 2, _hardware(1))
    lines = warnings(p, 51, [23, 27])
    assert len(lines) == 1
    assert lines[0].startswith(
        "latency-bound: 0.5 events per window per rank (50 events in 51 windows of 10.0 µs on "
        f"2 rank(s); under {LATENCY_BOUND_EVENTS})")


def test_one_busy_rank_is_imbalanced_with_the_speed_up_it_allows():
    p = placement(4, 2, _hardware(1))
    lines = warnings(p, 10, [2000, 8000])  # 500 events a window and rank: not latency-bound
    assert lines == ["imbalanced: rank 1 ran 80% of the events (8000 of 10000, holding 2 of 4 "
                     "tasks): 2 ranks can be at most 1.25x faster than one process"]


def test_enough_balanced_work_gives_no_warning_and_the_report_says_the_figures():
    p = placement(64, 2, _hardware(1))
    tally = WindowTally()
    tally.windows, tally.events = 10, [4000, 4200]
    err = io.StringIO()
    print_report(p, tally, err)
    assert "warning" not in err.getvalue()
    assert err.getvalue().splitlines()[-1] == (
        "simdist: windows: 10, 8200 events: 820.0 a window, 410.0 a window and rank; the "
        "busiest rank, 1, ran 51% of them")


class _Report:
    def __init__(self, now, events):
        self.now, self.events = now, events


def test_the_tally_counts_window_reports_only_and_sums_the_simulations_of_a_process():
    tally = WindowTally()
    tally.add([_Report(0, 2), _Report(0, 3)])
    tally.add([{"not": "a window"}, {}])  # another all-gather: not a window
    tally.add([_Report(50, 10), _Report(50, 12)])
    tally.add([_Report(0, 1), _Report(0, 1)])  # a new simulation: its clock starts again
    assert (tally.windows, tally.events) == (3, [11, 13])


def check_placement_report(proc, ranks: int) -> None:
    """``simdist run token_ring``'s placement lines at ``ranks`` ranks (also run by
    tests/sim/test_hostfile.py, at two ranks through a hostfile)."""
    assert "placement" not in proc.stdout  # stdout: what one process prints
    assert f"simdist: placement: 4 tasks on {ranks} rank(s), {4 // ranks} a rank; 2 " \
        f"machine(s) of 2 task(s), {2 // ranks} a rank, none split" in proc.stderr
    crossing = "nothing" if ranks == 1 else "10gbe between machines"
    assert "simdist: window (lookahead): 500 ns, the smallest link latency (shm inside a " \
        f"machine); crossing ranks: {crossing}" in proc.stderr
    assert "simdist: windows: 54, 50 events:" in proc.stderr  # the same at any rank count
    warning = [line for line in proc.stderr.splitlines() if "latency-bound" in line]
    assert len(warning) == 1 and warning[0].startswith(
        f"simdist: warning: latency-bound: {50 / 54 / ranks:.1f} events per window per rank")


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_mpiexec_run_reports_placement_and_keeps_the_trace(tmp_path):
    """One rank here; two in tests/sim/test_hostfile.py (one mpiexec job fewer)."""
    args = ["run", "token_ring", "--seed", "3", "--quiet"]
    assert simdist_main([*args, "--trace", str(tmp_path / "one.json")]) == 0
    proc = mpi_simdist(1, [*args, "--trace", str(tmp_path / "mpi.json")])
    assert (tmp_path / "mpi.json").read_bytes() == (tmp_path / "one.json").read_bytes()
    check_placement_report(proc, 1)
