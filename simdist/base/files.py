"""The files a user hands in (traces, run results, hardware profiles) and the ones a run will
write: every problem is one clear line naming the file and what is wrong, never a traceback.

``read_json`` turns a missing file, a directory, an unreadable, binary or truncated file, or
JSON nested too deeply to read, into an ``InvalidArgumentError`` (or the caller's subclass);
``read_yaml`` does the same for YAML, and refuses aliases (``&a``/``*a``: a few hundred bytes
of them expand to gigabytes) and nesting deeper than ``MAX_YAML_DEPTH``.

Every file DistLab writes goes through one writer, ``atomic_output`` (``write_atomic``,
``write_csv`` on it): a temporary file beside the target, renamed over it once written
whole, so a killed or failing write leaves the old file as it was. ``check_outputs``, which
every command calls before it starts, checks the paths it will write, refuses two options
naming one file and an output naming a file the command reads (one line: which options,
which path).
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import json
import os
import secrets
from pathlib import Path

from simdist.base.errors import InvalidArgumentError


def read_text(path, what: str, error=InvalidArgumentError) -> str:
    """The UTF-8 text of the ``what`` file (e.g. "trace") at ``path``."""
    path = Path(path)
    if not path.exists():
        raise error(f"{what} file '{path}' does not exist")
    if path.is_dir():
        raise error(f"{what} file '{path}' is a directory: expected a file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{what} file '{path}' is not text (byte {e.start} is not UTF-8): expected "
                    "a JSON file") from None
    except OSError as e:
        raise error(f"cannot read {what} file '{path}': {e.strerror}") from None


def read_json(path, what: str, error=InvalidArgumentError):
    """The JSON value in the ``what`` file at ``path``."""
    text = read_text(path, what, error)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        ending = " (the file ends early: truncated?)" if e.pos >= len(text.rstrip()) else ""
        raise error(f"{what} file '{path}' is not valid JSON: {e.msg} at line {e.lineno}, "
                    f"column {e.colno}{ending}") from None
    except RecursionError:
        raise error(f"{what} file '{path}' nests JSON arrays or objects too deeply to "
                    "read") from None


#: the deepest nesting a YAML file may have (a hardware-profile file needs 3 levels)
MAX_YAML_DEPTH = 20


def read_yaml(path, what: str, error=InvalidArgumentError):
    """The value in the YAML ``what`` file at ``path``: safe tags only, no aliases, at most
    ``MAX_YAML_DEPTH`` levels deep."""
    import yaml  # imported here so that simdist starts fast

    text = read_text(path, what, error)
    loader = _bounded_loader()(text)
    try:
        return loader.get_single_data()
    except _TooComplex as e:
        raise error(f"{what} file '{path}' line {e.args[1] + 1}: {e.args[0]}") from None
    except yaml.YAMLError as e:
        raise error(f"{what} file '{path}' is not valid YAML: "
                    f"{' '.join(str(e).split())}") from None
    finally:
        loader.dispose()


class _TooComplex(Exception):
    """(what is refused, the 0-based line) raised by the bounded YAML loader."""


@functools.lru_cache(maxsize=None)
def _bounded_loader():
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        """yaml.SafeLoader that refuses aliases and deep nesting as it composes."""

        depth = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise _TooComplex(f"YAML alias *{event.anchor} refused: write the values out "
                                  "(aliases can expand a small file to gigabytes)",
                                  event.start_mark.line)
            self.depth += 1
            try:
                if self.depth > MAX_YAML_DEPTH:
                    raise _TooComplex(f"nested more than {MAX_YAML_DEPTH} levels deep",
                                      self.peek_event().start_mark.line)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


def check_output(path, what: str, suffix: str | None = None) -> None:
    """Check, before a run starts, that it will be able to write ``path``: not a directory,
    in a folder that exists or can be made and is writable, with ``suffix`` if given."""
    if path is None:
        return
    path = Path(path)
    if suffix and path.suffix.lower() != suffix:
        raise InvalidArgumentError(f"{what} '{path}' must end in {suffix}, got "
                                   f"{path.suffix or 'no suffix'}")
    if path.is_dir():
        raise InvalidArgumentError(f"{what} '{path}' is a directory: expected a file name")
    folder = next((p for p in path.absolute().parents if p.exists()), None)
    if folder is None or not folder.is_dir():
        raise InvalidArgumentError(f"{what} '{path}': '{folder}' is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists()
                                                    and not os.access(path, os.W_OK)):
        raise InvalidArgumentError(f"{what} '{path}' cannot be written (no permission)")


def check_outputs(outputs: dict, inputs: dict | None = None) -> None:
    """Check, before a command starts, every file it will write: ``outputs`` maps an option
    (e.g. "--trace") to its path, or to (path, suffix) (a path of None: not given), each
    checked as ``check_output`` does; no two of them may name one file, and none a file the
    command reads (``inputs``: option -> path)."""
    given = []
    for option, value in outputs.items():
        path, suffix = value if isinstance(value, tuple) else (value, None)
        if path is not None:
            check_output(path, option, suffix)
            given.append((option, path))
    for i, (option, path) in enumerate(given):
        for other, earlier in given[:i]:
            if _same_file(path, earlier):
                raise InvalidArgumentError(f"{other} and {option} both name '{path}': one "
                                           "would overwrite the other; give each its own file")
        for other, read in (inputs or {}).items():
            if read is not None and _same_file(path, read):
                raise InvalidArgumentError(f"{option} '{path}' is also {other}, which this "
                                           "command reads: writing it would destroy the "
                                           "input; give another file")


def _same_file(a, b) -> bool:
    """Whether two paths name one file (through links too), existing or not."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def check_output_folder(path, what: str) -> None:
    """Check, before a command starts, that it can write into the folder ``path``: a folder
    or nothing yet, never a file."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InvalidArgumentError(f"{what} '{path}' is a file: expected a folder (one that "
                                   "exists, or one to make)")
    parent = next((p for p in path.absolute().parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise InvalidArgumentError(f"{what} '{path}': '{parent}' is a file, not a folder")


#: the temporary file of a write to ``NAME.SUFFIX``: ``.NAME.PID-TOKEN.tmp.SUFFIX`` beside it
#: (the suffix kept, so that a writer choosing a format by it, matplotlib's, still can)
_TMP = ".{stem}.{pid}-{token}.tmp{suffix}"


@contextlib.contextmanager
def atomic_output(path, fsync: bool = False):
    """Yield a temporary path in ``path``'s folder for a writer to fill; when the block ends
    without error it replaces ``path`` at once (``os.replace``), after ``fsync`` if asked;
    on an error it is removed and ``path`` is left as it was. A kill leaves ``path`` whole
    too, and its temporary file is swept by the next write to ``path``."""
    path = Path(path)
    if path.is_symlink():  # write where the link points, as writing in place did
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep(path)
    while True:
        tmp = path.with_name(_TMP.format(stem=path.stem, pid=os.getpid(),
                                         token=secrets.token_hex(4), suffix=path.suffix))
        try:  # made here, so that the umask gives its mode as it would the file's
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            break
        except FileExistsError:
            continue
    try:
        if path.exists():
            with contextlib.suppress(OSError):
                os.chmod(tmp, path.stat().st_mode & 0o7777)
        yield tmp
        if fsync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _sweep(path: Path) -> None:
    """Remove the temporary files that writers to ``path`` killed on this machine left."""
    prefix, end = f".{path.stem}.", f".tmp{path.suffix}"
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix) and n.endswith(end)]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):-len(end)].partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(path.parent / name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def write_atomic(path, data: str | bytes, fsync: bool = False) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` whole or not at all."""
    with atomic_output(path, fsync) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
    return Path(path)


def write_csv(path, fields, rows, extrasaction: str = "raise") -> Path:
    """Write ``rows`` (dicts) under the header ``fields`` as CSV, whole or not at all (a
    table written row by row as they come is written again whole at each row)."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, list(fields), extrasaction=extrasaction)
    writer.writeheader()
    writer.writerows(rows)
    return write_atomic(path, text.getvalue())


def save_figure(figure, path, dpi: int) -> Path:
    """Save a matplotlib figure to ``path`` whole or not at all, in the format its suffix
    names (PNG without one)."""
    with atomic_output(path) as tmp:
        figure.savefig(tmp, dpi=dpi, format=Path(path).suffix[1:].lower() or "png")
    return Path(path)
