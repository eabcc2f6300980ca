"""Models TF's placer: which device of which task runs each op.

The rules, in TF's order of priority:

1. a node placed in an earlier run of the session keeps its device;
2. a node colocated with another (a variable's Assign and read ops) goes where that one goes;
3. the device its ``device(...)`` scopes requested, completed from the session's default
   task (job, replica, task) and device (GPU:0 when the task has a GPU with a kernel for
   the op, else CPU:0);
4. a device that does not exist, or has no kernel for the op (an int32 variable on a GPU), is
   an ``InvalidArgumentError``, unless ``allow_soft_placement`` moves the op to a device
   that works (the same type's device 0, else the task's CPU:0).

``log_device_placement`` prints one line per node in TF's format ``name: (Type): device``.
"""

from __future__ import annotations

import sys

from simdist.hardware.device_spec import DeviceSpec
from simdist.base.errors import InvalidArgumentError
from simdist.graph.registry import has_kernel


class Placer:
    """Places ops on the devices of ``runtimes`` (task name -> TaskRuntime)."""

    def __init__(self, runtimes: dict, default_task: tuple[str, int], soft: bool, log: bool,
                 stream=None):
        self.runtimes = runtimes
        self.default_job, self.default_task = default_task
        self.soft, self.log = soft, log
        self.stream = stream
        self.placed: dict = {}  # op -> full device name
        self.log_lines: list[str] = []

    def all_devices(self) -> list[str]:
        return [d for rt in self.runtimes.values() for d in rt.devices()]

    def place(self, ops) -> dict:
        """Place every op of ``ops`` not yet placed; returns the whole placement."""
        new = []
        for op in ops:
            if op not in self.placed:
                self._place(op)
                new.append(op)
        for op in new:
            line = f"{op.name}: ({op.type}): {self.placed[op]}"
            self.log_lines.append(line)
            if self.log:
                print(line, file=self.stream or sys.stderr)
        return self.placed

    def _place(self, op) -> str:
        if op in self.placed:
            return self.placed[op]
        root = op
        while root.colocate is not None:
            root = root.colocate
        if root is not op:
            device = self._place(root)
            if not has_kernel(op, DeviceSpec.from_string(device).device_type):
                device = self._fallback(op, device, device, f"colocated with {root.name!r}")
            self.placed[op] = device
            return device
        requested = op.device
        spec = DeviceSpec.from_string(requested)
        job = spec.job or self.default_job
        task = spec.task if spec.task is not None else (
            self.default_task if job == self.default_job else 0)
        runtime = self.runtimes.get(f"{job}:{task}")
        if runtime is None or (spec.replica or 0) != 0:
            raise self._no_device(op, requested)
        kind, index = spec.device_type, spec.device_index
        if kind is None:
            kind = "GPU" if runtime.gpu_of and has_kernel(op, "GPU") else "CPU"
        device = f"{runtime.prefix}/device:{kind}:{index or 0}"
        if device not in runtime.devices():
            if not self.soft:
                raise self._no_device(op, requested)
            device = self._fallback(op, device, requested, "soft placement")
        if not has_kernel(op, DeviceSpec.from_string(device).device_type):
            device = self._fallback(op, device, requested, "no kernel")
        self.placed[op] = device
        return device

    def _fallback(self, op, device, requested, why) -> str:
        spec = DeviceSpec.from_string(device)
        prefix = device.split("/device:")[0]
        runtime = self.runtimes[f"{spec.job}:{spec.task}"]
        same = f"{prefix}/device:{spec.device_type}:0"
        if why != "no kernel" and same in runtime.devices() and has_kernel(op, spec.device_type):
            return same
        if not has_kernel(op, spec.device_type) and not self.soft:
            dtype = op.outputs[0].dtype.name if op.outputs else "-"
            raise InvalidArgumentError(
                f"Cannot assign a device for operation {op.name}: Could not satisfy explicit "
                f"device specification '{requested or device}' because no supported kernel "
                f"for {spec.device_type} devices is available.\n\t [[{{{{node {op.name}}}}}]] "
                f"(op {op.type} with dtype {dtype} has a kernel for device='CPU' only; "
                "set allow_soft_placement=True in the ConfigProto to run it on the CPU)")
        return f"{prefix}/device:CPU:0"

    def _no_device(self, op, requested) -> InvalidArgumentError:
        devices = ", ".join(self.all_devices())
        return InvalidArgumentError(
            f"Cannot assign a device for operation {op.name}: {{{{node {op.name}}}}} was "
            f"explicitly assigned to {requested} but available devices are [ {devices} ]. "
            "Make sure the device specification refers to a valid device.")


def parse_placement_log(text: str) -> dict[str, str]:
    """``{op name: device}`` from log_device_placement lines (simdist's or real TF's)."""
    result = {}
    for line in text.splitlines():
        if "): /job:" not in line or ": (" not in line:
            continue
        if "] " in line.split(": (")[0]:
            line = line.split("] ", 1)[1]  # TF's logging prefix "I0000 ... placer.cc:162] "
        name, rest = line.split(": (", 1)
        result[name.strip()] = rest.split("): ", 1)[1].strip()
    return result
