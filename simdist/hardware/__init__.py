"""Hardware: clusters (ClusterSpec, TF_CONFIG), device strings, device and link profiles, the
cost model, the built-in catalog with its sources, and units.

Pure: no simulation, no events. May import ``simdist.base`` only.
"""
