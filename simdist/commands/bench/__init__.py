"""Benchmarks: commands that print a measured figure next to its reference, as a ratio.

Part of the command layer: may import every package of simdist (never realdist or course).
"""
