"""docs/reference/cli.md, generated from the argparse parsers of ``simdist`` and ``realdist``.

    python -m tests.docs.cli_reference            # print it
    python -m tests.docs.cli_reference --write    # write docs/reference/cli.md

Nothing runs: a parser built by ``build_parser()`` is formatted directly; a command that
parses its own options inside ``main(argv)`` (``add_help=False`` in its parent parser) is
asked for ``--help``, with stdout captured and its ``SystemExit`` caught. The help is
wrapped at 100 columns (``COLUMNS=100``), so the page is the same in every terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
from pathlib import Path

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "reference" / "cli.md"
COLUMNS = "100"
#: the Python whose argparse formatted the committed page (others word some lines otherwise)
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"

HEADER = """# Command-line reference

Every command and subcommand of `simdist` and `realdist`, with its usage and options, as
`--help` prints them. Generated from the parsers by `python -m tests.docs.cli_reference
--write` (Python {python}, 100 columns); `tests/docs/test_cli_reference.py` fails when this page
is out of date. Do not edit it by hand.
"""


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name, in the order its --help lists them."""
    return next((dict(a.choices) for a in parser._actions
                 if isinstance(a, argparse._SubParsersAction)), {})


def help_of(main, argv: list[str]) -> str:
    """What ``main(argv + ["--help"])`` prints: the parser a command builds inside main (or
    the error that --help raises, so that the page shows it rather than hides it)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main([*argv, "--help"])
        except SystemExit:
            pass
        except Exception as error:  # a bug in the command's help: say so on the page
            return f"(--help fails: {type(error).__name__}: {error})\n"
    return out.getvalue()


def nested(module) -> list[str]:
    """The subcommands of a command that dispatches on its first word (``simdist course
    build|serve``), read from the usage line it prints without one."""
    return re.findall(r"simdist \S+ (\w+)", getattr(module, "USAGE", ""))


def simdist_sections() -> list[tuple[str, str]]:
    """(command, help) for ``simdist`` and each of its commands and subcommands."""
    import importlib

    from simdist.commands import cli

    parser = cli.build_parser()
    sections = [("simdist", parser.format_help())]
    for name, sub in subcommands(parser).items():
        words, text = [], sub.format_help()  # built here: run, list, summary, plot, bench
        if name == "bench":
            words = sorted(cli.BENCHES)
        elif not sub.add_help:  # the command parses its own options
            module = importlib.import_module(f"simdist.commands.{name.replace('-', '_')}")
            words = nested(module)
            text = help_of(cli.main, [name]) or f"{module.USAGE}\n"
        sections.append((f"simdist {name}", text))
        sections += [(f"simdist {name} {word}", help_of(cli.main, [name, word]))
                     for word in words]
    return sections


def program_sections() -> list[tuple[str, str]]:
    """(programs, help) of the options each ``simdist run NAME`` program adds; programs with
    the same options share one section."""
    from simdist.training.programs import list_programs

    by_text: dict[str, list[str]] = {}
    for program in list_programs():
        parser = argparse.ArgumentParser(prog=f"simdist run {program.name}",
                                         usage=argparse.SUPPRESS, add_help=False)
        program.add_arguments(parser.add_argument_group("program options"))
        by_text.setdefault(parser.format_help().strip("\n") + "\n", []).append(program.name)
    return [(", ".join(f"`{n}`" for n in names), text) for text, names in by_text.items()]


def realdist_sections() -> list[tuple[str, str]]:
    """(command, help) for ``realdist`` and each of its commands and subcommands."""
    from realdist import cli

    def walk(prefix: str, parser, words: list[str]):
        for name, sub in subcommands(parser).items():
            command = f"{prefix} {name}"
            yield command, (sub.format_help() if sub.add_help
                            else help_of(cli.main, [*words, name]))
            yield from walk(command, sub, [*words, name])

    parser = cli.build_parser()
    return [("realdist", parser.format_help()), *walk("realdist", parser, [])]


def block(heading: str, text: str) -> str:
    return f"{heading}\n\n```text\n{text.rstrip()}\n```\n"


def generate() -> str:
    """The page, formatted at 100 columns."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = COLUMNS
    try:
        simdist, programs, realdist = simdist_sections(), program_sections(), realdist_sections()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    parts = [HEADER.format(python=PYTHON), "## simdist\n"]
    parts += [block(f"### `{command}`", text) for command, text in simdist]
    parts.append("## simdist run: each program's own options\n\n"
                 "`simdist run NAME` takes `simdist run`'s options and those of its program "
                 "(`simdist run NAME --help`\nlists both). A program file (`simdist run "
                 "FILE.py`) adds its own, which `--help` does not list\n(that would run the "
                 "file).\n")
    parts += [block(f"### {names}", text) for names, text in programs]
    parts.append("## realdist\n")
    parts += [block(f"### `{command}`", text) for command, text in realdist]
    return "\n".join(parts)


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    text = generate()
    if args == ["--write"]:
        PAGE.parent.mkdir(parents=True, exist_ok=True)
        PAGE.write_text(text, encoding="utf-8")
        print(f"wrote {PAGE.relative_to(ROOT)}")
    elif not args:
        sys.stdout.write(text)
    else:
        print("usage: python -m tests.docs.cli_reference [--write]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
