"""Where the course is on disk, and what a lesson folder holds.

The course is a folder holding ``lessons/`` (one ``NN_slug/`` folder per lesson and
``solutions/``), with ``notebooks/`` and the learner's ``my_exercises/`` beside it: a checkout of
the repository, or a copy of its ``lessons/`` and ``notebooks/`` next to an installed package.
``lessons_dir()`` finds it: ``$DISTLAB_LESSONS``, else ``lessons/`` beside this package (a
checkout or an editable install), else ``lessons/`` in the working directory or its nearest
parent that has one.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

from simdist.base.errors import NotFoundError

#: the environment variable that names the lessons folder
ENV = "DISTLAB_LESSONS"

SOURCE = "lesson.md"
EXERCISES = "exercises.py"
CHECKS = "checks.py"
SOLUTIONS = "solutions"  # lessons/solutions/NN_slug.py

_LESSON_NAME = re.compile(r"^(\d{2})_[a-z0-9_]+$")

#: the folder that holds this package: lessons/ sits beside it in a checkout
_CHECKOUT = Path(__file__).resolve().parent.parent


class LessonError(NotFoundError):
    """A lesson, or one of its files, that does not exist."""


def _holds_lessons(folder: Path) -> bool:
    return folder.is_dir() and any(_is_lesson(d) for d in folder.iterdir())


def _is_lesson(folder: Path) -> bool:
    return folder.is_dir() and bool(_LESSON_NAME.match(folder.name)) and \
        (folder / SOURCE).is_file()


def _find_lessons_dir() -> Path:
    """``$DISTLAB_LESSONS``, else the checkout's lessons/, else the working directory's (or its
    nearest parent's); a LessonError naming where it looked when there is none."""
    named = os.environ.get(ENV)
    if named:
        if not Path(named).is_dir():
            raise LessonError(f"{ENV}={named} is not a folder: point it at the lessons/ folder "
                              "of a DistLab checkout")
        return Path(named)
    here = Path.cwd()
    for folder in (_CHECKOUT, here, *here.parents):
        if _holds_lessons(folder / "lessons"):
            return folder / "lessons"
    raise LessonError(f"no lessons folder: {ENV} is not set, and there is no lessons/ beside "
                      f"the course package in {_CHECKOUT}, nor in {here} or its parents; set "
                      f"{ENV} to a DistLab checkout's lessons/ folder, or pass --lessons-dir")


def lessons_dir(path=None) -> Path:
    """The folder that holds the lessons: ``path`` if given, else the one the course finds
    (``$DISTLAB_LESSONS``, the checkout's, the working directory's)."""
    if path is None:
        return _find_lessons_dir()
    folder = Path(path)
    if not folder.is_dir():
        raise LessonError(f"no lessons folder at {folder} (given with --lessons-dir); pass "
                          "--lessons-dir PATH to the repository's lessons/ folder")
    return folder


def course_root() -> Path:
    """The folder that holds ``lessons/``, ``notebooks/`` and ``my_exercises/``."""
    return lessons_dir().resolve().parent


def list_lessons(folder=None) -> list[Path]:
    """Every lesson folder (``NN_slug`` with a ``lesson.md``), in order."""
    return sorted(d for d in lessons_dir(folder).iterdir() if _is_lesson(d))


def find_lesson(lesson_id, folder=None) -> Path:
    """The folder of a lesson given as ``"01"``, ``1``, ``"01_collectives"`` or a path."""
    key = str(lesson_id).strip().rstrip("/")
    as_path = Path(key)
    if as_path.is_dir() and (as_path / SOURCE).is_file():
        return as_path.resolve()
    lessons = list_lessons(folder)
    if key.isdigit():
        key = f"{int(key):02d}"
    for lesson in lessons:
        if key in (lesson.name, lesson.name[:2]):
            return lesson
    known = ", ".join(f"{d.name[:2]} ({d.name})" for d in lessons) or "none"
    raise LessonError(f"unknown lesson {lesson_id!r}: expected a number or a folder name; "
                      f"lessons in {lessons_dir(folder)}: {known}")


def solution_path(lesson_dir) -> Path:
    """The reference solution of a lesson: ``lessons/solutions/NN_slug.py``."""
    lesson_dir = Path(lesson_dir)
    return lesson_dir.parent / SOLUTIONS / f"{lesson_dir.name}.py"


def is_stub(path) -> bool:
    """True when ``path`` is a lesson's own ``exercises.py`` (not the learner's copy)."""
    path = Path(path)
    return path.name == EXERCISES and (path.parent / SOURCE).is_file()


def lesson_title(lesson_dir) -> str:
    """The lesson's title: the first ``# `` heading of its source, without "Lesson NN ·"."""
    for line in (Path(lesson_dir) / SOURCE).read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return re.sub(r"^Lesson \d+\s*·\s*", "", line[2:].strip())
    return Path(lesson_dir).name


def repo_relative(path: Path) -> str:
    """``path`` relative to the course (or the working directory) when it is inside."""
    path = Path(path).resolve()
    try:
        bases = [course_root(), Path.cwd()]
    except LessonError:
        bases = [Path.cwd()]
    for base in bases:
        try:
            return str(path.relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path)


def load_module(path, name: str | None = None):
    """Import a Python file as a fresh module (never cached: edits are picked up)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise LessonError(f"no such file: {path}")
    name = name or f"_distlab_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
