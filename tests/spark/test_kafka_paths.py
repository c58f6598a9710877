"""The two Kafka paths feed the same query: rows shaped as Spark's kafka connector delivers them
give the same events as the kafka-python Data Source's rows. (The connector itself, fetched from
Maven, runs against a real cluster in tests/e2e/kafka/test_sources_live.py.)"""
from __future__ import annotations

import base64
import json
from datetime import datetime, timezone

import pytest
from pyspark.sql import types as T

from state.vocabulary import SOURCE_KIND_LOG as KIND_LOG
from state.vocabulary import SOURCE_KIND_OFFSETS as KIND_OFFSETS
from streaming.spark.schema import RAW_LOG_SCHEMA, RAW_OFFSETS_SCHEMA
from streaming.spark.sources.kafka import KafkaStreamReader
from tests.support.capture_expectations import FIXTURES

pytestmark = pytest.mark.spark

CONNECTOR_SCHEMA = T.StructType([
    T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType()),
    T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
    T.StructField("offset", T.LongType()), T.StructField("timestamp", T.TimestampType()),
    T.StructField("timestampType", T.IntegerType()),
])


class FakeRecord:
    def __init__(self, topic, partition, offset, timestamp, key, value):
        self.topic, self.partition, self.offset, self.timestamp = topic, partition, offset, timestamp
        self.key, self.value = key, value


def _records():
    out = []
    for _i, raw in enumerate((FIXTURES / "kafka-4.0" / "offsets-topic.jsonl").read_text().splitlines()[:1500]):
        d = json.loads(raw)
        value = None if d["value_b64"] is None else base64.b64decode(d["value_b64"])
        out.append(FakeRecord("offs", d["partition"], d["offset"], d["timestamp"],
                              base64.b64decode(d["key_b64"]), value))
    return out


def _lines():
    out = []
    for i, line in enumerate((FIXTURES / "kafka-4.0" / "node1-server.log").read_text().splitlines()):
        out.append(FakeRecord("logs", 0, i, 1795288650000 + i, None, line.encode()))
    return out


def _events(spark, raw_df, kind):
    from streaming.logs.step import LogSourceSpec
    from streaming.offsets.per_record import ClusterNames
    from streaming.spark.steps import log_events, offsets_events
    if kind == KIND_LOG:
        events = log_events(raw_df, {}, default_spec=LogSourceSpec("c"))
    else:
        events = offsets_events(raw_df, ClusterNames({}, "c"))
    return sorted((tuple(r) for r in events.collect()), key=repr)   # statistics rows have no group (None)


@pytest.mark.parametrize("kind,records,schema", [(KIND_OFFSETS, _records, RAW_OFFSETS_SCHEMA),
                                                 (KIND_LOG, _lines, RAW_LOG_SCHEMA)])
def test_connector_rows_and_python_source_rows_give_the_same_events(spark, kind, records, schema):
    from streaming.spark.query import connector_rows_to_raw
    recs = records()
    reader = KafkaStreamReader({"bootstrapServers": "unused:1", "topics": "t", "kind": kind})
    python_raw = spark.createDataFrame([reader._row(f"{r.topic}-{r.partition}", r) for r in recs], schema)
    connector = spark.createDataFrame(
        [(r.key, r.value, r.topic, r.partition, r.offset,
          datetime.fromtimestamp(r.timestamp / 1000, timezone.utc), 0) for r in recs], CONNECTOR_SCHEMA)
    connector_raw = connector_rows_to_raw(connector, kind)
    columns = lambda df: [(f.name, f.dataType) for f in df.schema.fields]  # noqa: E731 (nullability differs)
    assert columns(connector_raw) == columns(python_raw)
    python_events = _events(spark, python_raw, kind)
    assert len(python_events) > 50
    assert _events(spark, connector_raw, kind) == python_events


def test_source_choice(spark):
    from streaming.app.service import choose_kafka_source
    from streaming.app.settings import ConfigError, KafkaSettings
    from streaming.spark.query import spark_kafka_available
    assert not spark_kafka_available(spark)        # no connector jar on this machine
    assert choose_kafka_source(spark_kafka_available(spark), KafkaSettings(bootstrap_servers="h:1", source="auto")) == "python"
    with pytest.raises(ConfigError, match="needs Spark's kafka connector on the classpath"):
        choose_kafka_source(spark_kafka_available(spark), KafkaSettings(bootstrap_servers="h:1", source="spark"))


def test_the_connectors_idle_flush_gives_the_markers_of_the_python_source():
    from streaming.spark.sources.clock import ClockStreamReader
    for kind, schema in ((KIND_LOG, RAW_LOG_SCHEMA), (KIND_OFFSETS, RAW_OFFSETS_SCHEMA)):
        clock = ClockStreamReader(kind)
        start = clock.initialOffset()
        end = clock.latestOffset(start, clock.getDefaultReadLimit())
        parts = clock.partitions(start, end)
        assert len(parts) == 1 and clock.partitions(end, end) == []     # one marker per new batch
        rows = list(clock.read(parts[0]))
        python_source = KafkaStreamReader({"bootstrapServers": "unused:1", "topics": "t", "kind": kind})
        assert rows == [python_source._marker(end["tick"])]
        assert len(rows[0]) == len(schema.fields)


def test_connector_rows_reach_the_python_steps_in_one_task_per_core(spark):
    """The connector reads each topic partition in a task of its own; the Python decode must not
    start once per partition (50 a micro-batch for the offsets topic)."""
    from streaming.spark.query import connector_rows_to_raw
    recs = _records()[:200]
    connector = spark.createDataFrame(
        [(r.key, r.value, "offs", i % 50, r.offset, datetime.fromtimestamp(r.timestamp / 1000, timezone.utc), 0)
         for i, r in enumerate(recs)], CONNECTOR_SCHEMA).repartition(50, "partition")
    assert connector.rdd.getNumPartitions() == 50
    raw = connector_rows_to_raw(connector, KIND_OFFSETS, tasks=2)
    assert raw.rdd.getNumPartitions() == 2
    assert raw.count() == len(recs)
    assert connector_rows_to_raw(connector, KIND_OFFSETS).rdd.getNumPartitions() == 50


def test_python_workers_are_warmed_two_per_task_with_the_query_modules(spark):
    """`run` warms the workers its first micro-batch needs (streaming/spark/warm_workers.py): a
    task's read and decode steps run in two workers at once, each with the modules imported."""
    from streaming.spark.warm_workers import WORKER_MODULES, warm_python_workers
    rows = warm_python_workers(spark, 2)
    assert sorted(r.task for r in rows) == [0, 1]
    assert all(r.reader_pid != r.pid for r in rows)
    assert all(r.reader_modules == r.modules == len(WORKER_MODULES) for r in rows)


def _worker_view(batches):
    import os
    import sys

    import pyarrow as pa
    from streaming.spark.worker_daemon import PRELOADED_ENV
    for b in batches:
        yield pa.RecordBatch.from_arrays(
            [b.column(0), pa.array([int(os.environ.get(PRELOADED_ENV, -1))] * b.num_rows),
             pa.array([os.getppid()] * b.num_rows), pa.array(["pandas" in sys.modules] * b.num_rows)],
            names=["id", "preloaded", "parent", "pandas"])


def test_python_workers_are_forked_from_a_daemon_that_imported_their_modules(spark):
    """The session's daemon module (streaming/spark/worker_daemon.py) imports the workers' modules
    before it forks them: a worker Spark starts later (after an idle one was ended) needs no
    imports of its own."""
    from streaming.spark.session import DAEMON_MODULE
    from streaming.spark.warm_workers import WORKER_MODULES
    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == DAEMON_MODULE
    rows = spark.range(0, 4, 1, 2).mapInArrow(_worker_view, "id long, preloaded long, parent long, "
                                                           "pandas boolean").collect()
    assert {r.preloaded for r in rows} == {len(WORKER_MODULES)}
    assert len({r.parent for r in rows}) == 1 and all(r.pandas for r in rows)


def test_python_workers_are_not_warmed_on_a_cluster():
    from streaming.spark.warm_workers import warm_python_workers

    class Context:
        master = "spark://10.0.0.1:7077"

    class Session:
        sparkContext = Context()

        def range(self, *args):
            raise AssertionError("no job on a cluster")
    assert warm_python_workers(Session(), 2) == []
