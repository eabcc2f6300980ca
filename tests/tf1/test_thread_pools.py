"""A local session's inter-op pools, as TF 2.21's DirectSession has them.

The values are those real TF gave for six independent ops (each sleeping 50 ms in a
``py_func``, the most that ran at once counted): the process's global pool keeps the size of
the first session that made it (2), a later session asking 4 still gets 2;
``use_per_session_threads`` gives 4 and 1; ``session_inter_op_thread_pool`` entries of 3 and
1 threads, chosen per run by ``RunOptions.inter_op_thread_pool``; a second session naming
the same ``global_name`` with 2 threads gets the first one's 1; ``num_threads`` 0 means
``inter_op_parallelism_threads`` (5); an index past the pools is "Invalid
inter_op_thread_pool: 2"; -1 runs on the caller's thread alone.
"""

import numpy as np
import pytest

import simdist.graph as tf
from simdist.graph._sim.runtime import _PROCESS_POOLS

OPS = 6


def _ops():
    tf.reset_default_graph()
    m = np.ones((64, 64), np.float32)
    outs = []
    for i in range(OPS):
        with tf.device(f"/cpu:{i}"):
            outs.append(tf.matmul(tf.constant(m), tf.constant(m), name=f"op{i}"))
    return outs


def _most_at_once(config, options=None) -> int:
    """How many of the six matmuls ran at once (each on its own CPU device)."""
    outs = _ops()
    config.device_count = {"CPU": OPS}
    with tf.Session(config=config) as sess:
        sess.run(outs, options=options)
        spans = [s for s in sess.last_trace.spans if s.name.startswith("op")]
    return max(sum(1 for t in spans if t.start <= s.start < t.end) for s in spans)


def test_the_global_pool_keeps_its_first_size_and_per_session_pools_their_own():
    # a default config: a first session with another size would change this test process's
    # later sessions (as in TF), the golden traces' among them
    first = _most_at_once(tf.ConfigProto())
    size = _PROCESS_POOLS[""]  # whichever session of this process made it first
    assert first == min(size, OPS)
    assert _most_at_once(tf.ConfigProto(inter_op_parallelism_threads=1)) == first
    assert _most_at_once(tf.ConfigProto(inter_op_parallelism_threads=4,
                                        use_per_session_threads=True)) == 4
    assert _most_at_once(tf.ConfigProto(inter_op_parallelism_threads=1,
                                        use_per_session_threads=True)) == 1


def test_session_pools_are_chosen_per_run_and_named_ones_are_shared():
    name = "test_thread_pools_shared"
    _PROCESS_POOLS.pop(name, None)
    config = tf.ConfigProto(session_inter_op_thread_pool=[
        tf.ThreadPoolOptionProto(num_threads=3), {"num_threads": 1, "global_name": name}])
    assert _most_at_once(config) == 3
    assert _most_at_once(config, tf.RunOptions(inter_op_thread_pool=1)) == 1
    assert _most_at_once(config, tf.RunOptions(inter_op_thread_pool=-1)) == 1
    again = tf.ConfigProto(session_inter_op_thread_pool=[
        tf.ThreadPoolOptionProto(num_threads=2, global_name=name)])
    assert _most_at_once(again) == 1  # the name's first creator's size holds
    default = tf.ConfigProto(inter_op_parallelism_threads=5,
                             session_inter_op_thread_pool=[tf.ThreadPoolOptionProto()])
    assert _most_at_once(default) == 5
    with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid inter_op_thread_pool: 2"):
        _most_at_once(config, tf.RunOptions(inter_op_thread_pool=2))


def test_bad_pool_options_are_one_clear_error():
    with pytest.raises(tf.errors.InvalidArgumentError, match="num_threads -1"):
        tf.ThreadPoolOptionProto(num_threads=-1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="entry 3"):
        tf.ConfigProto(session_inter_op_thread_pool=[3])
    with pytest.raises(tf.errors.InvalidArgumentError, match="use_per_session_threads 1"):
        tf.ConfigProto(use_per_session_threads=1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="inter_op_thread_pool='0'"):
        tf.RunOptions(inter_op_thread_pool="0")
