"""Programs on real TensorFlow, mirroring ``simdist.training``: the custom training loop and
models every runner uses (``loop``, ``models``); ParameterServerStrategy's coordinator loop,
its evaluation, its report as a RunResult and ``Model.fit`` (``parameter_server_*``); the TF1
parameter-server and queue programs with their task processes (``ps_*``, ``queue_*``) and
their comparisons with simdist.

May import ``realdist.runtime``, and simdist's errors, units, trace schema, failures and
training programs (the spec each program mirrors). Two reach up to the parameter-server
runner, ``realdist.distribute.parameter_server``: ``parameter_server_eval.run_evaluation``
runs it, and ``parameter_server_fit`` starts its server tasks.
"""
