"""Spark's Python worker daemon, with the monitor's worker modules imported before it forks.

Spark forks every Python worker from one daemon process (pyspark/daemon.py); each worker then
imports pandas, pyarrow and the monitor's steps when it unpickles its first function: about
1.4 s of CPU per worker on the 2-core bench machine. Spark also ends a worker that has been idle
for a minute (PythonWorkerFactory's idle timeout, not a setting), so a quiet monitor's next
rebalance could start a fresh worker and wait for those imports again (bench/cost's quiet
cluster: docs/benchmarks.md, "Warm workers, plain group series, the plan ahead").
Imported once here, before any fork, every worker starts with them, and their pages are shared
copy-on-write instead of held once per worker.

The session sets this module as `spark.python.daemon.module` for local masters (session.py);
it runs as `python -m streaming.spark.worker_daemon`. pyspark's own daemon imports these
modules after the fork, because pandas and pyarrow start threads when imported (numpy's BLAS
pool, pyarrow's jemalloc background thread); both allocators and BLAS reset themselves in a
forked child (pthread_atfork), which the test suite's Spark runs exercise. A module that fails
to import here is left to the worker, as without this daemon: the daemon itself always starts.
"""
from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys

# Set in the daemon's environment to the number of modules it imported: its workers inherit it
# (the test that workers start warm reads it in a task).
PRELOADED_ENV = "REBALANCE_MONITOR_WORKER_PRELOADED"


def preload() -> int:
    """Import the workers' modules (warm_workers.WORKER_MODULES) and freeze the result out of
    the cyclic collector's reach (worker_gc.py says why); returns how many were imported."""
    loaded = 0
    # The daemon tells the JVM its port on stdout: nothing else may go there.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            from streaming.spark.warm_workers import WORKER_MODULES
        except Exception:       # the daemon must start whatever this module's imports do
            return 0
        for name in WORKER_MODULES:
            try:
                importlib.import_module(name)
                loaded += 1
            except Exception:   # the worker imports it again and reports its error
                pass
    gc.collect()
    gc.freeze()
    os.environ[PRELOADED_ENV] = str(loaded)
    return loaded


if __name__ == "__main__":
    preload()
    from pyspark import daemon
    daemon.manager()
