"""The profiles file a calibration writes (``fit.profile_document``'s document, JSON or YAML),
which ``simdist run --profiles-file FILE --profile calibrated`` and ``simdist bench predict``
read, and the machine it names as measured."""

from __future__ import annotations

import json
import platform
from pathlib import Path

from simdist.base.files import write_atomic


def this_machine() -> str:
    """The machine measured, for a profile's description."""
    return f"{platform.node()} ({platform.machine()}, {platform.processor() or 'cpu'})"


def write_profile(path: Path, document: dict) -> None:
    """Write ``document`` to ``path``: JSON for a .json file, else YAML."""
    if path.suffix.lower() == ".json":
        write_atomic(path, json.dumps(document, indent=1) + "\n")
    else:
        import yaml

        write_atomic(path, yaml.safe_dump(document, sort_keys=False))
