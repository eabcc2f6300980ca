"""Models ``tf.compat.v1.RunOptions`` and ``RunMetadata`` (TF's ``config.proto``) and the
``StepStats`` a traced run fills (``step_stats.proto``).

    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE,
                            output_partition_graphs=True, timeout_in_ms=5000)
    metadata = tf.RunMetadata()
    sess.run(train_op, options=options, run_metadata=metadata)
    metadata.partition_graphs    # one GraphDef per device: the master's partitions
    metadata.step_stats          # when each node ran, per device (simulated microseconds)

Times are the job's simulated clock, so ``timeline.Timeline(metadata.step_stats)`` draws
the run as TF's timeline draws a real one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simdist.base.errors import InvalidArgumentError


@dataclass
class RunOptions:
    """tf.compat.v1.RunOptions: ``trace_level`` (NO_TRACE..FULL_TRACE: any level above
    NO_TRACE fills ``RunMetadata.step_stats``), ``timeout_in_ms`` (this run's deadline for a
    blocking op, like ``ConfigProto.operation_timeout_in_ms``; 0: the session's),
    ``output_partition_graphs`` (fill ``RunMetadata.partition_graphs``),
    ``inter_op_thread_pool`` (which of a local session's ``session_inter_op_thread_pool``
    pools runs this run's ops; -1: the caller's thread alone)."""

    NO_TRACE = 0
    SOFTWARE_TRACE = 1
    HARDWARE_TRACE = 2
    FULL_TRACE = 3

    trace_level: int = 0
    timeout_in_ms: int = 0
    output_partition_graphs: bool = False
    inter_op_thread_pool: int = 0

    def __post_init__(self):
        if self.trace_level not in (0, 1, 2, 3):
            raise InvalidArgumentError(f"RunOptions trace_level={self.trace_level!r}: expected "
                                       "NO_TRACE (0), SOFTWARE_TRACE, HARDWARE_TRACE or "
                                       "FULL_TRACE (3)")
        if isinstance(self.timeout_in_ms, bool) or not isinstance(self.timeout_in_ms, int) \
                or self.timeout_in_ms < 0:
            raise InvalidArgumentError(f"RunOptions timeout_in_ms={self.timeout_in_ms!r}: "
                                       "expected an int >= 0 (milliseconds; 0: no deadline)")
        pool = self.inter_op_thread_pool
        if isinstance(pool, bool) or not isinstance(pool, int):
            raise InvalidArgumentError(f"RunOptions inter_op_thread_pool={pool!r}: expected an "
                                       "int (an index into session_inter_op_thread_pool, or -1)")


@dataclass
class NodeExecStats:
    """One node's run on its device (TF's NodeExecStats), in microseconds: it started at
    ``all_start_micros`` on the job's clock and ran ``op_end_rel_micros`` long."""

    node_name: str
    timeline_label: str
    all_start_micros: int
    op_start_rel_micros: int
    op_end_rel_micros: int
    all_end_rel_micros: int
    all_start_nanos: int = 0
    op_end_rel_nanos: int = 0


@dataclass
class DeviceStepStats:
    """TF's DeviceStepStats: what ran on one device."""

    device: str
    node_stats: list = field(default_factory=list)


@dataclass
class StepStats:
    """TF's StepStats: one DeviceStepStats per device that ran something."""

    dev_stats: list = field(default_factory=list)

    def record(self, device: str, node: str, op_type: str, start_ns: int, end_ns: int):
        """Add one node's run (simulated ns)."""
        for dev in self.dev_stats:
            if dev.device == device:
                break
        else:
            dev = DeviceStepStats(device)
            self.dev_stats.append(dev)
        micros = (end_ns - start_ns) // 1000
        dev.node_stats.append(NodeExecStats(
            node, f"{node} = {op_type}()", start_ns // 1000, 0, micros, micros, start_ns,
            end_ns - start_ns))


@dataclass
class RunMetadata:
    """tf.compat.v1.RunMetadata: filled by ``Session.run(..., run_metadata=)``."""

    step_stats: StepStats = field(default_factory=StepStats)
    partition_graphs: list = field(default_factory=list)
