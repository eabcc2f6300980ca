"""Lesson 02, One machine, many devices: your exercises.

Replace each ``raise NotImplementedError(...)`` with your code, then check it:

    simdist lesson start 02       # once: copies this file to my_exercises/
    simdist check 02              # all checks of this lesson, with hints

The notebook notebooks/02_mirrored.ipynb explains everything these exercises need.
"""

import numpy as np  # noqa: F401  (you will need it)

from simdist.distribute import compute_average_loss  # noqa: F401


def split_batch(x, y, num_replicas):
    """Exercise 1 (★): cut one global batch into per-replica batches, as TensorFlow does.

    ``x`` and ``y`` are numpy arrays with the same first dimension B (the global batch).
    Return a list of ``num_replicas`` pairs ``(x_r, y_r)``, replica 0 first, that
    ``strategy.experimental_distribute_dataset`` would give each replica for this batch:

    - every replica gets ceil(B / num_replicas) consecutive examples, in replica order,
      until the batch runs out: 7 examples over 4 replicas is 2, 2, 2, 1;
    - so the last replicas may get fewer, or none: 6 over 4 is 2, 2, 2, 0, and a final
      partial batch of 1 example over 4 replicas is 1, 0, 0, 0 (an empty replica batch is an
      array of length 0 with the same trailing shape);
    - every example goes to exactly one replica, in its original order.

    Write the rule yourself (``simdist.distribute.input_lib.split_global_batch`` is the reference the check
    compares with).
    """
    raise NotImplementedError("exercise split_batch: cut the global batch into "
                              "per-replica batches")


def replica_step(model, weights, x, y, global_batch_size):
    """Exercise 2 (★★): one replica's loss and gradients, scaled so that replicas add up right.

    ``model`` is a simdist model (``simdist.training.models``): ``model.per_example_loss(weights, x,
    y)`` is the loss of every example of this replica's batch (a numpy array, possibly of
    length 0), and ``model.gradients(weights, x, y, scale)`` is the gradient of ``scale *
    sum(per-example losses)`` (a dict like ``weights``). ``global_batch_size`` is the number
    of examples in the whole global batch of this step (over every replica).

    Return ``(loss, grads)``: this replica's share of the step's loss (a float32 scalar, as
    TF's float32 variables give) and its share of the gradient (float32 arrays). The strategy
    then SUMs ``grads`` over the replicas (``batch_reduce_to(ReduceOp.SUM, ...)``) and applies
    ``w - lr * summed``, and SUMs the losses for the report: with any number of replicas, however unevenly the batch was
    split, the summed loss must be the global batch's mean loss and the summed gradient the
    gradient of that mean, exactly what one device computes on the whole batch.

    ``tf.nn.compute_average_loss`` (here ``simdist.distribute.compute_average_loss``) does
    the loss part.
    """
    raise NotImplementedError("exercise replica_step: return this replica's scaled loss "
                              "and gradients")


def predict_step_bytes(strategy, replicas, nbytes):
    """Exercise 3 (★★): how many bytes of gradients and variables move in one training step?

    One machine runs ``replicas`` replicas (GPUs); the model's gradient is ``nbytes`` bytes
    (float32, the same size as the variables), packed into one buffer. ``strategy`` is one of:

    - ``"one_device"``: OneDeviceStrategy (replicas is 1);
    - ``"reduction_to_one"``: MirroredStrategy(cross_device_ops=ReductionToOneDevice()):
      every device sends its gradient to device 0, which adds them and sends the sum back;
    - ``"nccl"``: MirroredStrategy(cross_device_ops=NcclAllReduce()): a ring all-reduce
      over the devices (reduce-scatter, then all-gather; lesson 01);
    - ``"hierarchical_copy"``: MirroredStrategy(cross_device_ops=HierarchicalCopyAllReduce()):
      the devices form two halves (the first ceil(replicas / 2) devices and the rest); each
      half reduces onto its first device, the two leaders all-reduce with a ring of two,
      and each leader sends the result to the other devices of its half;
    - ``"central_storage"``: CentralStorageStrategy: the variables live once on the host
      CPU; each step the host sends them to every device, and every device sends its
      gradient back to the host, which adds them and updates the variables.

    Return ``(total, busiest)``: the bytes sent in the step by all devices (and the host)
    together, and the most bytes sent by any single one of them. Count the messages of the
    gradient exchange and the variable reads only (the step's 4-byte loss reduction is left
    out). The check runs each case in the simulator and accepts answers within 1%.
    """
    raise NotImplementedError("exercise predict_step_bytes: return (total bytes, bytes sent "
                              "by the busiest device)")


def predict_reported_loss(data_loss, regularization_loss, num_replicas, global_batch_size,
                          scaling):
    """Exercise 4 (★★): predict the loss that ``strategy.reduce(SUM, ...)`` reports when every
    replica adds a regularization loss.

    ``num_replicas`` replicas of MirroredStrategy train on a global batch of
    ``global_batch_size`` examples, split as TF splits it. ``data_loss`` is the mean
    per-example loss over the whole global batch (what one device computes, with no
    penalty); ``regularization_loss`` is the penalty R = l2 * sum(w ** 2), which every
    replica computes from its own (identical) copy of the weights. Each replica's loss is
    built one of four ways (``scaling``):

    - ``"scale_regularization_loss"``: ``compute_average_loss(per_example, B)
      + tf.nn.scale_regularization_loss(R)``;
    - ``"none"``: ``compute_average_loss(per_example, B) + R``;
    - ``"per_example"``: ``compute_average_loss(per_example + R, B)`` (R added to each of the
      replica's examples first);
    - ``"global_batch"``: ``compute_average_loss(per_example, B) + R / B``.

    Return the number the loop prints: the SUM over the replicas of their losses. The
    gradient of the penalty is scaled the same way, so your answer also says how strongly
    the weights decay.
    """
    raise NotImplementedError("exercise predict_reported_loss: return the summed loss")
