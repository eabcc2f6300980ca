"""simdist's ClusterCoordinator: schedule / RemoteValue / join / done, per-worker datasets,
the coordinator's overhead (steps_per_execution pays), the hot variable, and failures as TF
documents them (a worker's function runs again; an error cancels the rest and surfaces
once; a ps failure restores the checkpoint)."""

import numpy as np
import pytest

from simdist import simulate
from simdist.training import simulate_exercise
from simdist.distribute.cluster_coordinator import ClusterCoordinator
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
from simdist.distribute.server import InProcessCluster
from simdist.base.errors import CancelledError, InvalidArgumentError, OutOfRangeError
from simdist.training.exercises import Exercise


def _coordinate(body, workers=2, ps=1, failures=(), **coordinator):
    """Run ``body(ctx, strategy, coordinator, cluster)`` on the chief; (its value, trace)."""
    cluster = InProcessCluster()

    def chief(ctx):
        for task, at, down in failures:
            cluster.schedule_failure(task, at, down)
        strategy = ParameterServerStrategy(ctx, cluster.resolver(ctx))
        return (yield from body(ctx, strategy, ClusterCoordinator(strategy, **coordinator),
                                cluster))

    def main(ctx):  # the servers start as the simulation builds the tasks
        return chief(ctx) if ctx.task_type == "chief" else cluster.server(ctx).join()

    result = simulate({"chief": 1, "worker": workers, "ps": ps}, main)
    return result.returns["chief:0"], result.trace


def _work(ctx_of, ns=50_000):
    """A function that computes for a while on its worker and returns its worker's name."""
    def work(x):
        ctx = ctx_of()
        yield ctx.timeout(ns)
        return np.float32(x * 2), ctx.name
    return work


def _returning(strategy, value):
    """A function that computes 50 us on its worker and returns ``value``."""
    def step():
        yield strategy._worker.timeout(50_000)
        return value
    return step


@pytest.mark.parametrize("fetch", [True, False])
def test_a_function_without_a_return_value_saves_the_fetch_round_trip(fetch):
    # TF's Worker._process_closure: after the function, remote_value_fetch copies its
    # outputs to the coordinator before the thread takes the next one; None: nothing to copy
    def body_of(value):
        def body(ctx, strategy, coordinator, cluster):
            step = _returning(strategy, value)
            values = [coordinator.schedule(step) for _ in range(4)]
            yield from coordinator.join()
            got = []
            for v in values:
                got.append((yield from v.fetch()))
            return ctx.now, got
        return body

    (with_values, got), trace = _coordinate(body_of(np.float32(7)), workers=1,
                                            remote_value_fetch=fetch)
    (without, nothing), bare = _coordinate(body_of(None), workers=1, remote_value_fetch=fetch)
    assert got == [7.0] * 4 and nothing == [None] * 4
    fetches = [s for s in trace.spans if s.cat == "fetch"]
    assert len(fetches) == (4 if fetch else 0)
    assert not [s for s in bare.spans if s.cat == "fetch"]
    if fetch:  # each fetch is one round trip the next function waits for
        assert with_values - without == pytest.approx(sum(s.dur for s in fetches), rel=0.05)
        assert fetches[0].name == "fetch step#1" and fetches[0].pid == "chief:0"
    else:
        assert with_values - without < 2_000  # only the value's few bytes in the reply


def _take(strategy, ns):
    """A function that takes its worker's next element, computes ``ns`` and returns
    (the element, the worker's name)."""
    def take(it):
        element = next(it)
        yield strategy._worker.timeout(ns)
        return int(element), strategy._worker.name
    return take


def test_schedule_returns_at_once_and_fetch_waits_for_the_value():
    def body(ctx, strategy, coordinator, cluster):
        values = [coordinator.schedule(_work(lambda: strategy._worker), args=(i,))
                  for i in range(4)]
        scheduled_at, done_before = ctx.now, coordinator.done()
        got = []
        for v in values:
            got.append((yield from v.get()))
        yield from coordinator.join()
        return scheduled_at, done_before, got, coordinator.done()

    (at, done_before, got, done_after), trace = _coordinate(body)
    assert at == 0 and not done_before and done_after
    assert [float(x) for x, _ in got] == [0, 2, 4, 6]
    assert {w for _, w in got} == {"worker:0", "worker:1"}  # whichever worker is free
    assert sum(s.cat == "coordinator" for s in trace.spans) == 4  # one overhead per function


def test_a_function_without_return_value_gives_none():
    def body(ctx, strategy, coordinator, cluster):
        with strategy.scope():
            v = strategy.variable("v", np.zeros(3, np.float32))

        def bump():
            yield from strategy.extended.update({"v": v}, {"v": np.ones(3, np.float32)},
                                                lambda a, b: a + b)
        value = coordinator.schedule(bump)
        coordinator.schedule(bump)
        yield from coordinator.join()
        return (yield from value.fetch()), v.numpy()

    (fetched, v), _ = _coordinate(body)
    assert fetched is None
    np.testing.assert_array_equal(v, [2, 2, 2])


def test_per_worker_iterators_are_substituted_for_the_worker_that_runs():
    def body(ctx, strategy, coordinator, cluster):
        def dataset_fn(input_context):
            w = input_context.input_pipeline_id
            return [(w, k) for k in range(10)]
        iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
        with pytest.raises(InvalidArgumentError, match="runs on a worker"):
            next(iterator)

        def take(it):
            element = next(it)
            yield strategy._worker.timeout(10_000)
            return element
        values = [coordinator.schedule(take, args=(iterator,)) for _ in range(6)]
        yield from coordinator.join()
        out = []
        for v in values:
            out.append(tuple(int(x) for x in (yield from v.fetch())))
        return out

    got, _ = _coordinate(body)
    for w in (0, 1):
        mine = [k for worker, k in got if worker == w]
        assert mine == list(range(len(mine))) and mine  # each worker its own, in order


def test_a_dataset_that_runs_out_is_out_of_range():
    def body(ctx, strategy, coordinator, cluster):
        iterator = iter(coordinator.create_per_worker_dataset(lambda: []))
        value = coordinator.schedule(lambda it: next(it), args=(iterator,))
        with pytest.raises(OutOfRangeError, match="End of sequence"):
            yield from value.fetch()
        with pytest.raises(OutOfRangeError):
            yield from coordinator.join()  # and raised once
        yield from coordinator.join()
        return True

    assert _coordinate(body, workers=1)[0]


def test_an_error_cancels_the_rest_and_surfaces_once():
    def body(ctx, strategy, coordinator, cluster):
        def bad():
            yield strategy._worker.timeout(1_000)
            raise InvalidArgumentError("boom")
        work = _work(lambda: strategy._worker, ns=200_000)
        failing = coordinator.schedule(bad)
        others = [coordinator.schedule(work, args=(i,)) for i in range(5)]
        with pytest.raises(InvalidArgumentError, match="boom"):
            yield from coordinator.join()
        yield from coordinator.join()  # raised once: nothing left
        with pytest.raises(InvalidArgumentError, match="boom"):
            yield from failing.fetch()
        cancelled = 0
        for v in others:
            try:
                yield from v.fetch()
            except CancelledError as error:
                assert "because bad#1 failed with InvalidArgumentError: boom" in str(error)
                cancelled += 1
        after = yield from coordinator.schedule(work, args=(21,)).fetch()
        return cancelled, float(after[0])

    (cancelled, after), trace = _coordinate(body)
    assert cancelled == 5  # the queued ones and the one running on the other worker
    assert after == 42.0  # the coordinator goes on after the error was raised
    assert any(i.name == "bad#1 failed: InvalidArgumentError" for i in trace.instants)


def test_scheduling_after_a_fatal_error_raises_it():
    def body(ctx, strategy, coordinator, cluster):
        def bad():
            raise InvalidArgumentError("broken step")
            yield
        coordinator.schedule(bad)
        yield ctx.timeout(1_000_000)
        with pytest.raises(InvalidArgumentError, match="broken step"):
            coordinator.schedule(bad)
        yield from coordinator.join()  # raised once (as TF 2.21 does): join has nothing left
        first_done = coordinator.done()
        coordinator.schedule(bad)
        yield ctx.timeout(1_000_000)
        with pytest.raises(InvalidArgumentError, match="broken step"):
            coordinator.done()  # done() raises it too
        return first_done, coordinator.done()

    assert _coordinate(body)[0] == (True, True)


def test_a_worker_failure_runs_its_function_again_and_rebuilds_its_dataset():
    def body(ctx, strategy, coordinator, cluster):
        iterator = iter(coordinator.create_per_worker_dataset(lambda: range(100)))
        values = [coordinator.schedule(_take(strategy, 100_000), args=(iterator,))
                  for _ in range(4)]
        yield from coordinator.join()
        out = []
        for v in values:
            element, worker = yield from v.get()
            out.append((int(element), worker))
        return out

    # worker 1 takes function 2 at ~0.2 ms and fails at 0.25 ms, back at 1 ms
    got, trace = _coordinate(body, failures=[("worker:1", 250_000, 750_000)])
    runs = [s for s in trace.spans if s.cat == "function" and s.args["function"] == "take#2"]
    assert [(s.pid, s.args["run"]) for s in runs] == [("worker:1", 1), ("worker:0", 2)]
    assert runs[0].args["ended"] == "task failed"
    assert got[1][1] == "worker:0"
    names = [(i.pid, i.name) for i in trace.instants]
    assert ("chief:0", "take#2 back in the queue (worker:1 failed)") in names
    assert ("worker:1", "per-worker datasets rebuilt") in names


def _ps_exercise(**options):
    return simulate_exercise(Exercise(strategy="parameter_server", steps=20, **options))


def test_packing_steps_into_one_function_saves_the_coordinators_overhead():
    one = _ps_exercise(workers=2)
    four = _ps_exercise(workers=2, steps_per_execution=4)
    assert one.metadata["functions"] == 20 and four.metadata["functions"] == 5
    assert len(one.losses) == len(four.losses) == 20
    assert four.metadata["simulated_time_ns"] < 0.7 * one.metadata["simulated_time_ns"]


def test_the_hot_variable_is_read_by_every_step_and_ps_load_is_uneven():
    run = _ps_exercise(workers=2, ps=2, model="softmax", dataset="classification")
    reads = {}
    for c in run.trace.counters:
        if c.name == "variable reads":
            reads.setdefault(c.pid, {}).update(c.values)
    hot = [(pid, v["iterations"]) for pid, v in reads.items() if "iterations" in v]
    assert len(hot) == 1 and hot[0][1] == 2 * 20  # read and updated by each of the 20 steps
    stored = run.metadata["ps_bytes_stored"]
    assert set(stored) == {"ps:0", "ps:1"} and stored["ps:0"] != stored["ps:1"]
    moved = run.metadata["ps_bytes_moved_per_step"]
    assert moved["ps:0"] != moved["ps:1"] and min(moved.values()) > 0


def test_an_injected_worker_failure_shows_a_function_run_twice():
    run = _ps_exercise(workers=2, failures=("worker:1@250us+200us",))
    assert len(run.losses) == 20
    twice = [f for f, n in run.metadata["function_runs"].items() if n == 2]
    assert twice == ["step_fn#2"]


def test_a_ps_failure_restores_the_checkpoint_and_infers_the_epoch():
    run = _ps_exercise(workers=2, ps=2, failures=("ps:0@1900us+100us",))
    assert run.metadata["restores"] == 1 and len(run.losses) == 20
    restored = [i for i in run.trace.instants if i.name.startswith("restored")]
    # steps_per_epoch is 16 (1024 examples / 64): the checkpoint holds epoch 0's 16 steps
    assert [i.name for i in restored] == ["restored: start again at epoch 1"]
    assert restored[0].args["iterations"] == 16
    assert np.isfinite(run.losses).all() and run.losses[-1] < run.losses[0]


@pytest.mark.parametrize("options, message", [
    ({"failures": ("gpu:0@1ms",)}, r"the task must be worker:N or ps:N, got 'gpu:0'"),
    ({"failures": ("worker:5@1ms",)}, r"failure of worker:5: the cluster has 2 workers"),
    ({"failures": ("worker:0@soon",)}, r"times must read like 2ms"),
    ({"failures": ("worker:0",)}, r"expected TASK@TIME\[\+DOWN\]"),
    ({"steps_per_execution": 0}, r"steps_per_execution \(--steps-per-execution\) must be an "
                                 r"int >= 1, got 0"),
    ({"ps": 0}, r"ps must be an int >= 1, got 0"),
])
def test_bad_parameter_server_options(options, message):
    with pytest.raises(InvalidArgumentError, match=message):
        Exercise(strategy="parameter_server", workers=2, **options)


def test_parameter_server_options_belong_to_parameter_server():
    with pytest.raises(InvalidArgumentError, match="parameter_server's options, not mirrored's"):
        Exercise(strategy="mirrored", ps=2)


@pytest.mark.parametrize("model, dataset", [("linear", "regression"), ("embedding", "vocab")])
def test_one_worker_trains_as_plain_sgd(model, dataset):
    # one worker runs the functions one after another: plain SGD on its own dataset, whether
    # the variables are read whole or (the embedding table) looked up and updated by rows
    from simdist.training.data import global_batches

    exercise = Exercise(strategy="parameter_server", model=model, dataset=dataset, workers=1,
                        ps=2, steps=12, global_batch=16, learning_rate=0.5,
                        steps_per_execution=3)
    run = simulate_exercise(exercise)
    net, data = exercise.build()
    w = net.init(exercise.seed)
    lr = np.float32(exercise.learning_rate)
    losses = []
    for x, y in global_batches(data, 16, 12, exercise.seed * 1009):
        losses.append(float(np.mean(net.per_example_loss(w, x, y))))
        grads = net.gradients(w, x, y, np.float32(1.0) / np.float32(len(x)))
        w = {k: v - lr * grads[k] for k, v in w.items()}
    np.testing.assert_allclose(run.losses, losses, rtol=1e-6)
    for k in w:
        np.testing.assert_allclose(run.weights[k], w[k], rtol=1e-6, atol=1e-7)
    if model == "embedding":  # sharded over both ps, never read whole
        assert len(run.metadata["shards"]["embedding"]) == 2
        names = {s.name for s in run.trace.spans if s.cat == "ps"}
        assert "lookup embedding/part_0" in names and "scatter embedding/part_1" in names
        assert not any(n.startswith("read") and "embedding" in n for n in names)


def test_a_worker_that_failed_while_idle_comes_back_with_a_new_dataset():
    def body(ctx, strategy, coordinator, cluster):
        iterator = iter(coordinator.create_per_worker_dataset(lambda: range(100)))
        take = _take(strategy, 50_000)
        first = [coordinator.schedule(take, args=(iterator,)) for _ in range(2)]
        yield from coordinator.join()
        yield ctx.timeout(1_000_000)  # worker 1 fails and comes back meanwhile
        second = [coordinator.schedule(take, args=(iterator,)) for _ in range(2)]
        yield from coordinator.join()
        out = []
        for v in first + second:
            out.append((yield from v.get()))
        return out

    got, trace = _coordinate(body, failures=[("worker:1", 400_000, 100_000)])
    assert sorted(got[:2]) == [(0, "worker:0"), (0, "worker:1")]
    assert sorted(got[2:]) == [(0, "worker:1"), (1, "worker:0")]  # worker 1 starts again
    assert ("worker:1", "per-worker datasets rebuilt") in [(i.pid, i.name)
                                                          for i in trace.instants]


def test_simdist_run_parameter_server_reports_ps_load_and_reruns(capsys):
    from simdist.commands.cli import main

    assert main(["run", "parameter_server", "--workers", "2", "--ps", "2", "--steps", "20",
                 "--fail", "worker:1@250us+200us", "--fail", "ps:0@2100us+100us"]) == 0
    out = capsys.readouterr().out
    assert "ps:0: 40 B of variables" in out and "ps:1: 4 B of variables" in out
    # epoch 0: 16 functions; epoch 1: its 4 cancelled by the ps failure, then 4 again
    assert ("functions scheduled: 24; run again after a worker failed: step_fn#2 (2 runs); "
            "checkpoint restored 1 time(s)") in out
