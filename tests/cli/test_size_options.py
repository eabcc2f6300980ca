"""Sizes with units on every command line (issue 29): every option that takes a size in
bytes (named size, sizes or bytes) reads "4MiB" as ``simdist.hardware.units`` does, and a
bad size is one line naming it."""

import argparse
import importlib
import pkgutil
import re

import pytest

import simdist.commands
from simdist.commands.cli import build_parser, main as simdist_main
from simdist.hardware.units import MiB, parse_count
from simdist.training.programs import list_programs

#: an option whose name says it takes bytes: --size, --sizes, --small-bytes, --fusion-bytes
SIZE_OPTION = re.compile(r"^--(.+-)?(size|sizes|bytes)$")
#: the command modules whose parser is built inside ``main(argv)``
COMMANDS = sorted(m.name for m in pkgutil.walk_packages(simdist.commands.__path__,
                                                       "simdist.commands.")
                  if m.name not in ("simdist.commands.cli",) and not m.ispkg)


class _Caught(Exception):
    pass


def _parser_of(module_name, monkeypatch) -> argparse.ArgumentParser | None:
    """The parser a command's ``main(argv)`` builds, caught as it starts parsing."""
    module = importlib.import_module(module_name)
    if not hasattr(module, "main"):
        return None
    caught = []

    def parse_known_args(self, args=None, namespace=None):
        caught.append(self)
        raise _Caught

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", parse_known_args)
    try:
        module.main(["--help"])
    except (_Caught, SystemExit):
        pass
    finally:
        monkeypatch.undo()
    return caught[0] if caught else None


def _size_actions(parser):
    """(option, action) of the parser's size options, its subcommands' included."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _size_actions(sub)
        found += [(option, action) for option in action.option_strings
                  if SIZE_OPTION.match(option)]
    return found


def every_size_option(monkeypatch):
    found = {}
    for program in list_programs():
        for option, action in _size_actions(build_parser(program)):
            found[f"simdist run {program.name} {option}"] = action
    for name in COMMANDS:
        parser = _parser_of(name, monkeypatch)
        for option, action in _size_actions(parser) if parser else ():
            found[f"{name} {option}"] = action
    return found


def test_every_size_option_reads_units(monkeypatch):
    found = every_size_option(monkeypatch)
    # the ones this test must see (a rename should not make it vacuous)
    for expected in ("simdist run allreduce --size", "simdist run token_ring --small-bytes",
                     "simdist run token_ring --large-bytes",
                     "simdist.commands.plot_collectives --sizes",
                     "simdist.commands.bench.allreduce --sizes"):
        assert expected in found
    for where, action in found.items():
        assert action.type is not None, f"{where} has no type: it would keep '4MiB' a string"
        value = action.type("4MiB")
        assert value in (4 * MiB, [4 * MiB]), f"{where} read '4MiB' as {value!r}"
        assert action.type("64K") in (64_000, [64_000]), where


def test_allreduce_runs_with_a_size_with_units(capsys):
    assert simdist_main(["run", "allreduce", "--size", "4MiB", "-p", "2", "--phantom"]) == 0
    assert "all-reduce of 4194304 bytes on 2 tasks" in capsys.readouterr().out


def test_a_bad_size_is_one_line_naming_it(capsys):
    with pytest.raises(SystemExit) as stop:
        simdist_main(["run", "allreduce", "--size", "4 parsecs"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--size" in err and "4 parsecs" in err and "64 KiB" in err


def test_counts_take_si_prefixes():
    assert parse_count("25M") == 25_000_000 and parse_count("1.5G") == 1_500_000_000
    assert parse_count(25e6) == 25_000_000 and parse_count("0.5") == 0.5
    for bad in ("25MiB", "lots", "-1"):
        with pytest.raises(ValueError, match=re.escape(bad)):
            parse_count(bad)
