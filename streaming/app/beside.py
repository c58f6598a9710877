"""Two pieces of the driver's work at once: one in a forked child, one in this process.

A replay's last seconds are the driver alone (the query has ended, Spark's executors are idle):
writing the record files and the report, then metrics.prom and the summary, one after the other
on one core. They only read what the run collected, so a child forked at that point can write
some of them from its copy-on-write view of the records while this process does the rest.

The child must only read the data and write files: it shares nothing with this process after the
fork, so a lock another thread held at the fork (a /metrics scrape of the demo's server, Spark's
callback threads) stays held in the child. It does not print, leaves with `os._exit` (no exit
handlers, no buffers of this process written twice) and sends the text of its error, if any,
through a pipe.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable

# The child's error text is cut to this many bytes.
_ERROR_BYTES = 4000


class BesideError(RuntimeError):
    """The forked child's work failed: its error text."""


def run_beside(child: Callable[[], object], here: Callable[[], object], fork: bool | None = None) -> None:
    """`child()` in a forked process while `here()` runs in this one; returns when both have ended.
    Raises `here`'s error, else BesideError with the child's. Without fork (a platform without
    it, or `fork=False`) the two run one after the other here."""
    if fork is None:
        fork = hasattr(os, "fork")
    if not fork:
        child()
        here()
        return
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:                                     # the child
        os.close(read_end)
        code = 0
        try:
            child()
        except BaseException as exc:                 # every failure goes back as text
            os.write(write_end, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:_ERROR_BYTES])
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        here()
    finally:
        with os.fdopen(read_end, "rb") as pipe:
            error = pipe.read().decode("utf-8", "replace")
        _, status = os.waitpid(pid, 0)
    if status != 0:
        code = os.waitstatus_to_exitcode(status)
        how = f"exit code {code}" if code >= 0 else f"signal {-code}"
        raise BesideError(error or f"the child process writing the outputs ended with {how}")
