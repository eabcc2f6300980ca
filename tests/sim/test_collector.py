"""A run pauses Python's cyclic collector and, when it resumes it, hands what the run
allocated to the oldest generation (``scheduler._collector_paused``) without touching what
a program froze itself, and leaves the collector as it found it."""

import gc

import pytest

from simdist.sim.scheduler import simulate


def ring(ctx):
    yield ctx.timeout(10)
    ctx.send((ctx.order + 1) % ctx.num_tasks, 0)
    yield ctx.recv(tag=0)


def many_rounds(ctx):
    for _ in range(200):
        yield from ring(ctx)


def test_no_collection_walks_what_a_run_allocated_as_it_ends():
    collections = []

    def seen(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        result = simulate({"worker": 8}, many_rounds)  # thousands of objects, the trace's
        _ = [[] for _ in range(100)]  # the allocations that would set a collection off
    finally:
        gc.callbacks.remove(seen)
    assert len(result.trace.spans) > 1000
    assert collections == [] and gc.isenabled() and gc.get_freeze_count() == 0


def test_a_run_keeps_the_programs_own_frozen_objects_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        simulate({"worker": 4}, ring)
        # (some frozen objects may be freed meanwhile; unfrozen, none would be left)
        assert 0.9 * frozen < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_a_run_leaves_a_paused_collector_paused():
    gc.disable()
    try:
        simulate({"worker": 4}, ring)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.fixture(autouse=True)
def _collector_on():
    yield
    assert gc.isenabled()
