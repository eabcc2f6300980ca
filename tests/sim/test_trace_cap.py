"""Bounded traces: past ``trace_max_mb`` a run keeps the complete start of its trace and says
so in one line, never gigabytes by surprise."""

import warnings

import pytest

from simdist.commands.cli import main as simdist_main
from simdist.collectives import all_reduce
from simdist.base.errors import InvalidArgumentError
from simdist.sim.payloads import Phantom
from simdist.sim.scheduler import TraceCapWarning, simulate
from simdist.trace.schema import RECORD_BYTES, TRACE_MAX_MB, max_records_per_stream


def rings(ctx):
    for _ in range(4):
        yield from all_reduce(ctx, range(8), Phantom(1 << 16), algorithm="ring")


def test_a_capped_trace_is_the_uncapped_one_before_its_cut():
    full = simulate({"worker": 8}, rings, trace_max_mb=None).trace
    with pytest.warns(TraceCapWarning, match=r"trace capped at 0.2 MB: it keeps the first "):
        capped = simulate({"worker": 8}, rings, trace_max_mb=0.2)
    cut = capped.trace_cut_ns
    assert 0 < cut < capped.end_time
    assert capped.trace.metadata["truncated"] == {"before_ns": cut, "trace_max_mb": 0.2}
    before = [s for s in full.spans if s.start < cut]
    assert capped.trace.spans == before and len(before) < len(full.spans)
    assert capped.trace.records() <= 16 * max_records_per_stream(0.2, 8)


def test_a_trace_under_its_cap_is_whole_and_quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = simulate({"worker": 8}, rings)
    assert result.trace_cut_ns is None and "truncated" not in result.trace.metadata


def test_the_cap_shares_memory_between_streams():
    assert max_records_per_stream(None, 8) is None
    assert max_records_per_stream(TRACE_MAX_MB, 1024) == TRACE_MAX_MB * 10**6 // RECORD_BYTES \
        // 2048
    with pytest.raises(InvalidArgumentError, match=r"trace_max_mb -1: expected a number"):
        max_records_per_stream(-1, 8)


def test_simdist_run_says_in_one_line_that_the_trace_was_capped(capsys, tmp_path):
    assert simdist_main(["run", "allreduce", "-p", "8", "--phantom", "--trace-max-mb", "0.02",
                         "--quiet", "--trace", str(tmp_path / "t.json")]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("simdist: warning: trace capped at 0.02 MB")


def test_trace_max_mb_must_be_a_number():
    with pytest.raises(SystemExit):
        simdist_main(["run", "allreduce", "--trace-max-mb", "lots"])
