"""SparkSession for the monitor: local by default, few shuffle partitions, our sources registered."""
from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from streaming.defaults import DEFAULT_DRIVER_MEMORY
from streaming.spark.jvm_archive import java_options
from streaming.spark.sources.clock import ClockSource
from streaming.spark.sources.kafka import KafkaSource
from streaming.spark.sources.replay_files import LogFilesSource, OffsetsFilesSource
from streaming.spark.sources.staged import StagedSource


DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# The local JVM's garbage collector (docs/design.md, "The local JVM's garbage collector").
LOCAL_GC = "-XX:+UseSerialGC"
# The HotSpot flags that select a collector (ConcMarkSweep: JDKs before 14). By name: other flags
# end in "GC" too (-XX:+UseAdaptiveSizePolicyWithSystemGC) and choose none.
GC_CHOICE = re.compile(r"-XX:\+Use(?:Serial|Parallel|ParallelOld|G1|Z|Shenandoah|Epsilon|ConcMarkSweep)GC\b")
# Python workers forked with the monitor's modules already imported (worker_daemon.py).
DAEMON_MODULE = "streaming.spark.worker_daemon"
# The `state_store` setting's Spark settings. Spark records the provider in a checkpoint's offsets
# log and keeps it on restart: the setting chooses it for a new checkpoint only.
STATE_STORE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
STATE_STORES: dict[str, dict[str, str]] = {
    # Spark's default: every state row in the JVM heap (the last two versions), a delta file per batch.
    "hdfs": {STATE_STORE_PROVIDER: "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"},
    # State in RocksDB (native memory, local disk); the checkpoint gets each batch's changes.
    "rocksdb": {STATE_STORE_PROVIDER: "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"},
}


def state_store_conf(name: str) -> dict[str, str]:
    """The Spark settings of the `state_store` setting's provider."""
    return dict(STATE_STORES[name])


def is_local_path(location: str) -> bool:
    """A checkpoint on this machine's file system (a plain path or file:)."""
    scheme = location.split(":", 1)[0] if "://" in location or location.startswith("file:") else ""
    return scheme in ("", "file")


def live_conf(checkpoint_location: str, idle_markers: bool = False) -> dict[str, str]:
    """Spark settings of the live query, for micro-batches of well under a second
    (docs/benchmarks.md, "Latency"; the `spark_conf` setting overrides each).

    - Whole-stage code generation off: the live batches hold a few rows, and generating the
      code of the log envelope step's large expressions again for every micro-batch cost more
      than evaluating them.
    - A local checkpoint is written through Hadoop's FileSystem API on its raw local file system.
      The default, FileContext on the checksummed local file system, starts a `readlink` process
      for every path it resolves and a `chmod` for every file it creates (Hadoop without its
      native library): about 15 processes per micro-batch, 80 ms of each batch's commit. The raw
      file system writes no `.crc` side files (old ones are ignored); rename is still atomic.
    - With `idle_markers` (kafka.idle_flush: a quiet source adds a marker row every
      idle_tick_seconds), no "no-data" micro-batches: Spark would run one after every batch that
      moved the watermark, only to fire the state timeouts the next marker's batch fires anyway.
      A quiet cluster then costs 0.36 cores instead of 0.43 (bench/latency), and a final record
      comes up to one idle tick later (docs/benchmarks.md, "The quiet cluster"). Without markers
      (old data, idle_flush off) those batches are what releases the last records, so they stay.
    """
    conf = {"spark.sql.codegen.wholeStage": "false"}
    if idle_markers:
        conf["spark.sql.streaming.noDataMicroBatches.enabled"] = "false"
    if is_local_path(checkpoint_location):
        conf.update({
            "spark.sql.streaming.checkpointFileManagerClass":
                "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
            "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
        })
    return conf


def chooses_gc(java_options: str) -> bool:
    """Do these JVM options select a garbage collector (-XX:+UseG1GC, -XX:+UseZGC, ...)? A second
    choice would stop the JVM ("multiple garbage collectors selected")."""
    return GC_CHOICE.search(java_options) is not None


def with_local_jvm_options(conf: Mapping[str, str]) -> dict[str, str]:
    """`conf` with the local driver JVM's own options before the user's spark.driver.extraJavaOptions,
    if any: the serial garbage collector, unless the user chose one (docs/design.md, "The local
    JVM's garbage collector"), and the class archive (streaming/spark/jvm_archive.py)."""
    out = dict(conf)
    user = out.get(DRIVER_JAVA_OPTIONS, "")
    options = " ".join(o for o in ("" if chooses_gc(user) else LOCAL_GC, java_options(), user) if o)
    if options:
        out[DRIVER_JAVA_OPTIONS] = options
    return out


def under_spark_submit() -> bool:
    """Started by spark-submit (or spark-operator, which runs it)? Its JVM starts Python with
    PYSPARK_GATEWAY_PORT set and holds the master and the rest of the submitted settings. A
    SparkConf() made before the SparkContext does not see them (no JVM yet on the Python side),
    which once made every submitted run a local[2] run in the driver, whatever --master said."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or SparkConf().contains("spark.master")


def get_spark(master: str = "local[2]", shuffle_partitions: int = 2, app_name: str = "rebalance-monitor",
              conf: Mapping[str, str] | None = None, driver_memory: str = DEFAULT_DRIVER_MEMORY) -> SparkSession:
    """The session: local mode with loopback-only networking by default; under spark-submit the
    master (k8s://, yarn, spark://), networking and driver memory come from spark-submit and are
    left alone. `conf` (the `spark_conf` setting) goes on top, e.g. spark.jars.packages; settings
    Spark only reads when its JVM starts have no effect on a session that already runs (spark-submit)."""
    submitted = under_spark_submit()
    builder = SparkSession.builder.appName(app_name)
    if not submitted:
        # Python workers must run the interpreter that has our packages (the venv's).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        # Loopback only: the driver and its Python workers talk to each other, nothing else.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.master(master)
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.memory", driver_memory)
                   # Local workers run this venv, which has the module. A cluster's executors
                   # may get the monitor's code only per task (--py-files): not set there.
                   .config("spark.python.daemon.module", DAEMON_MODULE))
    builder = (
        builder
        # The default 200 shuffle partitions cost seconds per micro-batch in local mode.
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        # Per-source watermarks are combined with min: a lagging source holds the others back
        # instead of having its rows dropped as late (docs/design.md).
        .config("spark.sql.streaming.multipleWatermarkPolicy", "min")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Bigger Arrow batches for mapInArrow: the offsets decoder aggregates commits
        # per batch, so more rows per batch means fewer output rows and less per-batch overhead
        # (bench/offsets: about 2x the in-process rate of 10,000-row batches).
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "50000")
    )
    for key, value in (with_local_jvm_options(conf or {}) if not submitted else (conf or {})).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(LogFilesSource)
    spark.dataSource.register(OffsetsFilesSource)
    spark.dataSource.register(StagedSource)
    spark.dataSource.register(KafkaSource)
    spark.dataSource.register(ClockSource)
    return spark


def quiet_streaming_errors() -> None:
    """Spark logs the failure of a batch that reached foreachBatch after the stop (QueryStopping,
    which is how it is left uncommitted) as a query error with the Python traceback: at a stop that
    is no error, so Spark's streaming loggers are turned off first (CI saw the trace once)."""
    try:
        jvm = SparkContext._jvm
        if jvm is not None:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                "org.apache.spark.sql.execution.streaming", jvm.org.apache.logging.log4j.Level.OFF)
    except Exception as exc:   # the JVM may be gone already (a SIGTERM to the process group)
        logging.getLogger("rebalance_monitor.run").debug("run: Spark's streaming logs stay on at the stop (%s)",
                                                          type(exc).__name__)
