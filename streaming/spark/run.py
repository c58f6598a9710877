"""Running the query: to the end of a finite input (replay), and every progress report of a
query counted as Spark publishes it (replay and live)."""
from __future__ import annotations

import json
import shutil
import tempfile
import threading
from typing import Any, ClassVar, Protocol

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from streaming.rows import END_OF_INPUT_WATERMARK_YEAR
from streaming.spark.failure import QueryFailed, query_failure


class BatchSink(Protocol):
    """What consumes the query's output (streaming/app/collector.py RunCollector)."""

    def foreach_batch(self, df: Any, batch_id: int) -> None: ...

    def count_progress(self, progress: dict[str, Any]) -> None: ...


class ProgressCounter(StreamingQueryListener):
    """Feeds every progress report of one query to the sink as Spark publishes it.

    `query.recentProgress` keeps only the last `spark.sql.streaming.numRecentProgressUpdates`
    (100) reports, so reading it after a long replay lost the input counts of earlier batches.
    Listener events of a query arrive in order, and its terminated event comes last: `wait_done`
    returns once every report has been counted.

    Spark calls it through `_ProgressJson` (below), not PySpark's own wrapper.
    """

    def __init__(self, sink: BatchSink) -> None:
        self.sink = sink
        self.query_id: str | None = None
        self.final_watermark_seen = False
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._java: Any = None

    @property
    def _jlistener(self) -> Any:     # what StreamingQueryManager.addListener registers
        if self._java is None:
            from pyspark import SparkContext
            self._java = SparkContext._jvm.PythonStreamingQueryListenerWrapper(  # type: ignore[union-attr]
                _ProgressJson(self))
        return self._java

    def count_progress_json(self, text: str) -> None:
        progress = json.loads(text)
        if self.query_id is not None and progress.get("id") != self.query_id:
            return   # another query of the session
        with self._lock:
            self.sink.count_progress(progress)
            watermark = (progress.get("eventTime") or {}).get("watermark", "")
            self.final_watermark_seen |= watermark.startswith(END_OF_INPUT_WATERMARK_YEAR)

    def terminated(self, query_id: str) -> None:
        if self.query_id is None or query_id == self.query_id:
            self._done.set()

    # The abstract StreamingQueryListener interface. Spark itself calls _ProgressJson instead.
    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        self.count_progress_json(event.progress.json)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        self.terminated(str(event.id))

    def watch(self, query) -> None:
        self.query_id = str(query.id)

    def wait_done(self, timeout_s: float = 30.0) -> bool:
        return self._done.wait(timeout_s)


class _ProgressJson:
    """The py4j callback Spark's listener bus calls for a ProgressCounter: each progress report
    crosses into Python as its JSON, one call. PySpark's own callback rebuilds the report field by
    field first, and turns each observed-metrics row into Python through a class name that py4j
    resolves by trying every imported package, each miss a scan of every jar on the classpath:
    about a fifth of the live monitor's JVM CPU at a 1 s trigger (docs/benchmarks.md, "Latency")."""

    def __init__(self, counter: ProgressCounter) -> None:
        self.counter = counter

    def onQueryStarted(self, jevent) -> None:
        pass

    def onQueryProgress(self, jevent) -> None:
        self.counter.count_progress_json(jevent.progress().json())

    def onQueryIdle(self, jevent) -> None:
        pass

    def onQueryTerminated(self, jevent) -> None:
        self.counter.terminated(jevent.id().toString())

    class Java:
        implements: ClassVar[list[str]] = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def run_to_end(spark: SparkSession, outputs: DataFrame, sink: BatchSink,
               checkpoint_dir: str | None = None, timeout_s: float = 1800.0) -> None:
    """Run a finite (replay) query with Trigger.AvailableNow until all input is processed.

    The sources cap each micro-batch (admission control), so AvailableNow still runs many
    batches. Done is checked, not assumed: the last batch must have run with the watermark moved
    by the end-of-input markers, which is the batch that flushes every held event.
    """
    own_checkpoint = checkpoint_dir is None
    checkpoint = checkpoint_dir or tempfile.mkdtemp(prefix="rebalance-monitor-ckpt-")
    counter = ProgressCounter(sink)
    spark.streams.addListener(counter)
    query = (outputs.writeStream.foreachBatch(sink.foreach_batch)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    counter.watch(query)
    try:
        try:
            finished = query.awaitTermination(int(timeout_s))
        except StreamingQueryException as exc:
            raise QueryFailed(query_failure(exc)) from None
        failure = query.exception()
        if failure is not None:
            raise QueryFailed(query_failure(failure))
        if not finished:
            raise TimeoutError(f"replay did not finish within {timeout_s:.0f} s")
    finally:
        query.stop()
        counted = counter.wait_done()
        spark.streams.removeListener(counter)
        if own_checkpoint:
            shutil.rmtree(checkpoint, ignore_errors=True)
    if not counted:
        raise RuntimeError("replay: Spark did not report the end of the query within 30 s")
    if not counter.final_watermark_seen:
        raise RuntimeError("replay ended before the end-of-input watermark flushed held events")
