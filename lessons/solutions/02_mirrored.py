"""Lesson 02, One machine, many devices: reference solutions (same names as exercises.py)."""

import math

from simdist.distribute import compute_average_loss


def split_batch(x, y, num_replicas):
    """ceil(B / N) consecutive examples per replica, in order, until the batch runs out."""
    per = math.ceil(len(x) / num_replicas)
    return [(x[r * per:(r + 1) * per], y[r * per:(r + 1) * per]) for r in range(num_replicas)]


def replica_step(model, weights, x, y, global_batch_size):
    """Sum of this replica's losses / the GLOBAL batch size; the gradient scaled the same."""
    loss = compute_average_loss(model.per_example_loss(weights, x, y), global_batch_size)
    grads = model.gradients(weights, x, y, 1.0 / global_batch_size)
    return loss, grads


def predict_step_bytes(strategy, replicas, nbytes):
    """(total bytes sent, bytes sent by the busiest device or host) per step."""
    p, n = replicas, nbytes
    if strategy == "one_device" or p == 1:
        return 0, 0
    if strategy == "reduction_to_one":
        # p - 1 gradients to device 0, then p - 1 copies of the sum back from it
        return 2 * (p - 1) * n, (p - 1) * n
    if strategy == "nccl":
        # every device sends 2(p-1) chunks of n/p
        return 2 * (p - 1) * n, 2 * (p - 1) * n / p
    if strategy == "hierarchical_copy":
        # a leader with g devices in its half: the ring of two leaders (n), then g - 1 copies
        g = math.ceil(p / 2)
        return 2 * (p - 1) * n, n + (g - 1) * n
    if strategy == "central_storage":
        # the host sends the variables to each device, each device its gradient to the host
        return 2 * p * n, p * n
    raise ValueError(f"unknown strategy {strategy!r}")


def predict_reported_loss(data_loss, regularization_loss, num_replicas, global_batch_size,
                          scaling):
    """The data shares add up to the global mean; the penalty counts once per replica, times
    whatever each replica scaled it by."""
    n, b, r = num_replicas, global_batch_size, regularization_loss
    share = {"scale_regularization_loss": r / n,  # N shares of R / N: R once
             "none": r,  # N replicas add the whole R: N times R
             "per_example": None,  # n_r examples carry R, / B: sum n_r R / B = R
             "global_batch": r / b}[scaling]
    return data_loss + (r if share is None else n * share)
