"""``tf.nn.scale_regularization_loss`` against the values real TF 2.21 gave (MirroredStrategy
on 3 and 4 logical CPUs, every replica the same value; the default strategy for 1)."""

import numpy as np
import pytest

from simdist.base.errors import InvalidArgumentError
from simdist.distribute import scale_regularization_loss


@pytest.mark.parametrize("losses, replicas, real_tf", [
    ([0.3, 0.5], 3, 0.2666666805744171),  # a list of scalars: summed, then / 3
    (np.array([1.0, 2.0, 4.0]), 3, 2.3333332538604736),  # a tensor: reduce_sum / 3
    ([0.3, 0.5], 4, 0.20000000298023224),
    (np.array([1.0, 2.0, 4.0]), 4, 1.75),
    (np.array([0.1, 0.2]), 1, 0.30000001192092896),  # the default strategy: one replica
])
def test_the_sum_over_the_replicas_in_sync_as_real_tf(losses, replicas, real_tf):
    value = scale_regularization_loss(losses, replicas)
    assert value.dtype == np.float32 and float(value) == real_tf


def test_a_bad_replica_count_is_one_clear_error():
    with pytest.raises(InvalidArgumentError, match="num_replicas_in_sync must be an int >= 1, "
                                                   "got 0"):
        scale_regularization_loss([1.0], 0)
