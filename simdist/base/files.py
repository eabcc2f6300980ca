"""The files a user hands in (traces, run results, hardware profiles) and the ones a run will
write: every problem is one clear line naming the file and what is wrong, never a traceback.

``read_json`` turns a missing file, a directory, an unreadable, binary or truncated file, or
JSON nested too deeply to read, into an ``InvalidArgumentError`` (or the caller's subclass);
``read_yaml`` does the same for YAML, and refuses aliases (``&a``/``*a``: a few hundred bytes
of them expand to gigabytes) and nesting deeper than ``MAX_YAML_DEPTH``; ``check_output``
checks a path a run will write before the run starts.
"""

from __future__ import annotations

import functools
import json
import os
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
