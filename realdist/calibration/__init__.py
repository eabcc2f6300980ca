"""Measuring exercises' step times on real TensorFlow for ``simdist calibrate`` and
``simdist bench predict``, with simdist's measuring protocol.

May import ``realdist.runtime`` and ``realdist.distribute``.
"""
