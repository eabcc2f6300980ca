"""What every real run stands on: TensorFlow imported quietly, logical devices, localhost
clusters behind a loopback-only network, progress bars, and real runs in simdist's trace
schema.

May import simdist's base, hardware and trace; nothing of realdist above it.
"""
