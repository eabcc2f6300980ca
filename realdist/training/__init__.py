"""Programs on real TensorFlow, mirroring ``simdist.training``: the custom training loop, its
models and its RunResult (``loop``, ``models``, ``loop_result``); ParameterServerStrategy's
runner, coordinator loop, evaluation, report and ``Model.fit`` (``parameter_server_*``); the
TF1 parameter-server and queue programs with their task processes (``ps_*``, ``queue_*``)
and their comparisons with simdist.

May import ``realdist.runtime``, and simdist's errors, units, trace schema, failures and
training programs (the spec each program mirrors); nothing of ``realdist.distribute``.
"""
