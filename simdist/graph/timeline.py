"""Models ``tensorflow.python.client.timeline``: a traced run's ``StepStats`` as a Chrome
trace (chrome://tracing, Perfetto).

    from simdist.graph import timeline
    trace = timeline.Timeline(run_metadata.step_stats)
    open("timeline.json", "w").write(trace.generate_chrome_trace_format())

The shape is TF's: two processes per device ("... Compute", "... Tensors"), named by metadata events, and one
complete event ("X", category "Op") per node, named by its op type, with the node's name
in its arguments; times in microseconds of the job's simulated clock.
"""

from __future__ import annotations

import json

from simdist.base.errors import InvalidArgumentError
from simdist.graph.run_metadata import StepStats


class Timeline:
    """TF's ``Timeline(step_stats)``."""

    def __init__(self, step_stats: StepStats, graph=None):
        if not isinstance(step_stats, StepStats):
            raise InvalidArgumentError(
                f"Timeline(step_stats={step_stats!r}): expected RunMetadata.step_stats of a "
                "run with RunOptions(trace_level=RunOptions.FULL_TRACE)")
        self._step_stats = step_stats

    def generate_chrome_trace_format(self, show_dataflow: bool = True,
                                     show_memory: bool = False) -> str:
        """The Chrome Trace Event JSON of the step, as a string."""
        events = [{"name": "process_name", "ph": "M", "pid": 0,
                   "args": {"name": "Allocators"}}]
        for i, dev in enumerate(self._step_stats.dev_stats):
            pid = 1 + 2 * i  # TF's: a "Compute" and a "Tensors" process per device
            for offset, kind in enumerate(("Compute", "Tensors")):
                events.append({"name": "process_name", "ph": "M", "pid": pid + offset,
                               "args": {"name": f"{dev.device} {kind}"}})
            for node in dev.node_stats:
                op = node.timeline_label.split(" = ", 1)[-1].split("(", 1)[0]
                events.append({"ph": "X", "cat": "Op", "name": op, "pid": pid, "tid": 0,
                               "ts": node.all_start_micros, "dur": node.op_end_rel_micros,
                               "args": {"name": node.node_name, "op": op}})
        return json.dumps({"traceEvents": events}, indent=None)
