"""Measuring exercises' step times on real TensorFlow for ``simdist calibrate`` and
``simdist bench predict``, with simdist's measuring protocol (``measure``).

May import ``realdist.runtime`` and the runners of ``realdist.distribute`` (through
``realdist.run_exercise``, which calls the one an exercise's strategy record names), and
simdist's exercises, errors and measuring protocol.
"""
