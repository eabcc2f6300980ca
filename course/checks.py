"""A lesson's checks: what ``checks.py`` declares, and running them against the learner's
exercises (or the reference solution, or any file) without ever raising for the learner's bugs.
"""

from __future__ import annotations

import ast
import re
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from course import sandbox
from course import workspace as ws
from course.folders import (CHECKS, EXERCISES, LessonError, find_lesson, is_stub, load_module,
                            repo_relative, solution_path)
from course.lang import join, tr, word, words
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
    """' (at exercises.py line 12: `code`)' (a ``tr`` text) for the deepest frame of ``error``
    in ``path``."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if Path(f.filename).resolve() == path.resolve()]
    if not frames:
        return ""
    f = frames[-1]
    code = f" `{f.line.strip()}`" if f.line else ""
    return words("at", file=path.name, line=f.lineno, code=code)


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


#: the hints of an exercise that ends the checker's process or runs past its time limit
_EXIT_HINT = tr("an exercise returns its answer: remove the exit() or sys.exit() (under the "
                "checker it would end the whole program)",
                "练习应当返回结果：删掉 exit() 或 sys.exit()（在检查程序里它会结束整个程序）")
_ENDED_HINT = tr("remove the os._exit() (it ends the process at once, without returning); if "
                 "your code has none, look for what crashed Python (the messages above)",
                 "删掉 os._exit()（它会立即结束进程，不会返回）；如果你的代码里没有，"
                 "看看上面的消息是什么让 Python 崩溃了")
_HANGS_HINT = {
    "check": tr("look for a loop that never ends, a long time.sleep, or a wait that nothing "
                "answers (a recv with no matching send)",
                "找一找永不结束的循环、很长的 time.sleep，或者没有人回应的等待"
                "（没有对应 send 的 recv）"),
    "import": tr("code at the top level of the file runs when it is imported: move it into a "
                 "function",
                 "文件顶层的代码在导入时就会运行：把它移到函数里")}


def run_check(check: Check, module, path: Path | None = None) -> CheckResult:
    """Run one check against a loaded exercises module; never raises for the learner's bugs."""
    path = Path(path or getattr(module, "__file__", "exercises.py"))
    start = time.perf_counter()
    result = CheckResult(check.name, False, "", exercise=check.exercise, title=check.title)
    try:
        if not callable(getattr(module, check.exercise, None)):
            raise CheckFailed(words("no_function", file=path.name, name=check.exercise),
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
            result.message = join(f"NotImplementedError: {error}", _where_in(error, path))
            result.hint = tr(word("not_impl", "en"), word("not_impl", "zh"))
        else:
            result.not_done = True
            result.message = tr(word("not_done", "en", name=name),
                                word("not_done", "zh", name=name))
            result.hint = _stub_hint(path, name)
    except SystemExit as error:  # exit(), sys.exit(): a failure, never the checker's end
        result.message = _exit_message(("your code", "你的代码"), error, path)
        result.hint = _EXIT_HINT
    except Exception as error:  # the learner's bug: report it, keep checking the rest
        result.message = join(words("raised", error=type(error).__name__,
                                    text=first_lines(str(error))), _where_in(error, path))
        result.hint = tr(word("bug", "en"), word("bug", "zh"))
    result.seconds = time.perf_counter() - start
    return result


def first_lines(text: str, limit: int = 12) -> str:
    """The first ``limit`` lines of ``text``, and how many more there are."""
    lines = text.splitlines() or [""]
    more = f"\n... ({len(lines) - limit} more lines)" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + more


def _exit_message(who: tuple, error: SystemExit, path: Path) -> str:
    """'your code called exit() or sys.exit(0)' (raised SystemExit), and where; ``who`` in
    English and Chinese."""
    where, code = _where_in(error, path), "" if error.code is None else repr(error.code)
    return join(tr(f"{who[0]} called exit() or sys.exit({code}) (raised SystemExit): the "
                   "checker went on",
                   f"{who[1]}调用了 exit() 或 sys.exit({code})（抛出了 SystemExit）：检查程序继续"
                   "运行"), where)


def failure(check: Check, message: str, hint: str = "", seconds: float = 0.0) -> CheckResult:
    """A failed ``CheckResult`` of ``check``."""
    return CheckResult(check.name, False, message, hint, check.exercise, check.title,
                       seconds=seconds)


def load_target(path: Path):
    """(the learner's module, None), or (None, (message, hint)) when it cannot be imported:
    a syntax error, a failing import, ``exit()`` at the top level."""
    try:
        return load_module(path), None
    except LessonError:
        raise
    except SystemExit as error:
        who = (f"importing {path.name}", f"导入 {path.name} 时")
        return None, (_exit_message(who, error, path), _EXIT_HINT)
    except Exception as error:  # a syntax error or a failing import in the learner's file
        return None, (join(words("cannot_import", file=path.name, error=type(error).__name__,
                                 text=error), _where_in(error, path)),
                      tr(word("import", "en"), word("import", "zh")))


#: the time limit of ``iter_checks`` when none is given (``isolated``); None: no child process
_DEFAULT_TIMEOUT: list = [None]


@contextmanager
def isolated(timeout: float | None = sandbox.TIMEOUT_S):
    """Within it, checks run in a child process, each within ``timeout`` seconds, unless a
    call says otherwise (``simdist check`` and ``check --all`` run in one)."""
    before = _DEFAULT_TIMEOUT[0]
    _DEFAULT_TIMEOUT[0] = timeout
    try:
        yield
    finally:
        _DEFAULT_TIMEOUT[0] = before


def iter_checks(lesson_id, solution: bool = False, file=None, folder=None,
                progress: Callable[[int, int, Check], None] | None = None,
                exercise: str | None = None, workspace=None, timeout: float | None = None):
    """Run a lesson's checks one by one, yielding each ``CheckResult`` as soon as it is known.

    ``exercise``: only that exercise's checks. ``progress(i, n, check)`` is called before
    each check. If the exercises file cannot even be imported, every check fails with the
    import error. ``timeout`` (default: ``isolated``'s, else none): run the checks in a child
    process (``sandbox``), each within ``timeout`` seconds: an exercise that hangs or ends
    the process fails, and so do its other checks, without running.
    """
    lesson_dir = find_lesson(lesson_id, folder)
    picked = list(enumerate(load_checks(lesson_dir)))
    if exercise is not None:
        picked = [(i, c) for i, c in picked if c.exercise == exercise]
        if not picked:
            raise LessonError(f"lesson {lesson_dir.name} has no exercise {exercise!r}")
    path = target_file(lesson_dir, solution, file, workspace)
    timeout = _DEFAULT_TIMEOUT[0] if timeout is None else timeout
    if timeout is not None:
        yield from _iter_isolated(lesson_dir, picked, path, progress, timeout)
        return
    module, failed = load_target(path)
    for i, (_, check) in enumerate(picked):
        if failed:
            yield failure(check, *failed)
            continue
        if progress:
            progress(i, len(picked), check)
        yield run_check(check, module, path)


def _iter_isolated(lesson_dir, picked, path, progress, timeout: float):
    """``iter_checks`` in child processes: a fresh child after one hangs or ends."""
    given_up: dict[str, tuple] = {}  # exercise -> (message, hint) of its hang or end
    child = None
    try:
        for k, (index, check) in enumerate(picked):
            if check.exercise in given_up:
                yield failure(check, *given_up[check.exercise])
                continue
            if child is None:
                child = sandbox.CheckChild(lesson_dir, path, [i for i, c in picked[k:]
                                                              if c.exercise not in given_up])
                _expect(child, "ready", sandbox.START_S, lesson_dir)
                loaded = child.next(timeout)
                if "loaded" not in loaded:  # the import hung or ended the child
                    failed = _lost(loaded, (f"importing {path.name}", f"导入 {path.name} "),
                                   timeout, "import")
                    for _, rest in picked[k:]:
                        yield failure(rest, *failed)
                    return
            if progress:
                progress(k, len(picked), check)
            start = time.perf_counter()
            message = child.next(timeout)
            if message.get("index") == index and isinstance(message.get("result"), dict):
                yield CheckResult(**message["result"])
                continue
            given_up[check.exercise] = _lost(
                message, (f"exercise {check.exercise}", f"练习 {check.exercise} "), timeout,
                "check")
            child.close()
            child = None
            yield failure(check, *given_up[check.exercise], time.perf_counter() - start)
    finally:
        if child is not None:
            child.close()


def _expect(child, key: str, seconds: float, lesson_dir) -> None:
    message = child.next(seconds)
    if key not in message:
        child.close()
        raise LessonError(f"the checker's child process did not load {lesson_dir.name}'s "
                          f"{CHECKS} ({_how(message)}): see the messages above")


def _how(message: dict) -> str:
    if "silent" in message:
        return f"no answer in {message['silent']:g} s"
    return sandbox.how_it_ended(message.get("ended"))


def _lost(message: dict, what: tuple, timeout: float, kind: str) -> tuple:
    """(message, hint) of a child that went silent past ``timeout`` or ended unasked;
    ``what`` in English and Chinese."""
    if "silent" in message:
        return (tr(f"{what[0]} did not finish within the checker's limit of {timeout:g} s "
                   "(simdist check --timeout): stopped",
                   f"{what[1]}没有在检查程序的时限 {timeout:g} 秒内结束"
                   "（simdist check --timeout）：已终止"), _HANGS_HINT[kind])
    how = _how(message)
    return (tr(f"{what[0]} ended the checker's process ({how}) without a result: os._exit() "
               "or a crash",
               f"{what[1]}结束了检查程序的进程（{how}），没有给出结果：os._exit() 或崩溃"),
            _ENDED_HINT)


def run_checks(lesson_id, solution: bool = False, file=None, folder=None,
               progress: Callable[[int, int, Check], None] | None = None,
               exercise: str | None = None, workspace=None,
               timeout: float | None = None) -> list[CheckResult]:
    """Every check of a lesson (or of one exercise) run against the learner's exercises (or
    the solution, or ``file``); ``timeout``: see ``iter_checks``."""
    return list(iter_checks(lesson_id, solution, file, folder, progress, exercise, workspace,
                            timeout))
