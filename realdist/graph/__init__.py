"""TF1 graph mode on real TensorFlow: the snippets beside ``simdist.graph``, and the facts
real TF1 queues show, probed in a child process.

May import ``realdist.runtime`` and simdist's spec, errors and trace.
"""
