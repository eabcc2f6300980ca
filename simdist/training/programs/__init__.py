"""Programs that ``simdist run`` knows by name, and loading a program from a file.

A program is a cluster, a machine layout and one ``main(ctx, args)`` generator function that
every task runs (it looks at ``ctx.task_type`` / ``ctx.task_id`` to decide its role), the way
one TensorFlow script is started on every task with a different ``TF_CONFIG``. Part of the
training layer: may import the concepts (collectives, distribute) and everything below them.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import traceback
from pathlib import Path

from simdist.distribute.registry import STRATEGIES
from simdist.base.errors import InvalidArgumentError, NotFoundError
from simdist.training.programs.program import Program

#: name -> module under simdist.training.programs that defines its PROGRAM; add a line here to register
#: a new program. Every tf.distribute strategy record (``STRATEGIES``) is a program too, made
#: by ``sync.make_program``.
BUILTIN = {
    "token_ring": "token_ring",
    "allreduce": "allreduce",
    "data_parallel": "data_parallel",
}


def program_names() -> list[str]:
    """The built-in programs' names, sorted."""
    return sorted([*BUILTIN, *STRATEGIES])


def list_programs() -> list[Program]:
    return [load_program(name) for name in program_names()]


def is_program_file(name_or_path: str) -> bool:
    """Whether ``load_program`` reads this as a ``.py`` file (whose code it runs)."""
    return (name_or_path not in BUILTIN and name_or_path not in STRATEGIES
            and Path(name_or_path).suffix == ".py")


def load_program(name_or_path: str) -> Program:
    """A built-in program by name, or a ``.py`` file that defines ``PROGRAM = Program(...)``:
    loading a file runs its code (imports it as a module), once per call."""
    if name_or_path in BUILTIN:
        return importlib.import_module(f"{__name__}.{BUILTIN[name_or_path]}").PROGRAM
    if name_or_path in STRATEGIES:
        from simdist.training.programs.sync import make_program

        return make_program(STRATEGIES[name_or_path])
    path = Path(name_or_path)
    if is_program_file(name_or_path):
        if not path.is_file():
            raise NotFoundError(f"program file '{path}' does not exist")
        spec = importlib.util.spec_from_file_location(f"simdist_user_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except SyntaxError as error:
            raise InvalidArgumentError(f"program file '{path}' line {error.lineno}: "
                                       f"{error.msg}") from None
        except (Exception, SystemExit) as error:  # the file's own code raised as it loaded
            raise InvalidArgumentError(f"program file '{path}'{_line_in(error, path)} raised "
                                       f"{type(error).__name__} as it was imported: "
                                       f"{_first_line(error)}") from None
        program = getattr(module, "PROGRAM", None)
        if not isinstance(program, Program):
            raise NotFoundError(f"program file '{path}' defines no PROGRAM = "
                                "simdist.training.programs.Program(...)")
        return program
    raise NotFoundError(f"unknown program '{name_or_path}': expected one of "
                        f"{', '.join(program_names())} or a path to a .py file "
                        "(see 'simdist list')")


def _line_in(error: BaseException, path: Path) -> str:
    """' line N': the last line of the program file in the error's traceback ('' if none)."""
    where = os.path.abspath(path)
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__)
             if os.path.abspath(frame.filename) == where]
    return f" line {lines[-1]}" if lines else ""


def _first_line(error: BaseException) -> str:
    """The first line of the error's message ("(no message)" when it has none)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else "(no message)"
