"""Lesson 14, Measured speed-ups: reference solutions."""


def choose_global_batch():
    """One GPU's step is a*G; eight GPUs' is a*G/8 + c (the all-reduce, the same whatever
    the batch). At G = 128 the speed-up is 6.77 = 8 / (1 + 8c/(128a)), so 8c/a = 23.3;
    at 256 it is 8 / (1 + 23.3/256) = 7.33 >= 7, at 64 8 / (1 + 23.3/64) = 5.87: 256."""
    return 256


def why_logical_devices():
    """Logical CPUs are shares of the same two cores: the replicas take turns."""
    return "a"


def scale_learning_rate():
    """The linear scaling rule: the global batch grows from 64 to 8 x 32 = 256, 4 times, so
    the learning rate goes from 0.1 to 0.4."""
    return 0.4


def predict_grouped():
    """VGG-16's gradients are 138.4M x 4 bytes = 553 MB. Grouped 4 x 2, the hierarchical
    all-reduce reduces inside each machine over NVLink, then a ring of the 4 leaders sends
    2(4-1)/4 = 1.5 x 553 = 830 MB from each machine's NIC, then broadcasts inside. The step:
    the 1 x 8 run's 410 ms (compute and NVLink) plus 830 MB at 3.125 GB/s, 266 ms: about
    676 ms (simulated: 653.5 ms)."""
    return 830.0, 676.0
