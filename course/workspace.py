"""The learner's workspace: ``my_exercises/``, an untracked copy of the lesson stubs.

``simdist lesson start NN`` copies ``lessons/NN_slug/exercises.py`` to
``my_exercises/NN_slug/exercises.py``; ``simdist check NN``, the notebooks' check cells and
the ``mpiexec`` exercises read that copy when it exists (else the untouched stub). The folder
is git-ignored, so ``git pull`` never meets the learner's work. ``DISTLAB_WORKSPACE`` (or a
``workspace`` argument) puts it elsewhere.

The workspace also keeps ``.progress.json``: for each lesson and exercise, how many times its
checks failed in a row and whether they passed last time. The hint level comes from it: the
idea on a first failure, the detail from the second on.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from course.folders import EXERCISES, course_root
from simdist.base.errors import InvalidArgumentError
from simdist.base.files import atomic_output, write_atomic

#: the default workspace's folder, beside lessons/
WORKSPACE = "my_exercises"
STATE = ".progress.json"


def workspace_dir(workspace=None) -> Path:
    """``workspace``, else ``$DISTLAB_WORKSPACE``, else ``my_exercises/`` beside the lessons
    folder (``folders.course_root``)."""
    if workspace is not None:
        return Path(workspace)
    env = os.environ.get("DISTLAB_WORKSPACE")
    return Path(env) if env else course_root() / WORKSPACE


def workspace_file(lesson_dir, workspace=None) -> Path:
    """Where the learner's copy of a lesson's exercises lives (whether or not it exists)."""
    return workspace_dir(workspace) / Path(lesson_dir).name / EXERCISES


def exercise_file(lesson_dir, workspace=None) -> Path:
    """The learner's copy if the lesson was started, else the lesson's own stub."""
    mine = workspace_file(lesson_dir, workspace)
    return mine if mine.is_file() else Path(lesson_dir) / EXERCISES


def start(lesson_dir, workspace=None, force: bool = False) -> tuple[Path, bool]:
    """Copy a lesson's stubs into the workspace: (the copy, whether it was written now).

    An existing copy is kept (it holds the learner's work) unless ``force``."""
    lesson_dir = Path(lesson_dir)
    target = workspace_file(lesson_dir, workspace)
    if target.exists() and not force:
        return target, False
    with atomic_output(target) as tmp:
        shutil.copyfile(lesson_dir / EXERCISES, tmp)
    ignore = workspace_dir(workspace) / ".gitignore"
    if not ignore.exists():  # ignored even in a clone whose .gitignore lacks the folder
        write_atomic(ignore, "# the learner's own work: never committed\n*\n")
    return target, True


class Progress:
    """``.progress.json`` of a workspace: failures in a row and last outcome per exercise."""

    def __init__(self, workspace=None):
        self.path = workspace_dir(workspace) / STATE
        try:
            self.data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(self.data, dict):
                raise ValueError("not an object")
        except FileNotFoundError:
            self.data = {}
        except ValueError as error:
            raise InvalidArgumentError(f"{self.path} is not a progress file ({error}): "
                                       "delete it to start counting again") from None

    def entry(self, lesson: str, exercise: str) -> dict:
        return self.data.get(lesson, {}).get(exercise, {"failures": 0, "passed": False})

    def failures(self, lesson: str, exercise: str) -> int:
        return int(self.entry(lesson, exercise).get("failures", 0))

    def record(self, lesson: str, exercise: str, passed: bool) -> int:
        """One checked run of an exercise; returns its failures in a row so far."""
        failures = 0 if passed else self.failures(lesson, exercise) + 1
        self.data.setdefault(lesson, {})[exercise] = {"failures": failures, "passed": passed}
        return failures

    def save(self) -> None:
        write_atomic(self.path, json.dumps(self.data, indent=1, sort_keys=True) + "\n")
