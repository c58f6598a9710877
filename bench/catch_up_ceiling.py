"""bench/cost's catch-up read ceiling: `python -m bench.catch_up_ceiling BOOTSTRAP TOPIC JARS`.

Spark's kafka connector reading a topic from its start to its end and counting the records, with
no decode and no state: a batch read (`spark.read`) with the options the monitor's connector path
uses (streaming/spark/query.py `_spark_kafka_raw`: the consumer-based offset fetching, `assign`
with the partitions the connector's own admin client lists, read_committed, coalesced to one task
per core), in a session made as the monitor makes its own (get_spark's defaults: local[2], 2 GB of
driver heap) with the connector's jars (`spark.jars`). The bench times the process from its start
to its exit, JVM start included, as it times the monitor. Prints the records it counted.
"""
from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m bench.catch_up_ceiling BOOTSTRAP TOPIC JARS", file=sys.stderr)
        return 2
    bootstrap, topic, jars = argv
    from streaming.spark.connector import topic_partitions
    from streaming.spark.query import DEPRECATED_OFFSET_FETCHING
    from streaming.spark.session import get_spark
    spark = get_spark(conf={"spark.jars": jars})
    spark.conf.set(DEPRECATED_OFFSET_FETCHING, "true")
    partitions = topic_partitions(spark, bootstrap, {}, [topic])
    rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("assign", json.dumps(partitions)).option("startingOffsets", "earliest")
            .option("endingOffsets", "latest").option("failOnDataLoss", "false")
            .option("kafka.isolation.level", "read_committed").load()
            .coalesce(spark.sparkContext.defaultParallelism).count())
    spark.stop()
    print(f"catch-up ceiling: {rows} records counted")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
