"""simdist.distribute: every synchronous strategy does the same SGD as one device, splits
batches as TF does, moves the bytes its algorithm implies, shows its steps in the trace, gives
identical traces over MPI, and rejects bad input before training."""

import json

import numpy as np
import pytest

from simdist import simulate
from simdist.collectives import ReduceOp
from simdist.commands.compare import main as compare_main
from simdist.training.compare import format_comparison
from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.distribute import (CentralStorageStrategy, MirroredStrategy,
                                MultiWorkerMirroredStrategy, NcclAllReduce, OneDeviceStrategy,
                                PerReplica, compute_average_loss)
from simdist.training import simulate_exercise
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise, RunResult, max_weight_difference

from tests.conftest import mpi_simdist

MODEL_BYTES = (8 + 1) * 4  # the linear model on the 8-feature regression set, float32

SYNC = [dict(strategy="one_device"),
        dict(strategy="mirrored"),
        dict(strategy="mirrored", cross_device_ops="hierarchical_copy"),
        dict(strategy="mirrored", cross_device_ops="nccl", hardware="v100-nvlink2-25gbe"),
        dict(strategy="central_storage"),
        dict(strategy="multi_worker_mirrored", workers=2, devices_per_worker=2),
        dict(strategy="multi_worker_mirrored", workers=4, devices_per_worker=1)]


@pytest.fixture(scope="module")
def single_device():
    return simulate_exercise(Exercise(strategy="default"))


@pytest.mark.parametrize("options", SYNC, ids=lambda o: "-".join(map(str, o.values())))
def test_every_strategy_trains_like_a_single_device(options, single_device):
    run = simulate_exercise(Exercise(**options))
    assert max_weight_difference(run, single_device) <= 1e-6
    np.testing.assert_allclose(run.losses, single_device.losses, rtol=1e-5)
    assert run.losses[-1] < run.losses[0] / 10  # it learns
    assert len(run.step_times_ns) == 20 and min(run.step_times_ns) > 0


def test_more_replicas_or_a_slower_network_change_the_step_time():
    mirrored = simulate_exercise(Exercise(strategy="mirrored", model="mlp", dataset="digits"))
    workers = simulate_exercise(Exercise(strategy="multi_worker_mirrored", model="mlp",
                                         dataset="digits", workers=4, devices_per_worker=1))
    slow = simulate_exercise(Exercise(strategy="multi_worker_mirrored", model="mlp",
                                      dataset="digits", workers=4, devices_per_worker=1,
                                      hardware="cpu-1gbe"))
    # shared memory inside a machine < 10 GbE between machines < 1 GbE
    assert np.median(mirrored.step_times_ns) < np.median(workers.step_times_ns) \
        < np.median(slow.step_times_ns)


def test_bytes_per_step_follow_each_algorithm():
    p, loss = 4, 4  # replicas; bytes of one float32 loss
    naive = simulate_exercise(Exercise(strategy="mirrored", steps=3,
                                       cross_device_ops="reduction_to_one"))
    # ReductionToOneDevice: p-1 gradients in, p-1 results out; the same for the loss
    assert naive.metadata["bytes_moved_per_step"] == 2 * (p - 1) * (MODEL_BYTES + loss)
    central = simulate_exercise(Exercise(strategy="central_storage", steps=3))
    # every replica reads the variables from the host and sends its gradient (and loss) back
    assert central.metadata["bytes_moved_per_step"] == p * (2 * MODEL_BYTES + loss)
    ring = simulate_exercise(Exercise(strategy="mirrored", cross_device_ops="nccl", steps=3,
                                      hardware="v100-nvlink2-25gbe"))
    # in all, a ring moves as much as reduce-to-one (2(p-1) x n/p per replica) but evenly:
    # no device sends more than 2(p-1)/p of the value, where the root sends p-1 values
    assert ring.metadata["bytes_moved_per_step"] == naive.metadata["bytes_moved_per_step"]
    assert _busiest_sender(naive) == 3 * (p - 1) * (MODEL_BYTES + loss)
    assert _busiest_sender(ring) < 0.6 * _busiest_sender(naive)
    assert naive.metadata["cross_device_ops"] == "ReductionToOneDevice"
    # TF 2.21's default on CPUs: collective all-reduce with the RING implementation
    default = simulate_exercise(Exercise(strategy="mirrored", steps=3))
    assert default.metadata["cross_device_ops"] == "CollectiveAllReduce (RING)"
    assert default.metadata["bytes_moved_per_step"] == ring.metadata["bytes_moved_per_step"]
    assert central.metadata["cross_device_ops"] == "sent to the host CPU and added there"


def _busiest_sender(run):
    sent = {}
    for f in run.trace.flows:
        sent[f.src_lane] = sent.get(f.src_lane, 0) + f.args["bytes"]
    return max(sent.values())


def test_trace_shows_compute_all_reduce_update_and_steps():
    run = simulate_exercise(Exercise(strategy="mirrored", steps=3,
                                     cross_device_ops="reduction_to_one"))
    spans = run.trace.spans
    steps = [s for s in spans if s.cat == "step"]
    assert [s.name for s in steps] == ["step 0", "step 1", "step 2"]
    for device in range(4):
        lane = f"CPU:{device}"
        names = [s.name for s in spans if s.lane == lane]
        assert names.count("forward+backward") == 3 and names.count("apply SGD") == 3
    assert any(s.cat == "reduce-to-one" for s in spans) and run.trace.flows
    # within a step: compute, then the gradients' all-reduce, then the update
    compute, update = [s for s in spans if s.lane == "CPU:1" and s.start < steps[0].end]
    assert compute.name == "forward+backward" and update.name == "apply SGD"
    assert [s for s in spans if s.lane == "CPU:1 collective"
            and compute.end <= s.start and s.end <= update.start]


def _run(p, body, devices=4, system="cpu"):
    hw = Hardware.from_catalog(HardwareCatalog.default(), system,
                               Layout(devices_per_task=devices))
    return simulate({"worker": p}, body, hardware=hw).returns


def test_distribute_dataset_splits_partial_batches_like_tf():
    batches = [(np.arange(7), np.arange(7)), (np.arange(3), np.arange(3))]

    def body(ctx):
        strategy = MirroredStrategy(ctx)
        out = [(b.global_batch_size, [list(v) for v in b[0].values])
               for b in strategy.experimental_distribute_dataset(batches)]
        yield ctx.timeout(1)
        return out

    got = _run(1, body)["worker:0"]
    assert got == [(7, [[0, 1], [2, 3], [4, 5], [6]]), (3, [[0], [1], [2], []])]


def test_multi_worker_split_gives_sub_batch_j_to_worker_j_mod_w():
    batches = [(np.arange(7), np.arange(7))]

    def body(ctx):
        strategy = MultiWorkerMirroredStrategy(ctx, devices=[0, 1])
        (b,) = strategy.experimental_distribute_dataset(batches)
        yield ctx.timeout(1)
        return [list(v) for v in b[0].values]

    got = _run(2, body, devices=2)
    # 7 over 4 sub-batches: [0,1] [2,3] [4,5] [6]; worker w gets sub-batches w, w + 2
    assert got == {"worker:0": [[0, 1], [4, 5]], "worker:1": [[2, 3], [6]]}


def test_reduce_with_axis_and_compute_average_loss():
    def body(ctx):
        strategy = MirroredStrategy(ctx, devices=[0, 1])
        values = PerReplica([np.array([1.0, 2.0, 3.0]), np.array([5.0])])
        mean = yield from strategy.reduce(ReduceOp.MEAN, values, axis=0)
        total = yield from strategy.reduce("sum", values, axis=0)
        biggest = yield from strategy.reduce(ReduceOp.MAX, values, axis=0)
        return float(mean), float(total), float(biggest)

    assert _run(1, body)["worker:0"] == (2.75, 11.0, 5.0)
    # two replicas' shares of a global batch of 4 add up to the global mean
    shares = compute_average_loss(np.array([1.0, 3.0]), 4) + \
        compute_average_loss(np.array([5.0, 7.0]), 4)
    assert shares == pytest.approx(4.0)


def test_bad_input_is_rejected_before_training():
    with pytest.raises(InvalidArgumentError, match="global batch 3 is smaller than the 4"):
        Exercise(strategy="mirrored", global_batch=3)
    with pytest.raises(InvalidArgumentError, match="'linear' is a regression model but "
                                                   "dataset 'digits'"):
        simulate_exercise(Exercise(strategy="mirrored", dataset="digits"))
    with pytest.raises(InvalidArgumentError, match="unknown strategy 'no_such_strategy'"):
        Exercise(strategy="no_such_strategy")
    with pytest.raises(InvalidArgumentError, match="NcclAllReduce needs GPUs.*'cpu'"):
        simulate_exercise(Exercise(strategy="mirrored", cross_device_ops="nccl"))

    def bad_device(ctx):
        OneDeviceStrategy(ctx, "/gpu:0")
        yield ctx.timeout(1)

    with pytest.raises(InvalidArgumentError, match="'/gpu:0' is a GPU.*CPU devices"):
        _run(1, bad_device)

    def out_of_range(ctx):
        MirroredStrategy(ctx, ["/cpu:0", "/cpu:9"])
        yield ctx.timeout(1)

    with pytest.raises(InvalidArgumentError, match="device index 9 out of range"):
        _run(1, out_of_range)

    def wrong_tf_config(ctx):
        MultiWorkerMirroredStrategy(ctx, tf_config={"cluster": {"worker": 3},
                                                    "task": {"type": "worker", "index": 0}})
        yield ctx.timeout(1)

    with pytest.raises(InvalidArgumentError, match="TF_CONFIG does not match the cluster"):
        _run(2, wrong_tf_config)

    def outside_scope(ctx):
        CentralStorageStrategy(ctx).variables({"w": np.zeros(2)})
        yield ctx.timeout(1)

    with pytest.raises(InvalidArgumentError, match="inside `with strategy.scope\\(\\):`"):
        _run(1, outside_scope)
    with pytest.raises(InvalidArgumentError, match="cross_device_ops must be one of"):
        _run(1, lambda ctx: (yield MirroredStrategy(ctx, cross_device_ops="nccl")))
    assert NcclAllReduce().needs_gpu


def test_run_result_round_trip_and_compare(tmp_path, capsys, single_device):
    path = single_device.save(tmp_path / "a.json")
    back = RunResult.load(path)
    assert back.losses == single_device.losses and max_weight_difference(back,
                                                                         single_device) == 0
    assert back.trace is not None and len(back.trace.spans) == len(single_device.trace.spans)
    mirrored = simulate_exercise(Exercise(strategy="mirrored"))
    text = format_comparison(single_device, mirrored)
    assert "weights agree" in text and "different strategies" in text
    other = mirrored.save(tmp_path / "b.json")
    assert compare_main([str(path), str(other), "-o", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 10_000
    third = simulate_exercise(Exercise(strategy="default", steps=5)).save(tmp_path / "d.json")
    assert compare_main([str(path), str(third)]) == 2
    assert "not the same exercise: steps = 20 vs 5" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    assert compare_main([str(path), str(bad)]) == 2


@pytest.mark.mpi
@pytest.mark.timeout(150)
@pytest.mark.parametrize("n", [2, 4])
def test_multi_worker_trace_is_identical_over_mpi(tmp_path, n):
    args = ["run", "multi_worker_mirrored", "--workers", "4", "--replicas", "1", "--steps", "5",
            "--quiet"]
    mpi_simdist(n, args + ["--trace", str(tmp_path / "mpi.json"),
                           "--result", str(tmp_path / "mpi_result.json")])
    from simdist.commands.cli import main

    assert main(args + ["--trace", str(tmp_path / "one.json")]) == 0
    assert (tmp_path / "mpi.json").read_bytes() == (tmp_path / "one.json").read_bytes()
    assert RunResult.load(tmp_path / "mpi_result.json").metadata["ranks"] == n


def test_distribute_datasets_from_function_gives_each_worker_its_input_context():
    def dataset_fn(input_context):
        # shard by worker, per-replica batches of 2 (TF's recipe for this API)
        per_replica = input_context.get_per_replica_batch_size(8)
        ids = np.arange(32)[input_context.input_pipeline_id::input_context.num_input_pipelines]
        return [(ids[i:i + per_replica], ids[i:i + per_replica])
                for i in range(0, len(ids), per_replica)]

    def body(ctx):
        strategy = MultiWorkerMirroredStrategy(ctx, devices=[0, 1])
        out = [(b.global_batch_size, [list(v) for v in b[0].values])
               for b in strategy.distribute_datasets_from_function(dataset_fn)]
        yield ctx.timeout(1)
        return out

    got = _run(2, body, devices=2)
    assert len(got["worker:0"]) == 4  # 16 examples, 2 replicas x 2 per step
    assert got["worker:0"][0] == (8, [[0, 2], [4, 6]])
    assert got["worker:1"][0] == (8, [[1, 3], [5, 7]])

    def indivisible(ctx):
        strategy = MirroredStrategy(ctx, devices=[0, 1, 2])
        list(strategy.distribute_datasets_from_function(
            lambda ictx: [ictx.get_per_replica_batch_size(8)]))
        yield ctx.timeout(1)

    with pytest.raises(InvalidArgumentError, match="8 is not divisible by "
                                                   "num_replicas_in_sync 3"):
        _run(1, indivisible)


def test_central_storage_on_one_device_keeps_the_variables_there():
    one = simulate_exercise(Exercise(strategy="central_storage", devices_per_worker=1, steps=3))
    assert one.metadata["bytes_moved_per_step"] == 0  # nothing crosses the host link
    assert one.metadata["cross_device_ops"] == "none (one replica)"
    assert not [s for s in one.trace.spans if s.lane == "host"]
    four = simulate_exercise(Exercise(strategy="central_storage", steps=3))
    assert [s for s in four.trace.spans if s.lane == "host" and s.name == "apply SGD"]
