"""The command layer: one module per ``simdist`` command that parses its own options.

Each module has ``main(argv) -> int`` (the exit status); ``cli.py`` dispatches to it, and
``bench/`` holds the benchmark commands. The modules they drive (``training.compare``,
``course.lessons``, ``course.notebooks``, ``collectives.sweep``...) compute, draw and check,
and never parse arguments or exit. The top layer: may import every package of simdist and the
course tooling (``course``), never realdist (which it starts as a child process).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys

from simdist.base.errors import InvalidArgumentError, SimdistError
from simdist.hardware.units import check_seconds


def option_type(parse):
    """An argparse ``type=`` that reads an option with ``parse`` and shows its
    InvalidArgumentError as the option's error: one line naming the value."""

    def convert(text):
        try:
            return parse(text)
        except InvalidArgumentError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    convert.__name__ = parse.__name__
    return convert


def whole_number(text, least: int = 1) -> int:
    """An option's whole number >= ``least`` (``type=option_type(whole_number)``)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        raise InvalidArgumentError(f"{text!r}: expected a whole number >= {least}")
    return value


def whole_number_or_zero(text) -> int:
    """An option's whole number >= 0."""
    return whole_number(text, 0)


def timeout_seconds(text) -> float:
    """``--timeout``: a finite number of seconds > 0 (``units.check_seconds``)."""
    try:
        value = float(text)
    except ValueError:
        raise InvalidArgumentError(f"{text!r}: expected a number of seconds") from None
    return check_seconds(value, "--timeout")


def parse_on_rank_0(parser, argv, rank: int):
    """``parser.parse_args(argv)`` as every MPI rank runs it: rank 0 prints the usage, the
    help or the error; the other ranks stay silent and, on a bad argument, end with status
    0 (a non-zero one would have mpiexec kill rank 0 before its line is out)."""
    if rank == 0:
        return parser.parse_args(argv)
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            return parser.parse_args(argv)
    except SystemExit:
        raise SystemExit(0) from None


def reporting_errors(prog: str, run, args, quiet: bool = False) -> int:
    """``run(args)``'s exit status, with a SimdistError shown as one line, "PROG: error:
    ...", and exit status 2 (``quiet``: not shown, as by an MPI rank other than 0)."""
    try:
        return run(args)
    except SimdistError as error:
        if not quiet:
            print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
