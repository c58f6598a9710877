"""A failed query as one line (no pyspark import: the command line catches QueryFailed without
loading Spark)."""
from __future__ import annotations


class QueryFailed(RuntimeError):
    """A finite query (replay) failed in Spark: one line naming the cause, which the command
    prints instead of a traceback (exit 1)."""


# Causes worth a hint: (text in Spark's error, what to say).
_KNOWN_CAUSES = (
    ("OutOfMemoryError", "a JVM ran out of heap (OutOfMemoryError); raise driver_memory "
                         "(REBALANCE_MONITOR_DRIVER_MEMORY or the config file) or make the slices smaller "
                         "(--max-rows-per-batch)"),
    ("TaskResultLost", "a task's result was lost before the driver fetched it (TaskResultLost), usually "
                       "for want of heap in the driver JVM; raise driver_memory (REBALANCE_MONITOR_DRIVER_MEMORY "
                       "or the config file)"),
)


def query_failure(exc: BaseException) -> str:
    """One line for a failed query: a known cause with its hint, else the error's first line."""
    text = str(exc)
    for marker, hint in _KNOWN_CAUSES:
        if marker in text:
            return hint
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return first if len(first) <= 300 else first[:297] + "..."
