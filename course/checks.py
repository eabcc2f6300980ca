"""A lesson's checks: what ``checks.py`` declares, and running them against the learner's
exercises (or the reference solution, or any file) without ever raising for the learner's bugs.
"""

from __future__ import annotations

import ast
import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from course import workspace as ws
from course.folders import (CHECKS, EXERCISES, LessonError, find_lesson, is_stub, load_module,
                            repo_relative, solution_path)
from course.lang import tr, word
from simdist.base.errors import InvalidArgumentError


class CheckFailed(AssertionError):
    """Raised by a check: what is wrong (``message``), the idea of the fix (``hint``) and,
    shown from the second failure on, the detail (``detail``). Hints may be ``tr(en, zh)``."""

    def __init__(self, message: str, hint: str = "", detail: str = ""):
        super().__init__(message)
        self.message, self.hint, self.detail = message, hint, detail


@dataclass(frozen=True)
class Check:
    """One check of a lesson: ``run(module)`` returns a short message or raises CheckFailed.

    ``exercise`` names the function of exercises.py it checks; ``title`` says what it checks.
    """

    name: str
    exercise: str
    title: str
    run: Callable


@dataclass
class CheckResult:
    """The outcome of one check, as ``simdist check`` reports it."""

    name: str
    passed: bool
    message: str
    hint: str = ""
    exercise: str = ""
    title: str = ""
    not_done: bool = False
    seconds: float = 0.0
    detail: str = ""


@dataclass
class LessonChecks:
    """What a lesson's checks.py declares."""

    folder: Path
    checks: list
    difficulty: dict
    pictures: dict = field(default_factory=dict)

    @property
    def exercises(self) -> list[str]:
        """The exercises, in the order of their first check."""
        return list(dict.fromkeys(c.exercise for c in self.checks))


_NOT_DONE = re.compile(r"^exercise (\w+)\b")


def load_lesson_checks(lesson_dir) -> LessonChecks:
    """A lesson's ``CHECKS``, ``DIFFICULTY`` and ``PICTURES``, validated."""
    lesson_dir = Path(lesson_dir)
    module = load_module(lesson_dir / CHECKS)
    checks = getattr(module, "CHECKS", None)
    if not checks or not all(isinstance(c, Check) for c in checks):
        raise InvalidArgumentError(f"{lesson_dir / CHECKS} must define CHECKS, a non-empty "
                                   "list of course.lessons.Check")
    difficulty = getattr(module, "DIFFICULTY", {})
    for exercise in dict.fromkeys(c.exercise for c in checks):
        if difficulty.get(exercise) not in (1, 2, 3):
            raise InvalidArgumentError(
                f"{lesson_dir / CHECKS}: DIFFICULTY must give exercise {exercise!r} 1, 2 or 3 "
                f"stars, not {difficulty.get(exercise)!r}")
    return LessonChecks(lesson_dir, list(checks), dict(difficulty),
                        dict(getattr(module, "PICTURES", {})))


def load_checks(lesson_dir) -> list[Check]:
    """The ``CHECKS`` list of a lesson's checks.py."""
    return load_lesson_checks(lesson_dir).checks


def target_file(lesson_dir, solution: bool = False, file=None, workspace=None) -> Path:
    """What the checks run against: ``file``, the solution, or the learner's exercises (the
    workspace copy if the lesson was started, else the stub)."""
    if file is not None:
        return Path(file)
    if solution:
        return solution_path(lesson_dir)
    return ws.exercise_file(lesson_dir, workspace)


def load_exercises(lesson_id, solution: bool = False, file=None, folder=None, workspace=None):
    """The learner's exercises module of a lesson (or the reference solution, or ``file``)."""
    lesson_dir = find_lesson(lesson_id, folder)
    return load_module(target_file(lesson_dir, solution, file, workspace))


def peek(lesson_id, exercise: str, folder=None) -> str:
    """The reference solution of one exercise: its function's source."""
    path = solution_path(find_lesson(lesson_id, folder))
    source = path.read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == exercise:
            return ast.get_source_segment(source, node)
    raise LessonError(f"{repo_relative(path)} has no exercise {exercise!r}")


def _where_in(error: BaseException, path: Path) -> str:
    """' (exercises.py line 12: `code`)' for the deepest frame of ``error`` in ``path``."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if Path(f.filename).resolve() == path.resolve()]
    if not frames:
        return ""
    f = frames[-1]
    code = f" `{f.line.strip()}`" if f.line else ""
    return f" (at {path.name} line {f.lineno}:{code})"


def not_done_name(error: BaseException) -> str | None:
    """The exercise name of a stub's ``NotImplementedError("exercise NAME: ...")``, else None."""
    if isinstance(error, NotImplementedError):
        m = _NOT_DONE.match(str(error))
        if m:
            return m.group(1)
    return None


def _stub_hint(path: Path, name: str) -> str:
    lesson = path.parent.name[:2]
    en = word("open_stub", "en", path=repo_relative(path), name=name)
    zh = word("open_stub", "zh", path=repo_relative(path), name=name)
    if is_stub(path):  # the lesson's own stub: not started
        en = word("start", "en", lesson=lesson) + " " + en.replace(
            repo_relative(path), f"my_exercises/{path.parent.name}/{EXERCISES}")
        zh = word("start", "zh", lesson=lesson) + zh.replace(
            repo_relative(path), f"my_exercises/{path.parent.name}/{EXERCISES}")
    return tr(en, zh)


def run_check(check: Check, module, path: Path | None = None) -> CheckResult:
    """Run one check against a loaded exercises module; never raises for the learner's bugs."""
    path = Path(path or getattr(module, "__file__", "exercises.py"))
    start = time.perf_counter()
    result = CheckResult(check.name, False, "", exercise=check.exercise, title=check.title)
    try:
        if not callable(getattr(module, check.exercise, None)):
            raise CheckFailed(f"{path.name} has no function {check.exercise}",
                              tr(word("missing_fn", "en", name=check.exercise, file=path.name,
                                      stub=EXERCISES),
                                 word("missing_fn", "zh", name=check.exercise, file=path.name,
                                      stub=EXERCISES)))
        message = check.run(module)
        result.passed, result.message = True, message or ""
    except CheckFailed as failed:
        result.message, result.hint, result.detail = failed.message, failed.hint, failed.detail
    except NotImplementedError as error:
        name = not_done_name(error)
        if name is None:
            result.message = f"NotImplementedError: {error}{_where_in(error, path)}"
            result.hint = tr(word("not_impl", "en"), word("not_impl", "zh"))
        else:
            result.not_done = True
            result.message = tr(word("not_done", "en", name=name),
                                word("not_done", "zh", name=name))
            result.hint = _stub_hint(path, name)
    except Exception as error:  # the learner's bug: report it, keep checking the rest
        result.message = (f"your code raised {type(error).__name__}: "
                          f"{first_lines(str(error))}{_where_in(error, path)}")
        result.hint = tr(word("bug", "en"), word("bug", "zh"))
    result.seconds = time.perf_counter() - start
    return result


def first_lines(text: str, limit: int = 12) -> str:
    """The first ``limit`` lines of ``text``, and how many more there are."""
    lines = text.splitlines() or [""]
    more = f"\n... ({len(lines) - limit} more lines)" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + more


def iter_checks(lesson_id, solution: bool = False, file=None, folder=None,
                progress: Callable[[int, int, Check], None] | None = None,
                exercise: str | None = None, workspace=None):
    """Run a lesson's checks one by one, yielding each ``CheckResult`` as soon as it is known.

    ``exercise``: only that exercise's checks. ``progress(i, n, check)`` is called before
    each check. If the exercises file cannot even be imported, every check fails with the
    import error.
    """
    lesson_dir = find_lesson(lesson_id, folder)
    checks = load_checks(lesson_dir)
    if exercise is not None:
        checks = [c for c in checks if c.exercise == exercise]
        if not checks:
            raise LessonError(f"lesson {lesson_dir.name} has no exercise {exercise!r}")
    path = target_file(lesson_dir, solution, file, workspace)
    try:
        module = load_module(path)
    except LessonError:
        raise
    except Exception as error:  # a syntax error or a failing import in the learner's file
        message = (f"cannot import {path.name}: {type(error).__name__}: {error}"
                   f"{_where_in(error, path)}")
        for c in checks:
            yield CheckResult(c.name, False, message,
                              tr(word("import", "en"), word("import", "zh")), c.exercise,
                              c.title)
        return
    for i, check in enumerate(checks):
        if progress:
            progress(i, len(checks), check)
        yield run_check(check, module, path)


def run_checks(lesson_id, solution: bool = False, file=None, folder=None,
               progress: Callable[[int, int, Check], None] | None = None,
               exercise: str | None = None, workspace=None) -> list[CheckResult]:
    """Every check of a lesson (or of one exercise) run against the learner's exercises (or
    the solution, or ``file``)."""
    return list(iter_checks(lesson_id, solution, file, folder, progress, exercise, workspace))
