"""The course tooling: the lesson format and its checks, the learner's workspace and language,
notebooks generated from lessons, ``mpiexec`` exercises, and the course site.

It finds the lessons in a checkout (``lessons/`` beside this package) or where
``DISTLAB_LESSONS`` points. May import simdist and realdist; nothing of simdist or realdist
imports it except simdist's command layer.
"""
