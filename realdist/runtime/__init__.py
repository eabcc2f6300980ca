"""What every real run stands on: TensorFlow imported quietly (``tfenv``), logical devices
(``devices``), the child processes that run TF programs (``processes``), the localhost
cluster launcher with its loopback-only private network (``localcluster``), and progress
bars (``progress``).

May import simdist's base (errors); nothing of realdist above it, no concept of simdist.
"""
