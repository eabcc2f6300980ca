"""The runners that the strategy records (``simdist.distribute.registry``) name: an exercise
trained with a real tf.distribute strategy, in process (``strategies``), as one process per
worker (MultiWorkerMirrored, ``multiworker``) or on a localhost parameter-server cluster
(``parameter_server``, whose runner is ``realdist.training``'s); and TF's own split of a
global batch (``split``).

May import ``realdist.runtime`` and ``realdist.training`` (the loop, models and results, the
parameter-server runner), and simdist's errors, cluster and exercises.
"""
