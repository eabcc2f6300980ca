"""``simdist bench mpi``: the table of one small workload in one process and over two ranks,
and the transport's counters that fill its breakdown (which must not change a trace)."""

import json
import re

import pytest

from simdist.commands.bench import mpi
from simdist.commands.cli import main as simdist_main
from simdist.sim.transports import STATS_ENV, ReportSlots

from tests.conftest import mpi_simdist

pytestmark = pytest.mark.mpi


@pytest.mark.timeout(300)
def test_quick_table_has_both_rank_counts_a_ratio_and_a_breakdown(capsys, tmp_path):
    out = tmp_path / "mpi.txt"
    assert simdist_main(["bench", "mpi", "--quick", "--workloads", "ring-numpy", "-o",
                         str(out)]) == 0
    text = capsys.readouterr().out
    assert "[1/2] ring-numpy, 1 rank(s), run 1:" in text  # a progress line per run
    assert "[2/2] ring-numpy, 2 rank(s), run 1:" in text
    table = out.read_text()
    assert table in text and "speed-up" in table
    one = re.search(r"^ring-numpy\s+1\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+1\.00x", table, re.M)
    two = re.search(r"^ring-numpy\s+2\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x", table,
                    re.M)
    assert one and two, table
    assert float(two.group(4)) > 0
    if float(two.group(4)) < 1.0:  # a slower row says why
        assert "slower than one process: " in table
    assert re.search(r"r0 [\d./]+ \[[\d., ]+\], r1 [\d./]+ \[[\d., ]+\]; 22 win", table)


def test_bad_ranks_and_workloads_are_one_line_errors(capsys):
    with pytest.raises(SystemExit):
        mpi.main(["--ranks", "2,4"])
    assert "expected distinct counts starting with 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mpi.main(["--workloads", "nope"])
    assert "unknown 'nope'" in capsys.readouterr().err


@pytest.mark.timeout(200)
def test_counting_leaves_the_trace_as_it_is(tmp_path, monkeypatch):
    args = ["run", "token_ring", "--large-bytes", "1048576", "--seed", "3", "--quiet"]
    assert simdist_main([*args, "--trace", str(tmp_path / "plain.json")]) == 0
    monkeypatch.setenv(STATS_ENV, str(tmp_path / "stats"))
    mpi_simdist(2, [*args, "--trace", str(tmp_path / "counted.json")])
    assert (tmp_path / "counted.json").read_bytes() == (tmp_path / "plain.json").read_bytes()
    stats = [json.loads((tmp_path / f"stats.rank{r}.json").read_text()) for r in (0, 1)]
    assert [s["rank"] for s in stats] == [0, 1] and stats[0]["windows"] == stats[1]["windows"]
    assert stats[0]["payload_bytes"] + stats[1]["payload_bytes"] > 1048576  # apart, by Isend
    for s in stats:
        assert s["total_s"] >= s["wait_s"] + s["exchange_s"] + s["serialize_s"]


def test_report_slots_grow_to_fit_and_shrink_after_small_windows():
    slots = ReportSlots()
    slots.resize(40_000)
    assert slots.slot == 65536
    slots.resize(5_000_000)
    assert slots.slot == ReportSlots.LARGEST  # larger reports take a second round
    for _ in range(ReportSlots.SHRINK_AFTER):
        slots.resize(100)
    assert slots.slot == ReportSlots.LARGEST // 4


def _stats(events, cpu_s=1.0, wait_s=0.1, windows=100):
    return {"events": events, "cpu_s": cpu_s, "wait_s": wait_s, "windows": windows}


def test_a_slower_row_names_uneven_work_before_repeated_work():
    # rank 1 ran two thirds of the events: a parameter server at the end of the task order
    uneven = mpi.Run(2, 3.0, 2.0, [_stats(10_000), _stats(20_000)], None)
    reason = mpi.slower_reason(uneven, one_cpu=1.0, one_s=1.5)
    assert reason.startswith("uneven work: rank 1 ran 67% of the events where an even share "
                             "is 50%")
    # even events, each rank as busy as one process: repeated work
    repeated = mpi.Run(2, 3.0, 2.0, [_stats(15_000), _stats(15_000)], None)
    assert mpi.slower_reason(repeated, one_cpu=1.0, one_s=1.5).startswith(
        "the work does not split: the busiest rank used 100%")
    # even and light: ranks wait at the windows' ends, few events a window
    waiting = mpi.Run(2, 3.0, 2.0, [_stats(2_000, 0.3, 1.0), _stats(2_000, 0.3, 0.8)], None)
    reason = mpi.slower_reason(waiting, one_cpu=1.0, one_s=1.5)
    assert reason.startswith("waiting at window ends: 50% of the run, over 100 windows")
    assert "latency-bound: 20.0 events per window and rank" in reason
