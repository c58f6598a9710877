"""bench/scale's read-only ceiling: `python -m bench.replay_ceiling LOG OFFSETS`.

The replay's session and query up to the stateful step (streaming/spark/query.py replay_events:
sources, JVM filter, parse, decode, watermarks), written to Spark's noop sink with the replay's
trigger. No state machine, no driver-side outputs: what a replay end to end could at best reach
on this machine with Spark and these sources. Prints the number of event rows it produced.
"""
from __future__ import annotations

import sys
import tempfile


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m bench.replay_ceiling BROKER_LOG OFFSETS_FILE", file=sys.stderr)
        return 2
    from streaming.app.settings import LogInput, OffsetsInput, ReplaySettings, load
    from streaming.spark.query import replay_events
    from streaming.spark.session import get_spark
    settings = load(ReplaySettings, cluster="bench")
    spark = get_spark(settings.spark_master, settings.shuffle_partitions, conf=settings.spark_conf,
                      driver_memory=settings.driver_memory)
    events = replay_events(spark, settings.query_options(), [LogInput(path=argv[0], cluster="bench").file()],
                           [OffsetsInput(path=argv[1], cluster="bench").file()])
    with tempfile.TemporaryDirectory(prefix="replay-ceiling-") as checkpoint:
        query = (events.writeStream.format("noop").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        if query.exception() is not None:
            print(f"bench/replay_ceiling: query failed: {query.exception()}", file=sys.stderr)
            return 1
        rows = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"read-only ceiling: {rows} source rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
