"""The trace of a run: its schema (spans, flows, counters, instants), the recorder, the Chrome
Trace Event JSON it reads and writes, and its pictures (``plots``, matplotlib).

May import ``simdist.base`` and ``simdist.hardware`` (units).
"""

from simdist.trace.schema import SCHEMA_VERSION, Counter, Flow, Instant, Span, Trace, Tracer

__all__ = ["Counter", "Flow", "Instant", "SCHEMA_VERSION", "Span", "Trace", "Tracer"]
