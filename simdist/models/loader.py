"""A user's own model from a small JSON or TOML file: its layers, or its totals alone.

    name = "my_cnn"
    input_bytes = "588KiB"          # one example's input (default 0)
    [[layers]]
    name = "conv1"
    params = 1728
    flops = "173M"                  # forward FLOPs of one example, 2 per multiply-add
    activation_bytes = "1.6MiB"     # the layer's output for one example (default 0)

or, without ``layers``: ``params``, ``flops`` and ``activation_bytes`` of the whole model
(one layer, so one gradient). Counts take k, M, G, T (powers of 1000); sizes take units as
on the command line (``units.parse_size``). ``model_named`` reads a zoo name or a file.
"""

from __future__ import annotations

from pathlib import Path

from simdist.base.errors import InvalidArgumentError
from simdist.base.files import read_json, read_text
from simdist.hardware.units import parse_count, parse_size
from simdist.models.catalog import is_zoo_model, zoo_model
from simdist.models.layer import Layer, Model

SUFFIXES = (".json", ".toml")
LAYER_KEYS = {"name", "kind", "params", "flops", "activation_bytes"}
MODEL_KEYS = {"name", "summary", "input_bytes", "layers", "params", "flops",
              "activation_bytes"}


def model_named(name_or_path: str) -> Model:
    """A zoo model by name (``resnet101``) or a user's model file (``my_model.toml``)."""
    if is_zoo_model(name_or_path):
        return zoo_model(name_or_path)
    if Path(str(name_or_path)).suffix.lower() in SUFFIXES:
        return load_model(name_or_path)
    return zoo_model(name_or_path)  # not found: the error lists the zoo


def load_model(path) -> Model:
    """The model in a ``.json`` or ``.toml`` file (see the module)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise InvalidArgumentError(f"model file '{path}': expected a .json or .toml file")
    if suffix == ".json":
        data = read_json(path, "model")
    else:
        import tomllib

        try:
            data = tomllib.loads(read_text(path, "model"))
        except tomllib.TOMLDecodeError as error:
            raise InvalidArgumentError(f"model file '{path}' is not valid TOML: "
                                       f"{error}") from None
    return model_from_dict(data, where=f"model file '{path}'", default_name=path.stem)


def model_from_dict(data, where: str = "model", default_name: str = "model") -> Model:
    """A ``Model`` from the file's content (a dict, as the module shows)."""
    if not isinstance(data, dict):
        raise InvalidArgumentError(f"{where}: expected a table of name, input_bytes and "
                                   f"layers, not {type(data).__name__}")
    _check_keys(data, MODEL_KEYS, where)
    name = str(data.get("name", default_name))
    if "layers" in data:
        totals = sorted({"params", "flops", "activation_bytes"} & set(data))
        if totals:
            raise InvalidArgumentError(f"{where}: give either layers or the totals "
                                       f"({', '.join(totals)}), not both")
        if not isinstance(data["layers"], list) or not data["layers"]:
            raise InvalidArgumentError(f"{where}: 'layers' must be a non-empty list of "
                                       "tables (name, params, flops, activation_bytes)")
        layers = tuple(_layer(entry, f"{where}, layer {i + 1}", f"layer_{i + 1}")
                       for i, entry in enumerate(data["layers"]))
    elif "params" in data and "flops" in data:
        layers = (_layer({k: data[k] for k in ("params", "flops", "activation_bytes")
                          if k in data}, where, name),)
    else:
        raise InvalidArgumentError(f"{where}: expected 'layers', or 'params' and 'flops' "
                                   "(forward FLOPs of one example)")
    input_bytes = _size(data.get("input_bytes", 0), "input_bytes", where)
    return Model(name, str(data.get("summary", f"{name} (user model)")), layers, input_bytes)


def _layer(entry, where: str, default_name: str) -> Layer:
    if not isinstance(entry, dict):
        raise InvalidArgumentError(f"{where}: expected a table of name, params, flops and "
                                   f"activation_bytes, not {type(entry).__name__}")
    _check_keys(entry, LAYER_KEYS, where)
    for key in ("params", "flops"):
        if key not in entry:
            raise InvalidArgumentError(f"{where}: '{key}' is missing")
    return Layer(str(entry.get("name", default_name)), str(entry.get("kind", "layer")),
                 _count(entry["params"], "params", where),
                 _count(entry["flops"], "flops", where),
                 _size(entry.get("activation_bytes", 0), "activation_bytes", where))


def _check_keys(data: dict, known: set, where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise InvalidArgumentError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}: "
                                   f"expected {', '.join(sorted(known))}")


def _count(value, key: str, where: str) -> int:
    try:
        count = parse_count(value, key)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"{where}: {error}") from None
    if count != int(count):
        raise InvalidArgumentError(f"{where}: {key} {value!r}: expected a whole number")
    return int(count)


def _size(value, key: str, where: str) -> int:
    if value in (0, "0"):
        return 0
    try:
        return parse_size(value)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"{where}: {key}: {error}") from None
