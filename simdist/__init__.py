"""simdist: a deterministic discrete-event simulator of a distributed TensorFlow cluster.

It runs in one Python process or as a real MPI program (``mpiexec -n N python -m mpi4py -m
simdist ...``) with identical results. It never imports TensorFlow and never reads the clock. The package itself re-exports the
engine's main names; it may import ``simdist.sim``, ``simdist.hardware`` and ``simdist.trace``.
"""

from simdist.hardware.cluster import ClusterSpec, TaskId, chief_task
from simdist.hardware.tf_config import TFConfig
from simdist.sim.core import Environment, Interrupt, SimulationDeadlock
from simdist.hardware.device_spec import DeviceSpec
from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.sim.payloads import Message, Phantom
from simdist.sim.scheduler import SimulationResult, simulate
from simdist.trace.schema import Trace

__version__ = "0.1.0"

__all__ = ["ClusterSpec", "DeviceSpec", "Environment", "Hardware", "HardwareCatalog",
           "Interrupt", "Layout", "Message", "Phantom", "SimulationDeadlock",
           "SimulationResult", "TFConfig", "TaskId", "Trace", "chief_task", "simulate"]
