"""What a Chrome Trace Event JSON file must hold to be read as a trace (``Trace.from_chrome``):
every event an object with the fields its phase needs, of the right types, finite times and
durations >= 0, so that a hand-edited or wrong-kind file is one clear error naming the event.
"""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError, brief

#: every event's required fields by phase ("ph"), beyond pid and ts (metadata events: name)
_REQUIRED = {"X": ("name", "ts", "dur"), "s": ("name", "ts", "id"), "f": ("ts", "id"),
             "C": ("name", "ts"), "i": ("name", "ts"), "I": ("name", "ts"), "M": ("name",)}
#: the largest time a trace may hold, in microseconds (2**63 ns)
_MAX_US = 2 ** 63 / 1000


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def id_order(value):
    """A sort key for pids and tids, ints and strings mixed."""
    return (isinstance(value, str), value)


def check_event(e, where: str) -> None:
    """An event of a trace file has the fields and types its phase needs."""
    if not isinstance(e, dict):
        raise InvalidArgumentError(f"{where} is {brief(e)}: expected an object")
    ph = e.get("ph")
    if ph not in _REQUIRED:
        raise InvalidArgumentError(f"{where}: phase 'ph' {brief(ph)}: expected one of "
                                   f"{', '.join(_REQUIRED)}")
    for key in ("pid",) + _REQUIRED[ph]:
        if key not in e:
            raise InvalidArgumentError(f"{where} (ph {ph!r}) has no {key!r}")
    for key in ("pid", "tid", "id"):
        if key in e and not (is_int(e[key]) or isinstance(e[key], str)):
            raise InvalidArgumentError(f"{where}: {key!r} is {brief(e[key])}: expected an int "
                                       "or a string")
    for key in ("name", "cat"):
        if key in e and not isinstance(e[key], str):
            raise InvalidArgumentError(f"{where}: {key!r} is {brief(e[key])}: expected a string")
    for key in ("ts", "dur"):
        value = e.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not -_MAX_US <= value <= _MAX_US:
            raise InvalidArgumentError(f"{where}: {key!r} is {brief(value)}: expected a number "
                                       "of microseconds")
    if e.get("dur", 0) < 0:
        raise InvalidArgumentError(f"{where}: 'dur' is {e['dur']}: a duration must be >= 0")
    args = e.get("args", {})
    if not isinstance(args, dict):
        raise InvalidArgumentError(f"{where}: 'args' is {brief(args)}: expected an object")
    if ph == "M" and e["name"] in ("process_name", "thread_name") \
            and not isinstance(args.get("name"), str):
        raise InvalidArgumentError(f"{where}: {e['name']} needs a string args.name, got "
                                   f"{brief(args.get('name'))}")
    if ph == "M" and e["name"] == "thread_name" and "tid" not in e:
        raise InvalidArgumentError(f"{where}: thread_name has no 'tid'")
    nbytes = args.get("bytes", 0) if ph == "s" else 0
    if not is_int(nbytes) or nbytes < 0:
        raise InvalidArgumentError(f"{where}: a message's args.bytes is {brief(nbytes)}: "
                                   "expected an int >= 0")
