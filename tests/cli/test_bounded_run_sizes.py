"""Sizes that would run a machine out of memory or time are refused up front, in one line
naming the value, the cap and the estimate (issue 30, item 5): simdist run data_parallel's
--pieces, token_ring's --tasks, bench allreduce's --sizes; sensible sizes still run."""

import pytest

from simdist.base.checks import MAX_RUN_BYTES, check_footprint
from simdist.base.errors import ResourceExhaustedError
from simdist.commands.cli import main


def _error(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_data_parallel_counts_its_pieces_in_the_events_it_refuses(capsys):
    err = _error(capsys, "run", "data_parallel", "--pieces", "1000000")
    assert "--pieces 1000000" in err and "--max-events 10,000,000" in err
    assert "1,120,000,480 events" in err or "events, more than" in err


def test_pieces_whose_messages_in_flight_do_not_fit_are_refused_whatever_the_limits(capsys):
    err = _error(capsys, "run", "data_parallel", "--pieces", "1000000", "--max-events",
                 "100000000000")
    assert err == ("simdist: error: --pieces 1,000,000 on 8 tasks: about 22.9 GiB of memory "
                   "(about 3 KiB per piece, every task's pieces in flight at once), more "
                   "than DistLab's cap of 3 GiB for one run (it keeps a run inside a 4 GiB "
                   "machine): give fewer --pieces")
    assert "--pieces 300,000 on 4 tasks" in _error(capsys, "run", "allreduce", "--phantom",
                                                   "--pieces", "300000")


def test_data_parallel_with_a_few_pieces_still_runs(capsys):
    assert main(["run", "data_parallel", "--workers", "4", "--steps", "2", "--pieces", "4",
                 "--quiet"]) == 0


def test_token_ring_refuses_tasks_whose_tokens_do_not_fit(capsys):
    err = _error(capsys, "run", "token_ring", "--tasks", "1000")  # 8 MiB tokens: 16 GiB
    assert "--tasks 1,000 with --large-bytes 8,388,608" in err
    assert "about 15.6 GiB of memory" in err and "cap of 3 GiB" in err
    assert "--tasks 100,000" in _error(capsys, "run", "token_ring", "--tasks", "100000")


def test_token_ring_s_estimate_keeps_sensible_sizes():
    from argparse import Namespace

    from simdist.training.programs.token_ring import memory, setup

    default = Namespace(tasks=4, tasks_per_machine=2, rounds=2, small_bytes=8,
                        large_bytes=8 << 20)
    setup(default)
    assert memory(Namespace(**{**vars(default), "tasks": 128})) < MAX_RUN_BYTES
    setup(Namespace(**{**vars(default), "tasks": 20_000, "large_bytes": 8}))


def test_bench_allreduce_refuses_4_gib_before_it_launches_mpiexec(capsys):
    err = _error(capsys, "bench", "allreduce", "--sizes", "4GiB")
    assert "--sizes 4.0 GiB on 2 rank(s)" in err and "48 GiB" in err
    assert "launching mpiexec" not in capsys.readouterr().out


def test_bench_allreduce_keeps_its_default_sizes_and_256_mib():
    from simdist.commands.bench.allreduce import DEFAULT_SIZES, check_memory

    check_memory(list(DEFAULT_SIZES), 8)
    check_memory([256 << 20], 2)
    with pytest.raises(ResourceExhaustedError, match="give smaller sizes or fewer ranks"):
        check_memory([256 << 20], 3)


def test_check_footprint_names_the_value_the_estimate_and_the_cap():
    check_footprint(MAX_RUN_BYTES, "--x 1", "how", "fix")
    with pytest.raises(ResourceExhaustedError) as info:
        check_footprint(MAX_RUN_BYTES + 1, "--x 2", "x copies", "give less")
    assert str(info.value) == ("--x 2: about 3 GiB of memory (x copies), more than DistLab's "
                               "cap of 3 GiB for one run (it keeps a run inside a 4 GiB "
                               "machine): give less")
