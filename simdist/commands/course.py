"""``simdist course build`` and ``simdist course serve``: the course site (course/site.py)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from course.folders import LessonError, find_lesson, repo_relative
from simdist.base.errors import InvalidArgumentError
from simdist.base.files import check_output_folder

USAGE = "usage: simdist course build [NN ...] [options] | simdist course serve [options]"


def main(argv=None) -> int:
    """``simdist course SUBCOMMAND ...``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("build", "serve"):
        print(USAGE, file=sys.stderr)
        return 2
    return (build if argv[0] == "build" else serve)(argv[1:])


def build(argv: list[str]) -> int:
    """``simdist course build``: 0 when every page is built from an executed notebook whose
    cells all ran; 1 when a cell raised; 2 on bad input."""
    from course.site import build_course

    parser = argparse.ArgumentParser(
        prog="simdist course build",
        description="Write the course site: out/course/index.html (every lesson's goals and "
                    "check status) and a page per lesson rendered from its executed notebook, "
                    "with every figure and the traces of its timelines for Perfetto. Nothing "
                    "on it is loaded from the network. Notebooks are executed once and kept; "
                    "a kept run is reused while the notebook's code is unchanged (its "
                    "Markdown is taken as it is now).")
    parser.add_argument("lessons", nargs="*", metavar="NN", help="lessons to build "
                                                                 "(default: all)")
    parser.add_argument("-o", "--out", default="out/course", metavar="DIR",
                        help="the site's folder (default out/course)")
    parser.add_argument("--executed", metavar="DIR",
                        help="where executed notebooks are kept and reused (default "
                             "OUT/executed); put notebooks you executed yourself here, as "
                             "DIR/NN_slug.ipynb (DIR/LANG/NN_slug.ipynb for a translation)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--no-execute", action="store_true",
                       help="execute nothing: a notebook without a kept run is shown "
                            "without outputs")
    which.add_argument("--again", action="store_true",
                       help="execute every notebook, even those whose kept run is current")
    parser.add_argument("--no-checks", action="store_true",
                        help="do not run the lessons' checks (no status on the pages)")
    parser.add_argument("--timeout", type=float, default=600, metavar="S",
                        help="seconds a notebook cell may run (default 600)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="notebooks executed at once, a Jupyter kernel each (default: "
                             "this machine's cores)")
    parser.add_argument("--lessons-dir", metavar="DIR", help="the lessons folder (default: "
                                                              "the repository's lessons/)")
    args = parser.parse_args(argv)
    if not args.timeout > 0:
        print(f"simdist course build: error: --timeout {args.timeout}: expected seconds > 0",
              file=sys.stderr)
        return 2
    if not 1 <= args.jobs <= 64:
        print(f"simdist course build: error: --jobs {args.jobs}: expected 1 to 64",
              file=sys.stderr)
        return 2
    live = sys.stdout.isatty()
    started = time.monotonic()

    def log(line):
        print(("\r" + " " * 79 + "\r" if live else "") + line, flush=True)

    def on_cell(page, k, n):  # a progress line a terminal rewrites in place
        where = f"{page.prefix}{page.name}: cell {k}/{n}"
        if live:
            print(f"\r      {where}  ({time.monotonic() - started:.0f} s)", end="",
                  flush=True)
        elif k == n or k % 10 == 0:
            print(f"      {where}", flush=True)

    try:
        check_output_folder(args.out, "-o")
        if args.executed is not None:
            check_output_folder(args.executed, "--executed")
        only = [find_lesson(x, args.lessons_dir) for x in args.lessons] or None
        pages = build_course(args.out, args.lessons_dir, only, args.executed,
                             not args.no_execute, args.again, not args.no_checks,
                             args.timeout, log, on_cell, args.jobs)
    except (LessonError, InvalidArgumentError) as error:
        print(f"simdist course build: error: {error}", file=sys.stderr)
        return 2
    if not pages:
        print("simdist course build: no lesson notebooks to build", file=sys.stderr)
        return 2
    index = repo_relative(f"{args.out}/index.html")
    print(f"course: {index} ({len(pages)} pages, {time.monotonic() - started:.0f} s); "
          f"serve it for the Perfetto buttons: simdist course serve -d {args.out}")
    failed = [f"{p.href}: {e}" for p in pages for e in p.errors]
    for line in failed:
        print(f"simdist course build: a cell raised: {line}", file=sys.stderr)
    return 1 if failed else 0


def serve(argv: list[str]) -> int:
    """``simdist course serve``: the site over http on 127.0.0.1 until Ctrl-C."""
    from pathlib import Path

    from course.site import make_server, workspace_progress

    parser = argparse.ArgumentParser(
        prog="simdist course serve",
        description="Serve the course site on this machine only (127.0.0.1), so that its "
                    "'Open in Perfetto' buttons can hand traces to ui.perfetto.dev and its "
                    "badges show your progress as it is now (what simdist check recorded in "
                    "your workspace).")
    parser.add_argument("-d", "--directory", default="out/course", metavar="DIR",
                        help="the site's folder (default out/course)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any)")
    parser.add_argument("--workspace", metavar="DIR",
                        help="your workspace (default: DISTLAB_WORKSPACE or my_exercises/)")
    parser.add_argument("--lessons-dir", metavar="DIR", help="the lessons folder (default: "
                                                              "the repository's lessons/)")
    args = parser.parse_args(argv)
    if not (Path(args.directory) / "index.html").is_file():
        print(f"simdist course serve: error: no index.html in {args.directory}: run "
              "simdist course build first", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"simdist course serve: error: --port {args.port}: expected 0 to 65535",
              file=sys.stderr)
        return 2
    try:
        server = make_server(args.directory, args.port, lambda: workspace_progress(
            args.lessons_dir, args.workspace))
    except OSError as error:
        print(f"simdist course serve: error: port {args.port}: {error.strerror}",
              file=sys.stderr)
        return 2
    print(f"course: http://127.0.0.1:{server.server_address[1]}/index.html (Ctrl-C stops)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
