"""What every real run stands on: TensorFlow imported quietly (``tfenv``), logical devices
(``devices``), the child processes that run TF programs (``processes``), the localhost
cluster launcher with its loopback-only private network (``localcluster``), progress bars
(``progress``), and real runs in simdist's RunResult and trace schema (``trace``).

May import simdist's errors, trace schema and exercise records; nothing of realdist above it.
"""
