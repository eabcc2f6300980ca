"""``simdist check NN``: run a lesson's checks against the learner's exercises;
``simdist check --all``: a progress table of every lesson."""

from __future__ import annotations

import argparse
import sys

from course.checks import isolated, peek
from course.folders import LessonError, find_lesson, repo_relative, solution_path
from course.lang import LANGUAGES, language, say
from course.report import print_checks
from course.sandbox import TIMEOUT_S
from course.status import all_lessons_status, format_progress
from simdist.base.errors import InvalidArgumentError
from simdist.commands import option_type, timeout_seconds


def main(argv=None) -> int:
    """``simdist check NN [EXERCISE] [--solution|--file PATH] [--lang zh] [--peek EXERCISE]
    [--timeout SECONDS]`` or ``simdist check --all``: 0 if all pass. The checks run in a
    child process, each within ``--timeout``: the learner's exit(), os._exit() or endless
    loop is a failed check, never a silent exit 0 or a hang."""
    parser = argparse.ArgumentParser(
        prog="simdist check",
        description="Run a lesson's checks against your exercises (my_exercises/NN_slug/"
                    "exercises.py, made by `simdist lesson start NN`; the lesson's stubs "
                    "until then) and say what is wrong, with a hint: the idea first, the "
                    "detail from the second failure on.")
    parser.add_argument("lesson", nargs="?",
                        help="lesson number or folder name, e.g. 01 or 01_collectives")
    parser.add_argument("exercise", nargs="?", help="only this exercise's checks")
    parser.add_argument("--all", action="store_true",
                        help="check every lesson and print a progress table")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--solution", action="store_true",
                       help="check the reference solution instead (it should pass)")
    which.add_argument("--file", metavar="PATH", help="check this file instead of your "
                                                      "workspace's exercises.py")
    parser.add_argument("--peek", metavar="EXERCISE",
                        help="print the reference solution of one exercise (a spoiler)")
    parser.add_argument("--detail", action="store_true",
                        help="show the detailed hints now, not only after a second failure")
    parser.add_argument("--lang", choices=LANGUAGES,
                        help="the language of the report (default: DISTLAB_LANG or the "
                             "locale; zh: 简体中文)")
    parser.add_argument("--workspace", metavar="DIR",
                        help="your workspace (default: DISTLAB_WORKSPACE or my_exercises/)")
    parser.add_argument("--timeout", type=option_type(timeout_seconds), default=TIMEOUT_S,
                        metavar="SECONDS",
                        help="the time each check may take (default: %(default)g s): the "
                             "checks run in a child process, and an exercise that runs "
                             "longer, or ends the process (os._exit), fails")
    parser.add_argument("--lessons-dir", metavar="DIR", help="the lessons folder (default: "
                                                              "the repository's lessons/)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        lang = language(args.lang)
        if args.all:
            if args.lesson:
                parser.error("--all checks every lesson: give no lesson")
            with isolated(args.timeout):
                return _all(args, lang)
        if not args.lesson:
            parser.error("give a lesson (e.g. 01), or --all")
        if args.peek:
            lesson_dir = find_lesson(args.lesson, args.lessons_dir)
            where = repo_relative(solution_path(lesson_dir))
            print(say(f"# {where}: the reference {args.peek}\n",
                      f"# {where}: {args.peek} 的参考答案\n", lang))
            print(peek(lesson_dir, args.peek))
            return 0
        with isolated(args.timeout):
            ok = print_checks(args.lesson, solution=args.solution, file=args.file,
                              folder=args.lessons_dir, lang=lang, exercise=args.exercise,
                              workspace=args.workspace, detail=args.detail)
    except (LessonError, InvalidArgumentError) as error:
        print(f"simdist check: error: {error}", file=sys.stderr)
        return 2
    return 0 if ok else 1


def _all(args, lang: str) -> int:
    live = sys.stdout.isatty()

    def progress(i, n, lesson_dir):
        if live:
            print(say(f"[{i + 1}/{n}] checking {lesson_dir.name} ...",
                      f"[{i + 1}/{n}] 正在检查 {lesson_dir.name} ...", lang), end="\r", flush=True)

    rows = all_lessons_status(args.lessons_dir, args.workspace, progress)
    if live:
        print(" " * 60, end="\r")
    print(format_progress(rows, lang))
    return 0 if all(r.done == len(r.exercises) for r in rows) else 1
