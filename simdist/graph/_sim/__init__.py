"""The TF1 API's binding to the simulator: one simulated world per TF1 job, the client
processes that call ``Session.run``, the machines and containers behind servers, and the
executor that runs a placed subgraph in simulated time.

Part of the TF API package (``simdist.graph``), whose modules may refer to each other as
TensorFlow's do; may import ``simdist.sim``, ``simdist.hardware`` and ``simdist.base``.
"""
