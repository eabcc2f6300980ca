"""Every ``simdist`` and ``realdist`` command in the code blocks of the README, CONTRIBUTING,
docs/ and lessons/README.md is one that the commands accept now: parsed by the very parser
the command builds, and stopped right after parsing, so that nothing runs."""

import argparse
import re
import shlex

import pytest

from tests.conftest import ROOT
from tests.docs.test_links import FENCE, pages

#: a command line: simdist or realdist, directly, from .venv/bin, or after "-m" (mpiexec)
COMMAND = re.compile(r"^(?:\S*mpiexec .*?-m |\.venv/bin/|python -m )?(simdist|realdist) (.*)$")
#: a synopsis, not a command: an optional part, alternatives, a placeholder (FILE, PROGRAM)
SYNOPSIS = re.compile(r"[\[|]|\.\.\.|\b[A-Z]{2,}\b|\.py\b")
#: output, not a command: its first words end with a colon ("simdist bench mpi: ranks 1,2")
OUTPUT = re.compile(r"^(\S+ ){0,2}\S+: ")


class Parsed(BaseException):
    """Raised by the parser once the command line is parsed (BaseException: no command's
    ``except`` catches it)."""


def commands(text: str) -> list[tuple[str, list[str]]]:
    """(command, argv) of each command line in a page's code blocks (lines ending in \\ go
    on), comments dropped; synopses left out."""
    found = []
    for block in FENCE.finditer(text):
        lines = block.group(0).splitlines()[1:-1]
        while lines:
            line = lines.pop(0).strip()
            while line.endswith("\\") and lines:
                line = line[:-1] + " " + lines.pop(0).strip()
            match = COMMAND.match(line)
            if match and OUTPUT.match(match.group(2)):
                continue  # a command's own header line: "simdist bench engine: 100 tasks"
            if match and not SYNOPSIS.search(match.group(2).split("#")[0]):
                found.append((match.group(1), shlex.split(match.group(2), comments=True)))
    return found


def parse_only(command: str, argv: list[str]) -> str | None:
    """None when ``command argv`` parses; else what argparse or the command said."""
    from realdist.cli import main as realdist_main
    from simdist.commands.cli import main as simdist_main

    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        raise Parsed(original(self, args, namespace))

    argparse.ArgumentParser.parse_args = parse_then_stop
    try:
        status = {"simdist": simdist_main, "realdist": realdist_main}[command](argv)
        return f"exited {status} before parsing its options"
    except Parsed:
        return None
    except SystemExit as error:
        return f"refused (exit {error.code})"
    finally:
        argparse.ArgumentParser.parse_args = original


CASES = [(page, command, argv) for page in pages()
         for command, argv in commands(page.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page, command, argv", CASES,
                         ids=[f"{p.relative_to(ROOT)}: {c} {' '.join(a)}" for p, c, a in CASES])
def test_every_command_in_the_docs_parses(page, command, argv, capsys):
    assert parse_only(command, argv) is None, capsys.readouterr().err


def test_commands_are_found_in_code_blocks_only(capsys):
    text = ("`simdist run nowhere`\n\n```\nsimdist run token_ring --trace a.json  # a note\n"
            "realdist ps --workers 2 \\\n    --steps 4\nmpiexec -n 2 python -m mpi4py -m simdist "
            "list\nsimdist run PROGRAM [--seed N]\nsimdist: an output line\n```\n")
    assert commands(text) == [("simdist", ["run", "token_ring", "--trace", "a.json"]),
                              ("realdist", ["ps", "--workers", "2", "--steps", "4"]),
                              ("simdist", ["list"])]
    assert parse_only("simdist", ["run", "token_ring", "--no-such-option"]) == \
        "refused (exit 2)"
    assert "--no-such-option" in capsys.readouterr().err
    assert parse_only("simdist", ["ps", "--workers", "2"]) is None
    assert parse_only("realdist", ["queues", "facts", "--check"]) is None
