"""Ground: the errors every layer raises and the files a user hands in or a run writes.

Imports nothing of simdist; every other package may import it.
"""
