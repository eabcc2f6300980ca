"""The report of a lesson's checks, as ``simdist check NN`` prints it: a mark and the title of
each check, what is wrong and a hint in two levels (the idea on the first failure, the detail
from the second on, counted in the workspace's ``.progress.json``), then "k of n checks pass".
"""

from __future__ import annotations

import sys

from course import workspace as ws
from course.checks import CheckResult, iter_checks, target_file
from course.folders import find_lesson, repo_relative
from course.lang import language, localize, word


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
