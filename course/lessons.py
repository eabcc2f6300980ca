"""The lesson format: find lessons and run their exercise checks.

A lesson is a folder ``lessons/NN_slug/`` holding:

- ``lesson.md``: the single source of truth, a Jupytext Markdown notebook (```python cells
  between Markdown prose), from which ``notebooks/NN_slug.ipynb`` is generated without
  outputs; ``lesson.zh.md`` is its Simplified Chinese edition (``notebooks/zh/``);
- ``exercises.py``: stubs, each raising ``NotImplementedError("exercise NAME: ...")`` until it
  is done; the learner edits a copy of them (``simdist lesson start NN``, see workspace.py);
- ``checks.py``: ``CHECKS``, a list of ``Check``s, each calling the learner's functions and
  returning a short message when they pass or raising ``CheckFailed(message, hint,
  detail)``; ``DIFFICULTY``, one to three stars per exercise; optionally ``PICTURES``,
  ``{exercise: draw(learner_module, reference_module) -> Figure}`` for the check cell;
- optionally ``*_mpi.py``: exercises as ``mpiexec`` programs.

The reference solutions live out of sight, in ``lessons/solutions/NN_slug.py``.

This module is what lessons, notebooks and checks import (``from course.lessons import
check``); the pieces live in ``folders`` (finding the lessons), ``checks`` (running them),
``report`` (``print_checks``, what ``simdist check NN`` runs), ``cell`` (``check(EXERCISE)``,
a notebook's check cell), ``status`` (``simdist check --all``) and ``lang`` (hints in two
languages). ``notebooks.py`` builds the notebooks. Nothing here imports TensorFlow.
"""

from __future__ import annotations

from course.cell import check, side_by_side
from course.checks import (Check, CheckFailed, load_checks, load_exercises, load_lesson_checks,
                           not_done_name, run_check, run_checks, target_file)
from course.folders import (CHECKS, EXERCISES, SOURCE, LessonError, find_lesson, lessons_dir,
                            list_lessons, load_module, solution_path)
from course.lang import localize, set_language, tr
from course.status import stars

__all__ = ["CHECKS", "EXERCISES", "SOURCE", "Check", "CheckFailed", "LessonError", "check",
           "find_lesson", "lessons_dir", "list_lessons", "load_checks", "load_exercises",
           "load_lesson_checks", "load_module", "localize", "not_done_name", "run_check",
           "run_checks", "set_language", "side_by_side", "solution_path", "stars",
           "target_file", "tr"]


def __getattr__(name: str):
    """``LESSONS_DIR``, the lessons folder the course finds (``lessons_dir()``), looked up when
    it is read, so that an installed package imports without one."""
    if name == "LESSONS_DIR":
        return lessons_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
