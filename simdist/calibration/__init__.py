"""Calibration: the hardware profile whose simulated step times best match measured ones:
the plan of exercises to measure, the measuring protocol (shared with realdist), the fit,
and a user's own tables of measured times.

May import ``simdist.training`` and everything below it; never the command line.
"""
