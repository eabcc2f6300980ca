"""tf.train.Saver, latest_checkpoint and MonitoredTrainingSession's checkpoints in simdist,
against what TF 2.21 does (the returned prefix, the `checkpoint` state file, max_to_keep,
the error for a missing checkpoint), and the chief restoring instead of initializing."""

import numpy as np
import pytest

import simdist.graph as tf

pytestmark = pytest.mark.usefixtures("fresh_tf1")


def test_save_and_restore_as_tf(tmp_path):
    v = tf.Variable([1.0, 2.0], name="v")
    step = tf.train.get_or_create_global_step()
    saver = tf.train.Saver(max_to_keep=2)
    prefix = str(tmp_path / "model.ckpt")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saved = [saver.save(sess, prefix, global_step=s) for s in (0, 5)]
        sess.run(tf.assign(v, [7.0, 7.0]))
        saved.append(saver.save(sess, prefix, global_step=step))  # a variable: its value
    assert saved == [prefix + "-0", prefix + "-5", prefix + "-0"]
    state = (tmp_path / "checkpoint").read_text()
    # TF 2.21: the newest first, then the kept ones oldest first; max_to_keep=2 deletes
    assert state == (f'model_checkpoint_path: "{prefix}-0"\n'
                     f'all_model_checkpoint_paths: "{prefix}-5"\n'
                     f'all_model_checkpoint_paths: "{prefix}-0"\n')
    assert tf.train.latest_checkpoint(tmp_path) == prefix + "-0"
    assert tf.train.latest_checkpoint(tmp_path / "nothing") is None
    with tf.Session() as sess:
        saver.restore(sess, prefix + "-5")
        assert sess.run(v).tolist() == [1.0, 2.0]
        saver.restore(sess, prefix + "-0")
        assert sess.run(v).tolist() == [7.0, 7.0]
        with pytest.raises(ValueError, match="The passed save_path is not a valid "
                                             f"checkpoint: {prefix}-3"):
            saver.restore(sess, prefix + "-3")


def test_saving_takes_the_time_of_the_bytes_on_the_tasks_that_hold_them(tmp_path):
    from simdist.graph.saver import DISK_BYTES_PER_S

    big = tf.Variable(np.zeros(1_000_000, np.float32), name="big")  # 4 MB
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(big.initializer)
        saver.save(sess, str(tmp_path / "m"))
        spans = [s for s in sess.last_run.trace.spans if s.name == "save/SaveV2"]
    assert spans and spans[0].dur >= 4e6 / DISK_BYTES_PER_S * 1e9 * 0.99


def test_monitored_training_session_restores_the_latest_checkpoint(tmp_path):
    def train(last_step):
        tf.reset_default_graph()
        step = tf.train.get_or_create_global_step()
        w = tf.Variable(np.zeros(3, np.float32), name="w")
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
            tf.reduce_sum(tf.square(w - 1.0)), global_step=step)
        hooks = [tf.train.StopAtStepHook(last_step=last_step)]
        with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), hooks=hooks,
                                               save_checkpoint_steps=2) as sess:
            restored = sess.restored_from
            while not sess.should_stop():
                sess.run(train_op)
            return restored, int(sess.run(step)), sess.run(w)

    first = train(5)
    assert first[0] is None and first[1] == 5
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["checkpoint"] + [f"model.ckpt-{s}.npz" for s in (0, 2, 4, 5)]
    restored, step, w = train(8)
    assert restored == str(tmp_path / "model.ckpt-5") and step == 8
    expected = 1 - 0.8 ** 8  # w moves 20% of the way to 1 each step, 8 steps in all
    assert np.allclose(w, expected, atol=1e-5)


def test_bad_input():
    with pytest.raises(ValueError, match="No variables to save"):
        tf.train.Saver()
    tf.Variable(1.0, name="x")
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_to_keep=-1"):
        tf.train.Saver(max_to_keep=-1)
    with pytest.raises(ValueError, match="exactly one of every_n_secs and every_n_steps"):
        tf.train.CheckpointSaverHook("/tmp/x")
