"""Benchmarks: commands that print a measured figure next to its reference, as a ratio."""
