"""Programs on real TensorFlow, mirroring ``simdist.training``: the custom training loop
and models, ParameterServerStrategy's coordinator program and evaluation, TF1 parameter-server
and queue programs with their worker processes, and their comparisons with simdist.

May import ``realdist.runtime`` and ``realdist.graph``, and simdist's spec and trace.
"""
