"""The simulated processes behind sessions and servers: machines, devices, memory, containers.

- ``Machine``: a host with CPU cores and GPUs, described by the same ``Hardware`` every
  simdist run uses (its GPU profile, the link between its devices, its NIC); processes
  started on the same Machine share its GPUs' memory.
- ``TaskRuntime``: one TF process (a ``Server`` task, or the process of a local
  ``Session``): its devices, a GPU allocator per visible GPU, and its ``ResourceMgr``.
- ``ResourceMgr``: TF's per-task resource containers, where variables live.
"""

from __future__ import annotations

from simdist.hardware.devices import (DeviceProfile, Hardware, HardwareCatalog, Layout,
                                      LinkProfile, SystemProfile)
from simdist.base.errors import InvalidArgumentError, ResourceExhaustedError
from simdist.graph.config import ConfigProto

DEFAULT_CONTAINER = "localhost"  # the name TF gives the default ("") container


class ResourceMgr:
    """Models a task's tensorflow::ResourceMgr: container -> {name: value}."""

    def __init__(self, task: str):
        self.task = task
        self.containers: dict[str, dict] = {}

    def lookup(self, key):
        container, name = key
        return self.containers.get(container or DEFAULT_CONTAINER, {}).get(name)

    def store(self, key, value):
        container, name = key
        self.containers.setdefault(container or DEFAULT_CONTAINER, {})[name] = value

    def reset(self, containers=None) -> list[str]:
        """Free every resource of ``containers`` (all when None); returns what was freed."""
        names = list(self.containers) if containers is None else [
            c or DEFAULT_CONTAINER for c in containers]
        freed = []
        for name in names:
            for resource in self.containers.pop(name, {}):
                freed.append(f"{name}/{resource}")
        return freed


class Machine:
    """A simulated host: ``gpus`` GPUs of profile ``gpu`` linked by ``gpu_link``, ``cores``
    CPU cores and a ``network`` NIC. ``hardware`` is its single description (a ``Hardware``
    with one task per machine): sessions simulate their runs on it."""

    def __init__(self, gpus: int = 0, gpu: str = "v100", cpu: str = "cpu-core", cores: int = 4,
                 gpu_link: str = "pcie3-x16", network: str = "10gbe",
                 catalog: HardwareCatalog | None = None, name: str = "localhost"):
        for label, value, low in (("gpus", gpus, 0), ("cores", cores, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidArgumentError(f"Machine {label}={value!r}: expected an int >= {low}")
        catalog = catalog or HardwareCatalog.default()
        self.name, self.gpus, self.cores = name, gpus, cores
        self.hardware = Hardware(
            SystemProfile(f"{gpus}x{gpu}-{gpu_link}-{network}" if gpus else
                          f"{cores}x{cpu}-{network}", gpu, gpu_link, network,
                          f"a TF1 host: {gpus} x {gpu} over {gpu_link}, {cores} x {cpu}"),
            catalog.device(gpu), catalog.link(gpu_link), catalog.link(network),
            Layout(tasks_per_machine=1, devices_per_task=max(gpus, 1)))
        self.cpu_profile: DeviceProfile = catalog.device(cpu)
        self.host_link: LinkProfile = catalog.link("shm")  # between CPU devices
        self.gpu_free = [self.gpu_profile.memory] * gpus

    @property
    def gpu_profile(self) -> DeviceProfile:
        return self.hardware.device

    @property
    def gpu_link(self) -> LinkProfile:
        """CPU<->GPU and GPU<->GPU."""
        return self.hardware.intra_link

    def __repr__(self):
        return f"Machine({self.name!r}, gpus={self.gpus} x {self.gpu_profile.name}, " \
               f"cores={self.cores})"


#: TF's process-wide inter-op pools of local sessions (DirectSession's statics): "" the
#: global pool (``GlobalThreadPool``), else the pools named by a ``global_name``; each keeps
#: the size of the session that created it
_PROCESS_POOLS: dict[str, int] = {}


def direct_session_pools(config: ConfigProto, cores: int) -> list[int]:
    """The inter-op pool sizes of a new local session (TF's ``DirectSessionFactory``):
    its ``session_inter_op_thread_pool`` entries (``num_threads`` 0: the session's default;
    a ``global_name`` pool shared by name in the process), else with
    ``use_per_session_threads`` one pool of its own, else the process's global pool, sized
    by the first session that used it."""
    default = config.inter_op_parallelism_threads or cores
    if config.session_inter_op_thread_pool:
        sizes = []
        for option in config.session_inter_op_thread_pool:
            size = option.num_threads or default
            if option.global_name:
                size = _PROCESS_POOLS.setdefault(option.global_name, size)
            sizes.append(size)
        return sizes
    if config.use_per_session_threads:
        return [default]
    return [_PROCESS_POOLS.setdefault("", default)]


class GPUAllocator:
    """Models TF's BFC allocator of one GPU in one process: a pool taken from the GPU."""

    def __init__(self, machine: Machine, physical: int, device: str, options):
        self.machine, self.physical, self.device = machine, physical, device
        total = machine.gpu_profile.memory
        self.growth = options.allow_growth
        fraction = options.per_process_gpu_memory_fraction
        want = 0 if self.growth else (int(total * fraction) if fraction else
                                      machine.gpu_free[physical])
        self.reserved = 0
        self.in_use = self.peak = 0
        self._take(want, "at start-up")
        self.limit = int(total * fraction) if fraction else total

    def _take(self, nbytes: int, why: str):
        free = self.machine.gpu_free[self.physical]
        if nbytes > free or (nbytes == 0 and not self.growth and free == 0):
            nbytes = nbytes or self.machine.gpu_profile.memory
            raise ResourceExhaustedError(
                f"failed to allocate {nbytes} bytes {why} from device {self.device} (physical "
                f"GPU {self.physical} of {self.machine.name}): CUDA_ERROR_OUT_OF_MEMORY: out "
                f"of memory; {free} of {self.machine.gpu_profile.memory} bytes are free: "
                "another process holds the rest (by default a TF process takes all of a "
                "GPU's memory: set gpu_options.allow_growth or "
                "per_process_gpu_memory_fraction)")
        self.machine.gpu_free[self.physical] -= nbytes
        self.reserved += nbytes

    def allocate(self, nbytes: int, what: str, shape, dtype):
        if self.in_use + nbytes > self.reserved:
            need = self.in_use + nbytes - self.reserved
            if not self.growth or self.in_use + nbytes > self.limit or \
                    need > self.machine.gpu_free[self.physical]:
                raise ResourceExhaustedError(
                    f"OOM when allocating tensor with shape{list(shape)} and type {dtype} on "
                    f"{self.device} by allocator GPU_{self.physical}_bfc (for {what}): "
                    f"{self.in_use} bytes in use, {nbytes} more needed, the pool holds "
                    f"{self.reserved if not self.growth else self.limit} bytes")
            self._take(need, f"for {what}")
        self.in_use += nbytes
        self.peak = max(self.peak, self.in_use)

    def free(self, nbytes: int):
        self.in_use -= nbytes

    def release(self):
        """The process ends: its memory goes back to the GPU."""
        self.machine.gpu_free[self.physical] += self.reserved
        self.reserved = 0


class TaskRuntime:
    """One simulated TF process: task ``job``/``task``, devices, allocators, resources."""

    def __init__(self, job: str, task: int, machine: Machine, config: ConfigProto | None):
        self.job, self.task, self.machine = job, task, machine
        self.config = config or ConfigProto()
        count = self.config.device_count
        self.num_cpus = max(1, count.get("CPU", 1))
        visible = self.config.gpu_options.visible(machine.gpus)
        if "GPU" in count:
            visible = visible[:count["GPU"]]
        self.gpu_of = visible  # simulated GPU:i is physical GPU gpu_of[i]
        self.prefix = f"/job:{job}/replica:0/task:{task}"
        self.resources = ResourceMgr(self.prefix)
        self.allocators: dict[str, GPUAllocator] = {}
        self.local_pools: list[int] = []  # a local session's pools (``direct_session_pools``)
        self.closed = False
        self.down = False  # failed (``fail``) and not restarted yet
        try:
            for i, physical in enumerate(visible):
                device = f"{self.prefix}/device:GPU:{i}"
                self.allocators[device] = GPUAllocator(machine, physical, device,
                                                       self.config.gpu_options)
        except ResourceExhaustedError:
            self.close()
            raise

    @property
    def name(self) -> str:
        return f"{self.job}:{self.task}"

    def devices(self) -> list[str]:
        """Full names of this task's devices: CPUs first, then GPUs."""
        return ([f"{self.prefix}/device:CPU:{i}" for i in range(self.num_cpus)]
                + [f"{self.prefix}/device:GPU:{i}" for i in range(len(self.gpu_of))])

    def inter_op_threads(self) -> int:
        return self.config.inter_op_parallelism_threads or self.machine.cores

    def inter_op_pools(self) -> list[int]:
        """The sizes of this process's inter-op pools: a local session's (``local_pools``,
        TF's DirectSession), else the one pool of a server's task, sized by its config."""
        return self.local_pools or [self.inter_op_threads()]

    def intra_op_threads(self) -> int:
        return min(self.config.intra_op_parallelism_threads or self.machine.cores,
                   self.machine.cores)

    def fail(self, error):
        """The process dies: every op waiting on one of its resources (a queue, an
        accumulator) fails with ``error``, its resources (variables too) are lost, and its
        ops fail until ``restart``."""
        self.down = True
        for container in self.resources.containers.values():
            for resource in container.values():
                fail_waiters = getattr(resource, "fail_waiters", None)
                if fail_waiters is not None:
                    fail_waiters(error)
        self.resources.reset()

    def restart(self):
        """The process is back, with empty containers (TF's restarted task)."""
        self.down = False

    def close(self):
        for allocator in self.allocators.values():
            allocator.release()
        self.closed = True
