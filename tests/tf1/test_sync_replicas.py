"""SyncReplicasOptimizer, MonitoredTrainingSession and asynchronous parameter-server training
in simdist: TF's design (accumulators, tokens, the chief's queue runner, stale gradients
dropped), the counts it gives for given worker speeds, and the waits TF makes visible."""

import numpy as np
import pytest

import simdist.graph as tf
from simdist.sim.core import SimulationDeadlock
from simdist.training.ps_training import train_on_ps

pytestmark = pytest.mark.usefixtures("fresh_tf1")


def _cluster(workers):
    tf.stop_all_servers()
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"],
                                    "worker": [f"localhost:{2223 + i}" for i in range(workers)]})
    return cluster, tf.train.Server(cluster, "ps", 0), [
        tf.train.Server(cluster, "worker", i) for i in range(workers)]


def test_the_graph_is_tfs():
    cluster, *_ = _cluster(2)
    with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:1",
                                                  cluster=cluster)):
        step = tf.train.get_or_create_global_step()
        w = tf.get_variable("w", initializer=np.zeros(2, np.float32))
        loss = tf.reduce_sum(tf.square(w - 1.0))
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                             replicas_to_aggregate=2, total_num_replicas=3)
        train_op = opt.minimize(loss, global_step=step)
    graph = tf.get_default_graph()
    ops = {op.name: op for op in graph.get_operations()}
    accumulator = ops["sync_replicas/conditional_accumulator"]
    assert accumulator.attrs["shared_name"] == "w:0/grad_accum"
    assert accumulator.device == "/job:ps/task:0"  # with its variable
    assert ops["sync_token_q"].attrs["shared_name"] == "sync_token_q"
    # with the global step, under TF 2.21 FIFOQueue's tf.device("CPU")
    assert ops["sync_token_q"].device == "/job:ps/task:0/device:CPU:*"
    local = [v for v in tf.local_variables()]
    assert [v.op.name for v in local] == ["sync_rep_local_step"]
    assert local[0].device in ("", "/job:worker/task:1")  # never on the ps
    assert train_op.type == "Assign" and train_op.inputs[1].op.type == "QueueDequeueV2"
    fill = [op for op in graph.get_operations() if op.type == "Fill"]
    assert [tuple(op.outputs[0].shape) for op in fill] == [(3,)]  # max(total, to aggregate)
    with pytest.raises(ValueError, match="Global step is required"):
        opt.apply_gradients([(loss, w)])


def test_all_workers_equal_every_step_takes_one_gradient_from_each():
    run = train_on_ps(workers=3, mode="sync", steps=5)
    assert run.global_step == 5
    # the init tokens let every worker through its first run before step 1 is taken:
    # its second gradient still carries local step 0 and is dropped, as on TF
    assert run.applied == 3 * 5 and run.dropped == 3
    losses = [loss for _, _, loss in run.worker_runs[0]]
    assert losses[-1] < losses[0] / 2  # it trains


def test_a_backup_worker_s_late_gradients_are_dropped():
    # two fast workers make every step; the slow one's gradients always arrive too late
    run = train_on_ps(workers=3, replicas_to_aggregate=2, mode="sync", steps=6,
                      step_us=[1000, 1000, 3500])
    assert run.global_step == 6
    by_worker = run.gradients_by_worker()
    assert by_worker[0][0] + by_worker[1][0] == 2 * 6
    slow = [e for e in run.trace.instants if e.args.get("source") == "/job:worker/task:2"
            and e.args["accumulator"] == "w:0/grad_accum"]
    # every slow gradient is late; one computed at the last global step may still reach the
    # accumulator after the last step (TF counts it applied, nobody takes it)
    assert slow and all(e.name == "gradient dropped" for e in slow
                        if e.args["local_step"] < 6)
    assert run.worker_steps[2] < run.worker_steps[0]


def test_a_replica_waiting_for_a_token_ends_when_the_stopping_chief_closes_the_queue():
    # TF 2.x's chief queue runner runs sync_op on sync_token_q itself: when the chief stops,
    # its cancel op closes the token queue, and the slow worker, whose last gradient (local
    # step 6) reached the accumulator after the last step, ends with OutOfRangeError there
    # instead of waiting for ever (measured on TF 2.21 by realdist ps)
    run = train_on_ps(workers=3, replicas_to_aggregate=2, mode="sync", steps=6,
                      step_us=[100_000, 170_000, 400_000])
    assert run.global_step == 6 and run.worker_steps == {0: 11, 1: 6, 2: 3}
    assert run.gradients_by_worker() == {0: (8, 3), 1: (4, 2), 2: (1, 3)}
    last = [e for e in run.trace.instants if e.args.get("source") == "/job:worker/task:2"][-1]
    assert (last.name, last.args["local_step"]) == ("gradient applied", 6)


def test_sync_runs_are_deterministic():
    first = train_on_ps(workers=2, mode="sync", steps=3, step_us=[700, 900])
    second = train_on_ps(workers=2, mode="sync", steps=3, step_us=[700, 900])
    assert first.trace.to_chrome() == second.trace.to_chrome()


def test_async_gradients_are_stale_by_the_updates_of_others():
    run = train_on_ps(workers=3, mode="async", steps=10, step_us=[1000, 1500, 3000])
    # each worker stops after the run in which it sees the step reached: others still in
    # a run apply theirs (TF's StopAtStepHook skips its second read while step + 1 < last)
    assert 10 <= run.global_step <= 10 + 2 * 3 and run.dropped == 0
    assert run.applied == len(run.staleness) == sum(run.worker_steps.values())
    assert max(run.staleness) >= 2 and min(run.staleness) == 0
    one = train_on_ps(workers=1, mode="async", steps=4)
    assert one.staleness == [0, 0, 0, 0]  # alone, nobody updates in between


def test_sync_replicas_without_a_chief_is_a_deadlock_naming_the_replicas():
    # nobody runs the chief's hook: no initial tokens, no queue runner taking gradients
    cluster, ps, workers = _cluster(2)

    def worker(k):
        graph = tf.Graph()
        with graph.as_default():
            with tf.device(tf.train.replica_device_setter(
                    worker_device=f"/job:worker/task:{k}", cluster=cluster)):
                step = tf.train.get_or_create_global_step()
                w = tf.get_variable("w", initializer=np.zeros(2, np.float32))
                opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                                     replicas_to_aggregate=2)
                train_op = opt.minimize(tf.reduce_sum(tf.square(w)), global_step=step)
            init, pause = tf.global_variables_initializer(), tf.timed_py_func([], 1000)
            with tf.Session(workers[k].target) as sess:
                sess.run(init if k == 0 else pause)  # worker 1 starts once 0 initialized
                sess.run(opt.local_step_init_op)
                sess.run(train_op)

    with pytest.raises(SimulationDeadlock) as error:
        tf.simulate_clients({"worker:0": lambda: worker(0), "worker:1": lambda: worker(1),
                             "ps": ps.join})
    report = str(error.value)
    assert "client worker:0" in report and "client worker:1" in report
    assert "get 1 from sync_token_q" in report


def test_more_replicas_to_aggregate_than_workers_is_refused_by_the_program():
    from simdist.base.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="replicas_to_aggregate=3 is more than the "
                                                   "2 workers"):
        train_on_ps(workers=2, replicas_to_aggregate=3, mode="sync", steps=2)


def test_a_non_chief_waits_for_the_chief_to_initialize():
    cluster, ps, workers = _cluster(2)

    def worker(k, delay_us):
        graph = tf.Graph()
        with graph.as_default():
            with tf.device(tf.train.replica_device_setter(
                    worker_device=f"/job:worker/task:{k}", cluster=cluster)):
                step = tf.train.get_or_create_global_step()
                w = tf.get_variable("w", initializer=np.zeros(2, np.float32))
            total, pause = tf.reduce_sum(w), tf.timed_py_func([], delay_us)
            with tf.Session(workers[k].target) as sess:
                sess.run(pause)  # the chief is late
            with tf.train.MonitoredTrainingSession(master=workers[k].target,
                                                   is_chief=k == 0) as sess:
                return float(sess.run(total)), sess.last_run.end_time

    result = tf.simulate_clients({"chief": lambda: worker(0, 5_000_000),
                                  "other": lambda: worker(1, 0), "ps": ps.join})
    assert result.returns["other"][0] == 0.0
    waits = [s for s in result.trace.spans if s.name == "wait_for_session"]
    assert len(waits) == 1 and waits[0].pid == "worker:1"
    # TF's SessionManager sleeps 30 s between tries: the worker starts after the chief
    assert result.returns["other"][1] >= 30_000_000_000 > result.returns["chief"][1]


def test_bad_input_is_one_clear_line():
    from simdist.base.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=r"step_us=\[1\], expected 2 step times"):
        train_on_ps(workers=2, step_us=[1])
    with pytest.raises(InvalidArgumentError, match="mode='both', expected 'sync' or 'async'"):
        train_on_ps(mode="both")
    with pytest.raises(InvalidArgumentError, match="replicas_to_aggregate=0"):
        tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 0)
    with pytest.raises(ValueError, match="One of num_steps or last_step"):
        tf.train.StopAtStepHook()


def test_the_ps_command_prints_the_counts_and_draws(tmp_path, capsys):
    from simdist.commands.cli import main

    plot = tmp_path / "sync.png"
    assert main(["ps", "--workers", "3", "--replicas-to-aggregate", "2", "--steps", "4",
                 "--step-us", "1000,1000,3500", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "sync training: global step 4" in out
    assert "worker 2:" in out and "dropped" in out and "stop_grace_period_secs" in out
    assert plot.stat().st_size > 10_000
    assert main(["ps", "--mode", "async", "--workers", "2", "--steps", "4"]) == 0
    assert "staleness" in capsys.readouterr().out


@pytest.mark.parametrize("argv, expected", [
    (["--step-us", "1,x"], "--step-us '1,x': expected step times in us"),
    (["--workers", "2", "--step-us", "1,2,3"], "step_us=[1.0, 2.0, 3.0], expected 2 step"),
    (["--plot", "out.txt"], "--plot"),
])
def test_bad_ps_command_input_is_one_line_and_exit_2(capsys, argv, expected):
    from simdist.commands.cli import main

    with pytest.raises(SystemExit) if argv[0] == "--step-us" else _no_exit() as done:
        status = main(["ps"] + argv)
    last = capsys.readouterr().err.strip().splitlines()[-1]  # argparse: usage, then it
    assert expected in last
    assert (done.value.code if done else status) == 2


class _no_exit:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


STRAGGLERS = dict(workers=4, step_us=[1000, 1200, 1500, 6000], steps=30)


def test_stale_gradients_make_a_high_learning_rate_diverge_and_the_remedies_help():
    def final_loss(**options):
        run = train_on_ps(mode="async", learning_rate=0.3, **options)
        return run, run.worker_runs[0][-1][2]

    alone, alone_loss = final_loss(workers=1, step_us=[1000], steps=30)
    plain, plain_loss = final_loss(**STRAGGLERS)
    assert max(alone.staleness) == 0 and alone_loss < 1e-3
    assert max(plain.staleness) >= 10 and plain_loss > 1.0  # diverges: staleness up to 15
    capped, capped_loss = final_loss(max_staleness=2, **STRAGGLERS)
    # the cap is checked one run before the update: a few updates may land in between
    assert max(capped.staleness) < max(plain.staleness) and capped.dropped > 0
    assert capped_loss < plain_loss / 4
    weighted, weighted_loss = final_loss(staleness_weighting=True, **STRAGGLERS)
    assert weighted.dropped == 0 and weighted_loss < plain_loss / 10


def test_a_lower_learning_rate_and_a_warm_up_also_tame_staleness():
    low = train_on_ps(mode="async", learning_rate=0.1, **STRAGGLERS)
    assert low.worker_runs[0][-1][2] < 0.05
    warm = train_on_ps(mode="async", learning_rate=0.05, warmup_steps=10, **STRAGGLERS)
    first_steps = [runs[0][1] for k, runs in warm.worker_runs.items() if k > 0]
    assert min(first_steps) > 10  # the others only start once worker 0 reached step 10


def test_backup_workers_shorten_steps_with_random_stragglers():
    from simdist.training.ps_sweeps import backup_worker_sweep

    rows = backup_worker_sweep(workers=5, backups=(0, 1, 2), steps=20, stall_us=6000,
                               stall_probability=0.15)
    times = [row["us_per_step"] for row in rows]
    assert times[0] > times[1] > times[2]
    # (workers - backups) x steps gradients make the steps; a few more may be accepted after
    # the last take and never used
    for row in rows:
        assert 0 <= row["applied"] - (5 - row["backups"]) * 20 < 5
    assert rows[0]["dropped"] < rows[2]["dropped"]


def test_the_ps_nic_saturates_and_sharding_or_float16_relieve_it():
    from simdist.training.ps_sweeps import ps_bandwidth_sweep

    rows = {(r["workers"], r.get("ps", 1), r.get("gradient_dtype", "float32")): r
            for r in ps_bandwidth_sweep(features=500_000, steps=6)}
    rate = {key: row["updates_per_s"] for key, row in rows.items()}
    assert rate[(2, 1, "float32")] > 1.5 * rate[(1, 1, "float32")]
    assert rate[(4, 1, "float32")] < 2.5 * rate[(1, 1, "float32")]  # the ps NIC saturates
    assert rate[(4, 4, "float32")] > rate[(4, 2, "float32")] > 1.2 * rate[(4, 1, "float32")]
    # the bytes the ps receives per update: a float32 gradient of 2 MB, or half of it
    per_update = {key: row["ps_received_bytes"] / row["global_step"]
                  for key, row in rows.items()}
    assert 1.9e6 < per_update[(4, 1, "float32")] < 2.3e6
    assert 0.45 < per_update[(4, 1, "float16")] / per_update[(4, 1, "float32")] < 0.55


def test_a_sparse_model_sends_only_the_rows_it_looked_up():
    from simdist.training.ps_sweeps import ps_bandwidth_sweep

    dense, sparse = ps_bandwidth_sweep(configs=({"workers": 4},
                                                {"workers": 4, "model": "sparse"}),
                                       features=500_000, steps=6)
    assert sparse["updates_per_s"] > 3 * dense["updates_per_s"]
    initial = 500_000 * 4  # the initial value of the weights goes to the ps once
    per_update = (sparse["ps_received_bytes"] - initial) / sparse["global_step"]
    assert per_update < 1000  # 2 examples x 8 looked-up values and their ids
    with pytest.raises(tf.errors.InvalidArgumentError, match="sparse model is built for "
                                                            "one ps"):
        train_on_ps(mode="async", model="sparse", ps=2)


def test_embedding_lookup_runs_with_its_params_as_in_tf():
    # TF 2.21: under replica_device_setter, embedding_lookup's gather is colocated with the
    # variable (on the ps); only the rows it looks up go to the worker
    cluster, *_ = _cluster(1)
    with tf.device(tf.train.replica_device_setter(cluster=cluster,
                                                  worker_device="/job:worker/task:0")):
        v = tf.get_variable("v", initializer=np.zeros((10, 4), np.float32))
        rows = tf.nn.embedding_lookup(v, tf.constant([1, 2]))
    assert rows.op.colocate is not None and rows.op.colocate.name == "v"


def test_a_worker_index_outside_the_cluster_is_refused_where_tf_refuses_it():
    from simdist.hardware.cluster import TaskIndexError
    from simdist.base.errors import InvalidArgumentError

    cluster, ps, workers = _cluster(2)
    with pytest.raises(TaskIndexError, match="task index 5 out of range for job 'worker': "
                                             "the cluster has worker:0..worker:1"):
        tf.train.Server(cluster, "worker", 5)

    def client():  # replica_device_setter does not check; the placer does, as in TF
        graph = tf.Graph()
        with graph.as_default():
            with tf.device(tf.train.replica_device_setter(
                    worker_device="/job:worker/task:5", cluster=cluster)):
                w = tf.get_variable("w", initializer=np.float32(1.0))
                y = w * 2.0
            assert (w.device, y.device) == ("/job:ps/task:0", "/job:worker/task:5")
            with tf.Session(workers[0].target) as sess:
                sess.run(tf.global_variables_initializer())
                sess.run(y)

    with pytest.raises(InvalidArgumentError, match=r"was explicitly assigned to "
                       r"/job:worker/task:5 but available devices are \[ /job:worker/replica:0"):
        tf.simulate_clients({"worker:0": client, "ps": ps.join})


def _chief_job_cluster():
    tf.stop_all_servers()
    cluster = tf.train.ClusterSpec({"chief": ["localhost:2221"], "ps": ["localhost:2222"],
                                    "worker": ["localhost:2223"]})
    return {f"{j}:{i}": tf.train.Server(cluster, j, i) for j in cluster.jobs
            for i in cluster.task_indices(j)}


def _session_client(servers, task, is_chief, max_wait_secs=7200):
    def client():
        graph = tf.Graph()
        with graph.as_default():
            with tf.device("/job:ps/task:0"):
                tf.train.get_or_create_global_step()
            with tf.train.MonitoredTrainingSession(master=servers[task].target,
                                                   is_chief=is_chief,
                                                   max_wait_secs=max_wait_secs):
                pass
    return client


def test_a_worker_acting_as_chief_beside_a_chief_job_is_refused():
    from simdist.base.errors import InvalidArgumentError

    servers = _chief_job_cluster()
    with pytest.raises(InvalidArgumentError, match=r"is_chief=True on worker:0, but this cluster has a "
                                        r"chief job, so chief:0 is the chief.*TensorFlow "
                                        r"accepts this; simdist does not"):
        tf.simulate_clients({"worker:0": _session_client(servers, "worker:0", True),
                             "ps": servers["ps:0"].join})


def test_without_a_chief_the_others_give_up_after_max_wait_secs_instead_of_hanging():
    from simdist.base.errors import DeadlineExceededError

    servers = _chief_job_cluster()
    with pytest.raises(DeadlineExceededError, match="Session was not ready after waiting "
                                                    "120 secs"):
        tf.simulate_clients({"worker:0": _session_client(servers, "worker:0", False, 120),
                             "ps": servers["ps:0"].join})


def test_a_sparse_accumulator_averages_each_row_over_the_gradients_that_brought_it():
    # the values real TF 2.21 gives for the same program (probed with tf.compat.v1)
    def slices(values, indices):
        return tf.IndexedSlices(tf.constant(np.array(values, np.float32)),
                                tf.constant(np.array(indices, np.int64)),
                                tf.constant(np.array([4, 2], np.int64)))

    accumulator = tf.SparseConditionalAccumulator(tf.float32, shape=(), shared_name="x")
    first = slices([[1., 1.], [2., 2.]], [0, 2])
    apply_first = accumulator.apply_indexed_slices_grad(first, local_step=0)
    apply_second = accumulator.apply_indexed_slices_grad(
        slices([[3., 3.], [5., 5.]], [2, 3]), local_step=0)
    stale = accumulator.apply_indexed_slices_grad(first, local_step=0)
    take = accumulator.take_indexed_slices_grad(2)
    assert (accumulator.accumulator_ref.op.type, apply_first.type, take.values.op.type) == (
        "SparseConditionalAccumulator", "SparseAccumulatorApplyGradient",
        "SparseAccumulatorTakeGradient")
    with tf.Session() as sess:
        sess.run([apply_first, apply_second])
        assert sess.run(accumulator.num_accumulated()) == 2
        taken = sess.run(take)
        assert taken.indices.tolist() == [0, 2, 3]
        assert taken.values.tolist() == [[1., 1.], [2.5, 2.5], [5., 5.]]  # row 2: (2 + 3) / 2
        assert taken.dense_shape.tolist() == [-1, 2]
        sess.run(stale)  # local step 0 < the accumulator's step 1: dropped
        assert sess.run(accumulator.num_accumulated()) == 0


def test_a_sparse_accumulator_merges_as_tfs_kernel_does_repeated_indices_included():
    # TF 2.21: the first gradient is kept as it is; the next is merged by one walk in index
    # order, so the second 5 of [5, 5, 1] stays an entry of its own (probed on real TF)
    accumulator = tf.SparseConditionalAccumulator(tf.float32, shape=())

    def apply(values, indices, step):
        return accumulator.apply_grad(np.array(indices, np.int64),
                                      np.array(values, np.float32), local_step=step)

    first, take_one = apply([1., 2., 4.], [5, 5, 1], 0), accumulator.take_grad(1)
    again, second = apply([1., 2., 4.], [5, 5, 1], 1), apply([10., 20.], [5, 3], 1)
    take_two = accumulator.take_indexed_slices_grad(2)
    with tf.Session() as sess:
        sess.run(first)
        indices, values, shape = sess.run(take_one)
        assert indices.tolist() == [5, 5, 1] and values.tolist() == [1., 2., 4.]
        assert shape.tolist() == [-1]
        sess.run(again), sess.run(second)
        taken = sess.run(take_two)
        assert taken.indices.tolist() == [5, 3, 5, 1]
        assert taken.values.tolist() == [5.5, 20., 2., 4.]  # (1 + 10) / 2 for the first 5


def test_sync_replicas_trains_a_sparse_model_through_sparse_accumulators():
    run = train_on_ps(workers=3, mode="sync", model="sparse", steps=6,
                      step_us=[1000, 1000, 3000], replicas_to_aggregate=2)
    assert run.global_step == 6
    by_worker = run.gradients_by_worker()
    assert sum(applied for applied, _ in by_worker.values()) >= 2 * 6
    assert by_worker[2][1] > 0  # the slow worker is always late, but for a last gradient
    assert not [i for i in run.trace.instants if i.name == "gradient applied" and
                i.args["source"] == "/job:worker/task:2" and i.args["local_step"] < 6]
    accumulators = {i.args["accumulator"] for i in run.trace.instants
                    if i.name == "gradient applied"}
    assert accumulators == {"w:0/grad_accum", "b:0/grad_accum"}  # w: the embedding
    kinds = {s.name.rsplit("/", 1)[-1] for s in run.trace.spans}
    assert {"SparseAccumulatorTakeGradient", "ScatterSub"} <= kinds, kinds
