"""TF1 graph mode on real TensorFlow: the snippets beside ``simdist.graph`` (placement,
replica_device_setter, clients sharing a variable through real servers: ``tf1``), and the
facts real TF1 queues show, probed in a child process (``queues``, ``queue_probe``,
``queue_probe_values``).

May import ``realdist.runtime``, and simdist's errors and TF1 API (to run the same snippet).
"""
