"""The query's defaults, declared once: the settings (streaming/app/settings/schema.py) and the
Spark side (QueryOptions, get_spark, for callers without settings: tests, benches) take them from
here. Constants only, importable from every layer."""
from typing import Literal

LATENESS_SECONDS = 30.0              # watermark delay per source (replay, demo; `run` has its own)
# replay: event rows per micro-batch (a time slice). Each slice costs every group with events in
# it a turn; a day of 10,000 groups (1.07 M event rows) in one slice replays in 97 s, in six
# (200,000 rows, the default before) in 110 s (docs/benchmarks.md). A slice's events are applied
# in its own batch (StagedKind.complete_through), so the state does not hold them.
REPLAY_MAX_ROWS_PER_BATCH = 2_000_000
# `run` catching up (a new checkpoint on a full `__consumer_offsets`, a monitor that was down): a
# source further behind than CATCH_UP_MAX_ROWS records reads in batches of at most that many (the
# bound on memory: a batch holds its rows' events in the stateful step at once), sized to take
# about CATCH_UP_BATCH_SECONDS at the rate the last ones ran, so the live view and the backlog
# gauge move while it reads (streaming/spark/sources/catch_up.py). Every batch costs each group it
# touches a turn or a fold, and a catch-up touches them all: 5 M records of 10,000 groups took
# 60 s in one batch and 92 s in batches of 1 M (docs/benchmarks.md, "Catching up"), so the cap is
# the largest batch measured (heap in use 405 MB of the default 2 GiB).
CATCH_UP_MAX_ROWS = 5_000_000
CATCH_UP_BATCH_SECONDS = 30.0
STATE_BUCKETS = 32                   # state keys the groups of a cluster share (docs/benchmarks.md: why 32)
# Spark's state store provider for a new checkpoint (bench/state-store; docs/benchmarks.md, "State store").
STATE_STORE: Literal["hdfs", "rocksdb"] = "hdfs"
# The driver JVM's heap in local mode (spark.driver.memory, read by spark-submit when PySpark
# starts the JVM; JAVA_TOOL_OPTIONS -Xmx loses against spark-submit's own -Xmx). 1 GiB, Spark's
# default, ran out of heap replaying 10,000 groups (issue 15); docs/configuration.md lists the
# sizes measured per group count.
DEFAULT_DRIVER_MEMORY = "2g"
