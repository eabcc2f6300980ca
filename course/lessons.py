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
``print_checks`` (what ``simdist check NN`` runs) and ``check(EXERCISE)`` (a notebook's check
cell) run the checks and print a report whose hints come in two levels: the idea on the first
failure, the detail from the second on. ``notebooks.py`` builds the notebooks. This module
never imports TensorFlow.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from course import workspace as ws
from simdist.base.errors import InvalidArgumentError, NotFoundError
from course.lang import language, localize, set_language, tr, word  # noqa: F401 (re-exported)

#: the repository's lessons/ folder, next to the simdist package (editable install or checkout)
LESSONS_DIR = Path(__file__).resolve().parent.parent / "lessons"

SOURCE = "lesson.md"
EXERCISES = "exercises.py"
CHECKS = "checks.py"
SOLUTIONS = "solutions"  # lessons/solutions/NN_slug.py

_LESSON_NAME = re.compile(r"^(\d{2})_[a-z0-9_]+$")


class LessonError(NotFoundError):
    """A lesson, or one of its files, that does not exist."""


# -- finding lessons --------------------------------------------------------------------------

def lessons_dir(path=None) -> Path:
    """The folder that holds the lessons: ``path`` if given, else ``LESSONS_DIR``."""
    folder = Path(path) if path is not None else LESSONS_DIR
    if not folder.is_dir():
        where = "given with --lessons-dir" if path is not None else \
            "next to the simdist package (install the repository with pip install -e .)"
        raise LessonError(f"no lessons folder at {folder} ({where}); pass --lessons-dir "
                          "PATH to the repository's lessons/ folder")
    return folder


def list_lessons(folder=None) -> list[Path]:
    """Every lesson folder (``NN_slug`` with a ``lesson.md``), in order."""
    root = lessons_dir(folder)
    return sorted(d for d in root.iterdir()
                  if d.is_dir() and _LESSON_NAME.match(d.name) and (d / SOURCE).is_file())


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


def lesson_title(lesson_dir) -> str:
    """The lesson's title: the first ``# `` heading of its source, without "Lesson NN ·"."""
    for line in (Path(lesson_dir) / SOURCE).read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return re.sub(r"^Lesson \d+\s*·\s*", "", line[2:].strip())
    return Path(lesson_dir).name


def repo_relative(path: Path) -> str:
    """``path`` relative to the repository (or the working directory) when it is inside."""
    path = Path(path).resolve()
    for base in (LESSONS_DIR.parent, Path.cwd()):
        try:
            return str(path.relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path)


# -- checks -----------------------------------------------------------------------------------

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


def stars(n: int) -> str:
    return "★" * n


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
    if path.resolve().parent.parent == LESSONS_DIR.resolve():  # the stub, not started
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
                          f"{_first_lines(str(error))}{_where_in(error, path)}")
        result.hint = tr(word("bug", "en"), word("bug", "zh"))
    result.seconds = time.perf_counter() - start
    return result


def _first_lines(text: str, limit: int = 12) -> str:
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


# -- reports ----------------------------------------------------------------------------------

def _marks(stream) -> tuple[str, str]:
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        "✓✗".encode(encoding)
        return "✓", "✗"
    except (UnicodeEncodeError, LookupError):
        return "PASS", "FAIL"


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def format_result(result: CheckResult, marks=("✓", "✗"), repeated: bool = False,
                  lang: str = "en", level: int = 1) -> str:
    """One check as the report shows it: a mark and the title, then message and hints.

    ``level`` 1 shows the hint (the idea), 2 the detail too. ``repeated``: the same failure
    was just reported for the same exercise: say so briefly.
    """
    mark = marks[0] if result.passed else marks[1]
    lines = [f"  {mark} {localize(result.title or result.name, lang)}"]
    if repeated and not result.not_done:
        lines.append("      " + word("same", lang))
        return "\n".join(lines)
    if result.message:
        lines.append(_indent(localize(result.message, lang), "      "))
    if result.hint and not result.passed and not repeated:
        lines.append(_indent(f"{word('hint', lang)}: {localize(result.hint, lang)}", "      "))
        if result.detail and level >= 2:
            lines.append(_indent(f"{word('detail', lang)}: {localize(result.detail, lang)}",
                                 "      "))
        elif result.detail:
            lines.append("      " + word("more_after", lang))
    return "\n".join(lines)


def _repeated(result: CheckResult, last: dict) -> bool:
    """True when ``result`` fails like the previous failing check of the same exercise."""
    if result.passed:
        return False
    key = (str(result.message), str(result.hint))
    same = last.get(result.exercise) == key
    last[result.exercise] = key
    return same


def format_summary(results: list[CheckResult], lang: str = "en") -> str:
    passed = sum(r.passed for r in results)
    line = word("summary", lang, passed=passed, total=len(results))
    not_done = sorted({r.exercise for r in results if r.not_done})
    if not_done:
        line += word("summary_not_done", lang, names=", ".join(not_done))
    return line


def format_report(results: list[CheckResult], marks=("✓", "✗"), lang: str = "en",
                  levels: dict | None = None) -> str:
    """The whole report: every check, then "k of n checks pass"."""
    last: dict = {}
    levels = levels or {}
    return "\n".join([format_result(r, marks, _repeated(r, last), lang,
                                    levels.get(r.exercise, 1)) for r in results]
                     + [format_summary(results, lang)])


def _exercise_outcomes(results: list[CheckResult]) -> dict:
    """{exercise: True (every check passes) / False (one fails)}, leaving out stubs."""
    out: dict = {}
    for r in results:
        if r.not_done:
            out.setdefault(r.exercise, None)
            continue
        out[r.exercise] = (out.get(r.exercise) is not False) and r.passed
    return {k: v for k, v in out.items() if v is not None}


def print_checks(lesson_id, solution: bool = False, file=None, folder=None,
                 stream=None, lang: str | None = None, exercise: str | None = None,
                 workspace=None, detail: bool = False) -> bool:
    """Run a lesson's checks (or one exercise's) and print the report as they go; True when
    all pass.

    This is what ``simdist check NN`` does. Checking the learner's workspace counts the
    failures of each exercise in its ``.progress.json``: the detailed hint shows from the
    second failure in a row on (at once with ``detail``).
    """
    stream = stream or sys.stdout
    lang = language(lang)
    marks = _marks(stream)
    lesson_dir = find_lesson(lesson_id, folder)
    path = target_file(lesson_dir, solution, file, workspace)
    mine = (not solution and file is None and path == ws.workspace_file(lesson_dir, workspace))
    print(word("checking", lang, lesson=lesson_dir.name, path=repo_relative(path)), file=stream,
          flush=True)
    live = getattr(stream, "isatty", lambda: False)()

    def progress(i, n, check):
        if live:
            print(f"  [{i + 1}/{n}] {localize(check.title, lang)} ...", end="\r", file=stream,
                  flush=True)

    state = ws.Progress(workspace) if mine else None
    results, last = [], {}
    for result in iter_checks(lesson_dir, solution, file, folder, progress, exercise,
                              workspace):
        if live:
            print(" " * 100, end="\r", file=stream)
        level = 2 if detail else 1
        if state is not None and not detail:  # this failure and the ones before it in a row
            level = state.failures(lesson_dir.name, result.exercise) + 1
        print(format_result(result, marks, _repeated(result, last), lang, level), file=stream,
              flush=True)
        results.append(result)
    if state is not None:
        for name, passed in _exercise_outcomes(results).items():
            state.record(lesson_dir.name, name, passed)
        state.save()
    print(format_summary(results, lang), file=stream, flush=True)
    return all(r.passed for r in results)


def find_exercise(exercise: str, folder=None) -> Path:
    """The lesson whose checks check ``exercise``."""
    found = [d for d in list_lessons(folder) if any(c.exercise == exercise
                                                     for c in load_checks(d))]
    if len(found) != 1:
        where = ", ".join(d.name for d in found) or "no lesson"
        raise LessonError(f"exercise {exercise!r} is checked by {where}: pass the lesson too, "
                          f"check({exercise!r}, lesson='NN')")
    return found[0]


def check(exercise: str, lesson=None, lang: str | None = None, workspace=None,
          picture: bool = True, detail: bool = False) -> bool:
    """A notebook's check cell: run one exercise's checks against the learner's workspace
    copy (or the stub) and print the report; where the lesson draws one, show the learner's
    trace beside the reference's. True when every check passes."""
    lesson_dir = find_lesson(lesson) if lesson is not None else find_exercise(exercise)
    ok = print_checks(lesson_dir, exercise=exercise, lang=lang, workspace=workspace,
                      detail=detail)
    lesson_checks = load_lesson_checks(lesson_dir)
    draw = lesson_checks.pictures.get(exercise)
    if picture and draw is not None:
        _show_picture(draw, lesson_dir, exercise, workspace)
    return ok


def _show_picture(draw, lesson_dir, exercise, workspace) -> None:
    try:
        mine = load_module(target_file(lesson_dir, workspace=workspace))
        reference = load_module(solution_path(lesson_dir))
        figure = draw(mine, reference)
    except NotImplementedError:
        return  # nothing of the learner's to draw yet
    except Exception as error:  # the report above already says what is wrong
        print(f"(no picture: {type(error).__name__}: {_first_lines(str(error), 2)})")
        return
    try:
        from IPython.display import display
    except ImportError:
        return
    display(figure)


def side_by_side(left, right, dpi: int = 72):
    """Two matplotlib figures next to each other, as one figure: a check cell's picture of
    the learner's run beside the reference's."""
    import io

    from matplotlib.figure import Figure
    from matplotlib.image import imread

    images = []
    for figure in (left, right):
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=dpi)
        buffer.seek(0)
        images.append(imread(buffer))
    width = sum(image.shape[1] for image in images)
    height = max(image.shape[0] for image in images)
    out = Figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    x = 0
    for image in images:
        h, w = image.shape[:2]
        ax = out.add_axes((x / width, 1 - h / height, w / width, h / height))
        ax.imshow(image)
        ax.set_axis_off()
        x += w
    return out


# -- progress over every lesson -----------------------------------------------------------------

@dataclass
class LessonStatus:
    """One row of ``simdist check --all``."""

    lesson: str
    title: str
    started: bool
    exercises: dict  # name -> (stars, "passes" | "fails" | "not done")
    passed: int
    total: int

    @property
    def done(self) -> int:
        return sum(state == "passes" for _, state in self.exercises.values())


def lesson_status(lesson_dir, workspace=None) -> LessonStatus:
    """Run a lesson's checks against the learner's exercises and sum them up."""
    lesson_dir = Path(lesson_dir)
    declared = load_lesson_checks(lesson_dir)
    results = run_checks(lesson_dir, workspace=workspace)
    states = {}
    for name in declared.exercises:
        mine = [r for r in results if r.exercise == name]
        state = ("not done" if any(r.not_done for r in mine) else
                 "passes" if all(r.passed for r in mine) else "fails")
        states[name] = (declared.difficulty[name], state)
    return LessonStatus(lesson_dir.name, lesson_title(lesson_dir),
                        ws.workspace_file(lesson_dir, workspace).is_file(), states,
                        sum(r.passed for r in results), len(results))


def all_lessons_status(folder=None, workspace=None, progress=None) -> list[LessonStatus]:
    """``lesson_status`` of every lesson, in order (``progress(i, n, lesson_dir)`` first)."""
    lessons = list_lessons(folder)
    rows = []
    for i, lesson_dir in enumerate(lessons):
        if progress:
            progress(i, len(lessons), lesson_dir)
        rows.append(lesson_status(lesson_dir, workspace))
    return rows


def format_progress(rows: list[LessonStatus], lang: str = "en") -> str:
    """The progress table: a line per lesson, a mark per exercise."""
    head = ("lesson", "exercises done", "checks", "exercises") if lang == "en" else \
        ("课程", "已完成练习", "检查", "练习")
    mark = {"passes": "✓", "fails": "✗", "not done": "·"}
    lines = [f"{head[0]:<26} {head[1]:>14} {head[2]:>8}  {head[3]}"]
    for row in rows:
        name = row.lesson + ("" if row.started else " *")
        exercises = "  ".join(f"{mark[state]} {n} {stars(s)}"
                              for n, (s, state) in row.exercises.items())
        lines.append(f"{name:<26} {row.done:>9}/{len(row.exercises):<4} "
                     f"{row.passed:>3}/{row.total:<4}  {exercises}")
    done = sum(r.done for r in rows)
    total = sum(len(r.exercises) for r in rows)
    if lang == "en":
        lines.append(f"{done} of {total} exercises done.  ✓ passes  ✗ fails  · not done;  "
                     "* not started (simdist lesson start NN)")
    else:
        lines.append(f"共 {total} 个练习，已完成 {done} 个。  ✓ 通过  ✗ 未通过  · 未完成；  "
                     "* 尚未开始（simdist lesson start NN）")
    return "\n".join(lines)
