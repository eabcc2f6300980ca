"""Lesson 14, Measured speed-ups: your exercises.

Copy this file to your workspace once (``simdist lesson start 14``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 14`` (or the
check cells of the notebook).
"""


def choose_global_batch():
    """Exercise 1 (★★): ResNet-50 on one machine of GTX 1080 Ti GPUs on PCIe (the
    ``gtx1080ti-pcie-10gbe`` profile), an epoch of 50,000 images, the global batch cut evenly
    over the GPUs, the gradients all-reduced in a ring after every step. Section 1 drew the
    speed-up of an epoch at global batches 32, 128 and 512. What is the smallest global batch
    among 32, 64, 128, 256, 512, 1024 and 2048 with which 8 GPUs run an epoch at least 7
    times faster than one GPU at the same global batch? Return the int.
    """
    raise NotImplementedError("exercise choose_global_batch: return a global batch")


def why_logical_devices():
    """Exercise 2 (★): in section 2, MirroredStrategy on 2 logical CPU devices of this
    2-core machine does not run an epoch in half the time of 1 (at a small global batch it
    takes longer). Why?

    - "a": the logical devices share the machine's two cores: their replicas' passes take
      turns, and the copies and the reduction come on top;
    - "b": the all-reduce crosses the network between the devices;
    - "c": MirroredStrategy trains on the first device only when there is no GPU;
    - "d": the global batch is not cut evenly: one replica gets most of it.

    Return the letter, e.g. ``"b"``.
    """
    raise NotImplementedError("exercise why_logical_devices: return a letter")


def scale_learning_rate():
    """Exercise 3 (★): softmax regression on the digits trains well with MirroredStrategy on
    2 replicas, a global batch of 64 (32 a replica) and SGD at learning rate 0.1. You move to
    8 replicas, keeping 32 examples a replica. Which learning rate keeps the loss falling as
    fast per example seen as before (the rule of Goyal et al., 2017)? Return the float. The
    check trains both on the simulator and sets the losses side by side.
    """
    raise NotImplementedError("exercise scale_learning_rate: return a learning rate")


def predict_grouped():
    """Exercise 4 (★★★): VGG-16 (138.4M parameters, float32 gradients), 32 images per GPU,
    8 V100 GPUs as 4 machines of 2 (``v100-nvlink2-25gbe``: NVLink inside a machine, 25 GbE,
    3.125 GB/s, between machines), the gradients all-reduced by the hierarchical algorithm
    after the backward pass. Section 4 drew 8 machines of 1, 2 of 4 and 1 of 8. Predict the
    megabytes (1e6 bytes) machine 0's NIC sends in a step, and the step's time in ms. Return
    the pair of numbers ``(nic_mb, step_ms)``; the check wants the bytes within 2% and the
    step within 5%. Exercise 5 checks it with the workers on MPI ranks
    (``grouped_mpi.py``).
    """
    raise NotImplementedError("exercise predict_grouped: return (nic_mb, step_ms)")
