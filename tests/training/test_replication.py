"""In-graph replication, independent replicas and model parallelism in simdist: one client
or several, where the averaging happens, what crosses between devices, and when splitting a
model over two GPUs pays."""

import pytest

from simdist.base.errors import InvalidArgumentError
from simdist.training.ps_training import train_on_ps
from simdist.training.replication import in_graph_training, model_parallel, one_model_per_device

pytestmark = pytest.mark.usefixtures("fresh_tf1")


def test_in_graph_sync_is_one_client_averaging_on_the_ps():
    run = in_graph_training(workers=3, mode="sync", steps=5)
    assert run.threads == ["client thread 0"] and run.global_step == 5
    assert run.averaging == {"average/truediv": "/job:ps/task:0"}  # TF's name for "/"
    assert run.losses == sorted(run.losses, reverse=True)  # it trains
    # every tower ran on its own worker task, all from the one client
    towers = {s.pid for s in run.trace.spans if s.name.startswith("tower_")}
    assert towers == {"worker:0", "worker:1", "worker:2"}


def test_in_graph_async_is_one_client_with_a_thread_per_tower():
    run = in_graph_training(workers=3, mode="async", steps=4)
    assert len(run.threads) == 3 and run.global_step == 3 * 4  # every tower applies its own
    assert run.averaging == {}


def test_between_graph_is_one_client_per_worker():
    run = train_on_ps(workers=3, mode="async", steps=3)
    clients = {name for name in run.worker_runs}
    assert clients == {0, 1, 2}  # three client programs, each with its own graph


def test_a_dense_chain_split_over_two_gpus_gains_nothing_but_branches_do():
    dense = model_parallel("dense")
    branches = model_parallel("branches")
    assert dense.speedup < 1.0  # the second GPU waits for the first, activations cross
    assert all(share < 0.55 for share in dense.busy.values())  # each GPU idles half the time
    assert branches.speedup > 1.5  # the two branches run at once
    assert all(share > 0.6 for share in branches.busy.values())
    # a longer, narrower chain too: the variables' reads (which simdist prices as kernels)
    # are left out of the timed pass, or reading half of them on each GPU would win 1.14x
    assert model_parallel("dense", width=1024, layers=8, batch=64).speedup < 1.0


def test_one_model_per_device_shares_nothing():
    run = one_model_per_device(learning_rates=(0.01, 0.2), steps=10)
    assert run.bytes_between_devices == 0
    assert run.losses[0.2] < run.losses[0.01]  # the search finds the better rate
    devices = {s.lane for s in run.trace.spans if s.cat == "compute"}
    assert devices == {"GPU:0", "GPU:1"}


def test_bad_input_is_one_clear_line():
    with pytest.raises(InvalidArgumentError, match="architecture='rnn', expected 'dense'"):
        model_parallel("rnn")
    with pytest.raises(InvalidArgumentError, match="layers=1, expected at least 2"):
        model_parallel(layers=1)
    with pytest.raises(InvalidArgumentError, match="mode='x', expected 'sync' or 'async'"):
        in_graph_training(mode="x")
    with pytest.raises(InvalidArgumentError, match="learning_rates is empty"):
        one_model_per_device(learning_rates=())
