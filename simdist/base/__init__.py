"""Ground: the errors every layer raises, the files a user hands in or a run writes, and the
rules for the options commands and the Python API share (``checks``).

Imports nothing of simdist; every other package may import it.
"""
