"""docs/reference/cli.md is what the parsers say now (``python -m tests.docs.cli_reference
--write`` regenerates it)."""

import re

from tests.docs import cli_reference

REGENERATE = "out of date: run python -m tests.docs.cli_reference --write"


def outline(page: str) -> list[tuple[str, list[str]]]:
    """Each section's heading and the options its help lists, in order: what a page says,
    whatever the Python whose argparse worded it."""
    sections = re.split(r"^### ", page, flags=re.M)[1:]
    return [(s.splitlines()[0], re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", s))
            for s in sections]


def test_the_committed_page_is_what_the_parsers_print_now():
    committed = cli_reference.PAGE.read_text(encoding="utf-8")
    generated = cli_reference.generate()
    python = re.search(r"\(Python (\d+\.\d+),", committed).group(1)
    if python == cli_reference.PYTHON:
        assert committed == generated, REGENERATE
    else:  # another argparse words usage lines its own way: compare commands and options
        assert outline(committed) == outline(generated), REGENERATE


def test_every_command_and_subcommand_has_a_section():
    headings = [h for h, _ in outline(cli_reference.generate())]
    for command in ("`simdist run`", "`simdist bench scale`", "`simdist course serve`",
                    "`simdist lesson start`", "`simdist ps`", "`realdist queues facts`",
                    "`realdist measure`", "`realdist ps`"):
        assert command in headings
    from simdist.training.programs import list_programs

    for program in list_programs():
        assert any(f"`{program.name}`" in h for h in headings), program.name


def test_a_command_that_parses_its_own_options_gives_its_help_without_running():
    from simdist.commands import cli, course

    text = cli_reference.help_of(cli.main, ["ps"])
    assert text.startswith("usage: simdist ps") and "--replicas-to-aggregate" in text
    assert cli_reference.nested(course) == ["build", "serve"]


def test_a_help_that_raises_is_shown_not_hidden():
    def broken(argv):
        raise TypeError("%o format")

    assert cli_reference.help_of(broken, []) == "(--help fails: TypeError: %o format)\n"
