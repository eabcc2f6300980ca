"""Models tf.DeviceSpec: the device strings that place operations.

A device string names a job, replica, task and device, every part optional:
``/job:worker/replica:0/task:1/device:GPU:0``, ``/gpu:1`` or ``GPU:0``. Nested
``tf.device`` scopes merge them, the inner scope's parts winning (``merge_device``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from simdist.base.errors import InvalidArgumentError, stricter_than_tf


class DeviceSpecError(InvalidArgumentError):
    """A device string that tf.DeviceSpec cannot parse."""


#: the device types TF's short forms name ("/gpu:0", "CPU:1", "/epu"); "/device:TYPE:N"
#: takes any type
SHORT_DEVICE_TYPES = ("CPU", "GPU", "TPU", "CUSTOM", "EPU")
_DEVICE_FORM = "/job:<name>/replica:<int>/task:<int>/device:<TYPE>:<int>"


@dataclass(frozen=True)
class DeviceSpec:
    """Models tf.DeviceSpec: a possibly partial device name; None means unspecified.

    device_index None with a device_type set is TF's wildcard "/device:GPU:*". As in TF, a
    device type is any name ("CPU", "GPU", "XLA_CPU"...; "cpu" and "gpu" are upper-cased).
    """

    job: str | None = None
    replica: int | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    def __post_init__(self):
        if self.job is not None and (not isinstance(self.job, str) or not self.job
                                     or "/" in self.job or ":" in self.job):
            why = (stricter_than_tf("no task of a cluster has an empty job name")
                   if self.job == "" else "")
            raise DeviceSpecError(f"device job {self.job!r} must be a name such as "
                                  f"'worker'{why}")
        for field in ("replica", "task", "device_index"):
            value = getattr(self, field)
            if isinstance(value, str) and value.strip().isdigit():  # TF: int(task)
                value = int(value)
                object.__setattr__(self, field, value)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 0):
                why = (stricter_than_tf("no task or device has a negative index")
                       if isinstance(value, int) and not isinstance(value, bool) else "")
                raise DeviceSpecError(f"device {field} {value!r} must be an int >= 0{why}")
        if self.device_type is not None:
            kind = self.device_type
            if not isinstance(kind, str) or not kind or "/" in kind or ":" in kind:
                raise DeviceSpecError(f"device type {kind!r} must be a name such as 'CPU', "
                                      "'GPU' or 'TPU'")
            if kind in ("cpu", "gpu"):
                object.__setattr__(self, "device_type", kind.upper())

    @classmethod
    def from_string(cls, spec: str) -> DeviceSpec:
        """Parse TF's device strings as tf.DeviceSpec does: "/job:ps/task:0/device:CPU:0",
        "/gpu:1", "GPU:0", "". A repeated job, replica or task keeps its last value; two
        device types are an error."""
        if not isinstance(spec, str):
            raise DeviceSpecError(f"device {spec!r} must be a string such as {_DEVICE_FORM}")
        fields: dict = {}

        def bad(part, problem):
            return DeviceSpecError(
                f"invalid device string {spec!r}: {problem} in {part!r}; "
                f"expected {_DEVICE_FORM} (every part optional)")

        def to_int(part, text, wildcard=False):
            if wildcard and text == "*":
                return None
            try:
                value = int(text)
            except ValueError:
                raise bad(part, f"{text!r} is not an integer") from None
            if value < 0:
                raise bad(part, f"{text!r} is negative" + stricter_than_tf(
                    "no task or device has a negative index"))
            return value

        def device(part, kind, index):
            if "device_type" in fields:
                raise bad(part, "a second device type (TF: 'Multiple device types are not "
                                "allowed')")
            fields["device_type"] = kind
            fields["device_index"] = to_int(part, index, wildcard=True)

        for part in spec.split("/"):
            if not part:
                continue
            pieces = part.split(":")
            key = pieces[0]
            if key == "job" and len(pieces) == 2:
                if not pieces[1]:
                    raise bad(part, "an empty job name" + stricter_than_tf(
                        "no task of a cluster has an empty job name"))
                fields["job"] = pieces[1]
            elif key in ("replica", "task") and len(pieces) == 2:
                fields[key] = (part, pieces[1])  # read at the end: the last one counts
            elif key.upper() in SHORT_DEVICE_TYPES and len(pieces) <= 2:  # "/gpu:1", "GPU"
                device(part, key.upper(), pieces[1] if len(pieces) == 2 else "*")
            elif key == "device" and len(pieces) == 3:
                if not pieces[1]:
                    raise bad(part, "an empty device type" + stricter_than_tf(
                        "no device has an empty type"))
                device(part, pieces[1], pieces[2])
            else:
                raise bad(part, "unknown or malformed part")
        for key in ("replica", "task"):
            if key in fields:
                fields[key] = to_int(*fields[key])
        return cls(**fields)

    def to_string(self) -> str:
        """TF's canonical form, e.g. "/job:worker/replica:0/task:1/device:GPU:0"."""
        out = ""
        if self.job is not None:
            out += f"/job:{self.job}"
        if self.replica is not None:
            out += f"/replica:{self.replica}"
        if self.task is not None:
            out += f"/task:{self.task}"
        if self.device_type is not None:
            index = "*" if self.device_index is None else self.device_index
            out += f"/device:{self.device_type}:{index}"
        return out

    def __str__(self) -> str:
        return self.to_string()

    def make_merged_spec(self, other: DeviceSpec | str) -> DeviceSpec:
        """A new spec: other's specified fields override this one's (TF's semantics)."""
        if isinstance(other, str):
            other = DeviceSpec.from_string(other)
        merged = {field.name: getattr(other, field.name) for field in dataclasses.fields(self)
                  if getattr(other, field.name) is not None}
        return self.replace(**merged)

    def replace(self, **changes) -> DeviceSpec:
        return dataclasses.replace(self, **changes)


def merge_device(outer: str | DeviceSpec, inner: str | DeviceSpec) -> str:
    """The device of nested ``tf.device(outer)`` / ``tf.device(inner)`` scopes: inner wins."""
    if isinstance(outer, str):
        outer = DeviceSpec.from_string(outer)
    return outer.make_merged_spec(inner).to_string()


def canonical_device(spec: str) -> str:
    """TF's canonical spelling of a device string: "/gpu:0" -> "/device:GPU:0"."""
    return DeviceSpec.from_string(spec).to_string()
