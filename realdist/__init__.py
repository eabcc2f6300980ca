"""realdist: the DistLab exercises on real TensorFlow (logical CPUs, localhost clusters, GPUs).

It records the same trace schema as simdist (``simdist.trace``) so that a simulated and a real
run can be set side by side. The strategy runners arrive with the synchronous data-parallelism
work (see ../shared/ROADMAP.md); this package never runs at simdist's import time.
"""
