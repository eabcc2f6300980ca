"""Models tf.compat.v1.ConfigProto and GPUOptions: the options a session or server starts with.

Only the options the course uses: placement (``log_device_placement``,
``allow_soft_placement``), devices (``device_count``), thread pools
(``inter_op_parallelism_threads``, ``intra_op_parallelism_threads``,
``use_per_session_threads``, ``session_inter_op_thread_pool``) and GPU memory
(``gpu_options``: ``per_process_gpu_memory_fraction``, ``allow_growth``,
``visible_device_list``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simdist.base.errors import InvalidArgumentError


@dataclass
class GPUOptions:
    """tf.compat.v1.GPUOptions. By default a process takes (almost) all of each GPU it sees."""

    per_process_gpu_memory_fraction: float = 0.0  # 0: all of the free memory (TF's default)
    allow_growth: bool = False  # take memory as tensors need it instead of all at start
    visible_device_list: str = ""  # "1,0": physical GPU 1 becomes GPU:0, GPU 0 becomes GPU:1

    def __post_init__(self):
        fraction = self.per_process_gpu_memory_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
                or not 0 <= fraction <= 1:
            raise InvalidArgumentError(
                f"per_process_gpu_memory_fraction {fraction!r} must be a number in [0, 1] "
                "(0 means: take all the memory)")
        if not isinstance(self.visible_device_list, str):
            raise InvalidArgumentError(
                f"visible_device_list {self.visible_device_list!r} must be a string such as "
                "'0,1'")

    def visible(self, num_gpus: int) -> list[int]:
        """The physical GPU of each visible GPU, in the order this process numbers them."""
        if not self.visible_device_list:
            return list(range(num_gpus))
        result = []
        for part in self.visible_device_list.split(","):
            part = part.strip()
            if not part.isdigit() or int(part) >= num_gpus or int(part) in result:
                raise InvalidArgumentError(
                    f"'visible_device_list' listed an invalid GPU id {part!r} in "
                    f"{self.visible_device_list!r}: the machine has {num_gpus} GPU(s), "
                    f"ids 0..{num_gpus - 1}, each listed at most once")
            result.append(int(part))
        return result


@dataclass
class ThreadPoolOptionProto:
    """tf.compat.v1.ThreadPoolOptionProto: one of a session's inter-op pools
    (``ConfigProto.session_inter_op_thread_pool``). ``num_threads`` 0: the session's default
    (``inter_op_parallelism_threads``, else one per core); ``global_name``: the pool is the
    process's pool of that name, shared with every session that names it (its first
    creator's size holds); empty: the session's own pool."""

    num_threads: int = 0
    global_name: str = ""

    def __post_init__(self):
        if isinstance(self.num_threads, bool) or not isinstance(self.num_threads, int) \
                or self.num_threads < 0:
            raise InvalidArgumentError(f"ThreadPoolOptionProto num_threads "
                                       f"{self.num_threads!r} must be an int >= 0 (0: the "
                                       "session's default)")
        if not isinstance(self.global_name, str):
            raise InvalidArgumentError(f"ThreadPoolOptionProto global_name "
                                       f"{self.global_name!r} must be a string")


@dataclass
class ConfigProto:
    """tf.compat.v1.ConfigProto.

    ``device_count`` caps the devices of a type a process uses, as in TF; in simdist it also
    *creates* the simulated CPU devices ({"CPU": 2} gives /device:CPU:0 and /device:CPU:1,
    like TF's logical CPU devices) and, for a Session without a Machine, the GPUs.
    ``inter_op_parallelism_threads``: how many ops of one task run at once (0: one per core);
    ``intra_op_parallelism_threads``: how many cores one CPU op uses (0: all cores).
    A local session's inter-op pool (TF's DirectSession): by default the process's one
    global pool, which the first such session creates with its size (a later session's
    ``inter_op_parallelism_threads`` is ignored); ``use_per_session_threads``: a pool of the
    session's own; ``session_inter_op_thread_pool``: a list of ``ThreadPoolOptionProto``,
    the session's pools, one chosen per run by ``RunOptions.inter_op_thread_pool``. A
    server's sessions share its task's pool, sized by the server's config.
    ``device_filters``: a session on a cluster sees only the tasks they match (and its own).
    """

    device_count: dict = field(default_factory=dict)
    log_device_placement: bool = False
    allow_soft_placement: bool = False
    inter_op_parallelism_threads: int = 0
    intra_op_parallelism_threads: int = 0
    gpu_options: GPUOptions = field(default_factory=GPUOptions)
    operation_timeout_in_ms: int = 0
    use_per_session_threads: bool = False
    session_inter_op_thread_pool: list = field(default_factory=list)
    #: the remote devices a session on a cluster sees ("/job:ps", "/job:worker/task:1");
    #: empty: all of them
    device_filters: list = field(default_factory=list)

    def __post_init__(self):
        for key, value in self.device_count.items():
            if key not in ("CPU", "GPU") or isinstance(value, bool) or not isinstance(
                    value, int) or value < 0:
                raise InvalidArgumentError(
                    f"device_count {{{key!r}: {value!r}}}: expected 'CPU' or 'GPU' mapped to "
                    "an int >= 0")
        for name in ("inter_op_parallelism_threads", "intra_op_parallelism_threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"{name} {value!r} must be an int >= 0 "
                                           "(0: one thread per core)")
        for spec in self.device_filters:
            if not isinstance(spec, str) or not spec.startswith("/"):
                raise InvalidArgumentError(f"device_filters entry {spec!r}: expected a device "
                                           "string such as '/job:ps' or '/job:worker/task:0'")
        if not isinstance(self.use_per_session_threads, bool):
            raise InvalidArgumentError(f"use_per_session_threads "
                                       f"{self.use_per_session_threads!r} must be a bool")
        if not isinstance(self.session_inter_op_thread_pool, (list, tuple)):
            raise InvalidArgumentError(
                f"session_inter_op_thread_pool {self.session_inter_op_thread_pool!r}: expected "
                "a list of ThreadPoolOptionProto")
        self.session_inter_op_thread_pool = [
            ThreadPoolOptionProto(**p) if isinstance(p, dict) else p
            for p in self.session_inter_op_thread_pool]
        for pool in self.session_inter_op_thread_pool:
            if not isinstance(pool, ThreadPoolOptionProto):
                raise InvalidArgumentError(
                    f"session_inter_op_thread_pool entry {pool!r}: expected a "
                    "ThreadPoolOptionProto (or a dict of its fields)")
        if isinstance(self.gpu_options, dict):
            self.gpu_options = GPUOptions(**self.gpu_options)
