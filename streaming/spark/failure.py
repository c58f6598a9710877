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
    """One line for a failed query: a known cause with its hint; else the exception a Python
    function of the query raised (the last line of the traceback Spark embeds), or the innermost
    JVM cause; else the error's first line."""
    text = str(exc)
    for marker, hint in _KNOWN_CAUSES:
        if marker in text:
            return hint
    lines = text.splitlines()
    raised = _python_cause(lines)
    if raised is not None:
        return _short(f"a Python function of the query raised {raised}")
    return _short(_jvm_cause(lines) or next((line.strip() for line in lines if line.strip()), type(exc).__name__))


def _python_cause(lines: list[str]) -> str | None:
    """`Type: message` after the last frame of an embedded Python traceback."""
    frames = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    if not frames:
        return None
    return next((line.strip() for line in lines[frames[-1] + 1:] if line.strip() and not line[0].isspace()), None)


def _jvm_cause(lines: list[str]) -> str | None:
    causes = [line.strip().removeprefix("Caused by: ") for line in lines if line.strip().startswith("Caused by: ")]
    return causes[-1] if causes else None


def _short(line: str) -> str:
    return line if len(line) <= 300 else line[:297] + "..."
