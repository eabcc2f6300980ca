"""The tf.distribute strategies on real TensorFlow: the in-process ones, MultiWorkerMirrored
as one process per worker, ParameterServerStrategy on a localhost cluster, and TF's own split
of a global batch.

May import ``realdist.runtime``, ``realdist.training`` (the loops) and simdist's spec.
"""
