"""``Program``: what ``simdist run NAME`` runs (a cluster, a layout and every task's main)."""

from __future__ import annotations

import argparse
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from simdist.base.errors import FailedPreconditionError, SimdistError, UnknownError, brief


@dataclass
class Program:
    """A simulated distributed program, runnable with ``simdist run NAME``."""

    name: str
    summary: str
    setup: Callable  # setup(args) -> (ClusterSpec, Layout)
    main: Callable  # main(ctx, args) -> generator
    add_arguments: Callable[[argparse.ArgumentParser], None] = field(default=lambda p: None)
    default_system: str = "cpu"
    report: Callable | None = None  # report(result, hardware, args) -> text printed after a run
    #: save(result, hardware, args) -> lines naming the files it wrote (``--result``); runs
    #: with ``--quiet`` too, before the report
    save: Callable | None = None
    #: cost(args) -> about how many events the run takes (checked against --max-events
    #: before it starts); for programs whose size options cost O(n^2)
    cost: Callable | None = None

    def task_main(self, ctx, args):
        """``main(ctx, args)`` of one task, where an exception is an error naming the task
        and the line (``simdist run`` prints it as one line), and ``sys.exit()`` too (a task
        ends by returning from main; exiting would end every task on its rank)."""
        generator = self.main(ctx, args)
        if not hasattr(generator, "send"):
            return generator  # the simulation says what is wrong with it
        return _guarded(ctx.name, generator)


_SIMDIST = str(Path(__file__).resolve().parents[2])


def _guarded(task: str, generator):
    try:
        return (yield from generator)
    except SystemExit as stop:
        raise FailedPreconditionError(
            f"task {task} called sys.exit({brief(stop.code)}) in its main: a task ends by "
            "returning from main (return a value), or raises an error") from None
    except (SimdistError, MemoryError):
        raise  # already says what is wrong
    except Exception as error:
        frames = traceback.extract_tb(error.__traceback__)
        # the innermost line of the program's own code, not of simdist's
        frame = ([f for f in frames if not f.filename.startswith(_SIMDIST)] or frames)[-1]
        raise UnknownError(
            f"task {task} raised {type(error).__name__}: {_first_line(error)} "
            f"(at {frame.filename}, line {frame.lineno}, in {frame.name})") from error


def _first_line(error) -> str:
    lines = str(error).splitlines()
    text = lines[0] if lines else ""
    return text if len(text) <= 300 else text[:297] + "..."
