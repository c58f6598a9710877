"""Python workers started and warmed before a live query's first micro-batch.

Spark starts its Python workers on first use, and each worker imports the monitor's modules
(pandas, pyarrow, kafka-python, the parse, decode and state steps) when it unpickles its first
function: about 1.4 s per worker on the 2-core bench machine. A micro-batch task runs its Kafka
read and the decode as two Python steps, each in a worker of its own, so the first micro-batches
with records paid it four times over and left a backlog that the next ones caught up with
(docs/benchmarks.md, "Warm workers, plain group series, the plan ahead"). `warm_python_workers`
runs, before the query starts, one small job with the same shape (two chained Python steps per
task, one task per core); Spark keeps idle workers for reuse, so the query's first tasks find them
ready.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

LOG = logging.getLogger(__name__)

# What the query's functions import in a worker (they are pickled by reference to these modules).
WORKER_MODULES = ("pandas", "pyarrow", "kafka", "streaming.spark.steps", "streaming.spark.stateful",
                  "streaming.spark.sources.kafka", "streaming.spark.sources.clock",
                  "streaming.spark.sources.replay_files", "streaming.spark.sources.staged")
# The tasks hold their workers briefly, so that they run at once and the pool ends up with two
# workers per task, not one task's two reused by the next.
HOLD_S = 0.3
WARM_SCHEMA = "task long, reader_pid long, reader_modules long, pid long, modules long"


def _import_modules() -> int:
    import importlib
    import sys
    from streaming.spark.worker_gc import freeze_worker_heap
    for name in WORKER_MODULES:
        importlib.import_module(name)
    freeze_worker_heap()        # what the worker holds now is its lasting heap (worker_gc.py)
    return sum(name in sys.modules for name in WORKER_MODULES)


def _warm_step(batches: Iterator[Any], columns: tuple[str, str]) -> Iterator[Any]:
    """The batches with two columns added: this worker's pid and how many modules it holds."""
    import os
    import pyarrow as pa
    loaded = _import_modules()
    time.sleep(HOLD_S)
    for b in batches:
        yield pa.RecordBatch.from_arrays([*b.columns, pa.array([os.getpid()] * b.num_rows, pa.int64()),
                                          pa.array([loaded] * b.num_rows, pa.int64())],
                                         names=[*b.schema.names, *columns])


def warm_python_workers(spark: Any, tasks: int) -> list[Any]:
    """Start and warm 2 x `tasks` Python workers; returns the job's rows (task, the two workers'
    pids and how many of WORKER_MODULES each had loaded). Best effort: a failure is logged, and
    the query then starts its workers itself. Local masters only: on a cluster the job would wait
    for executors before the query starts, where `run` could not stop, and its gain there has not
    been measured."""
    if not spark.sparkContext.master.startswith("local"):
        return []
    started = time.monotonic()
    try:
        rows = (spark.range(0, tasks, 1, tasks).withColumnRenamed("id", "task")
                .mapInArrow(partial(_warm_step, columns=("reader_pid", "reader_modules")),
                            "task long, reader_pid long, reader_modules long")
                .mapInArrow(partial(_warm_step, columns=("pid", "modules")), WARM_SCHEMA).collect())
    except Exception as exc:      # the query works without it, only its first batches are slower
        LOG.warning("run: Python workers not warmed before the query (%s: %s)", type(exc).__name__,
                    str(exc).splitlines()[0] if str(exc) else "")
        return []
    LOG.info("run: %d Python workers warmed in %.1f s", len({p for r in rows for p in (r.reader_pid, r.pid)}),
             time.monotonic() - started)
    return rows
