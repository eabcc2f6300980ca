"""The course tooling: the lesson format and its checks, the learner's workspace and language,
notebooks generated from lessons, ``mpiexec`` exercises, and the course site.

It finds the lessons where ``DISTLAB_LESSONS`` points, else in a checkout (``lessons/`` beside
this package), else in the working directory or a parent of it (``folders.lessons_dir``).
May import simdist and realdist; nothing of simdist or realdist imports it except simdist's
command layer.
"""
