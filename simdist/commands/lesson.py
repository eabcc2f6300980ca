"""``simdist lesson build``: regenerate lesson notebooks from their sources;
``simdist lesson start NN``: copy a lesson's stubs into the learner's workspace."""

from __future__ import annotations

import argparse
import sys

from course import workspace as ws
from course.folders import LessonError, find_lesson, lessons_dir, list_lessons, repo_relative
from course.notebooks import editions, notebook_is_stale, notebook_path, write_notebook
from simdist.base.errors import InvalidArgumentError

USAGE = "usage: simdist lesson build [NN|--all] | simdist lesson start NN"


def main(argv=None) -> int:
    """``simdist lesson SUBCOMMAND ...``: ``build`` or ``start``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("build", "start"):
        print(USAGE, file=sys.stderr)
        return 2
    return (build if argv[0] == "build" else start)(argv[1:])


def start(argv: list[str]) -> int:
    """``simdist lesson start NN [--force] [--workspace DIR]``: copy the stubs."""
    parser = argparse.ArgumentParser(
        prog="simdist lesson start",
        description="Copy a lesson's exercise stubs into your workspace (my_exercises/, "
                    "ignored by git), where `simdist check`, the notebooks and the mpiexec "
                    "exercises read them.")
    parser.add_argument("lessons", nargs="+", metavar="NN", help="lessons to start")
    parser.add_argument("--force", action="store_true",
                        help="overwrite your copy with the stubs (your work is lost)")
    parser.add_argument("--workspace", metavar="DIR",
                        help="the workspace (default: DISTLAB_WORKSPACE or my_exercises/)")
    parser.add_argument("--lessons-dir", metavar="DIR", help="the lessons folder")
    args = parser.parse_args(argv)
    try:
        for key in args.lessons:
            lesson = find_lesson(key, args.lessons_dir)
            path, written = ws.start(lesson, args.workspace, args.force)
            if written:
                print(f"{lesson.name}: copied the stubs to {repo_relative(path)}; edit it, then "
                      f"run `simdist check {lesson.name[:2]}`")
            else:
                print(f"{lesson.name}: {repo_relative(path)} already exists (your work): kept "
                      "it (--force replaces it with the stubs)")
    except (LessonError, InvalidArgumentError, OSError) as error:
        print(f"simdist lesson start: error: {error}", file=sys.stderr)
        return 2
    return 0


def build(argv: list[str]) -> int:
    """``simdist lesson build [NN ...|--all] [--check]``: regenerate lesson notebooks (every
    edition: notebooks/ and notebooks/zh/)."""
    parser = argparse.ArgumentParser(
        prog="simdist lesson build",
        description="Generate notebooks/NN_slug.ipynb from lessons/NN_slug/lesson.md, and "
                    "notebooks/zh/NN_slug.ipynb from lesson.zh.md (without outputs).")
    parser.add_argument("lessons", nargs="*", metavar="NN", help="lessons to build "
                                                                 "(default: all)")
    parser.add_argument("--all", action="store_true", help="build every lesson")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a notebook is out of date")
    parser.add_argument("--lessons-dir", metavar="DIR", help="the lessons folder (default: "
                                                              "the repository's lessons/)")
    args = parser.parse_args(argv)
    try:
        if args.all or not args.lessons:
            targets = list_lessons(args.lessons_dir)
        else:
            targets = [find_lesson(x, args.lessons_dir) for x in args.lessons]
        if not targets:
            print(f"simdist lesson build: no lessons in {lessons_dir(args.lessons_dir)}",
                  file=sys.stderr)
            return 2
        stale = 0
        jobs = [(lesson, lang) for lesson in targets for lang in editions(lesson)]
        for i, (lesson, lang) in enumerate(jobs, 1):
            path = notebook_path(lesson, lang)
            print(f"[{i}/{len(jobs)}] {lesson.name} ({lang}): ", end="", flush=True)
            if not notebook_is_stale(lesson, lang=lang):
                print(f"{repo_relative(path)} is up to date", flush=True)
            elif args.check:
                stale += 1
                print(f"{repo_relative(path)} is OUT OF DATE: run simdist lesson build "
                      f"{lesson.name[:2]}", flush=True)
            else:
                write_notebook(lesson, path, lang)
                print(f"wrote {repo_relative(path)}", flush=True)
    except (LessonError, InvalidArgumentError) as error:
        print(f"simdist lesson build: error: {error}", file=sys.stderr)
        return 2
    return 1 if stale else 0
