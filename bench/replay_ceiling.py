"""bench/scale's and bench/cost's read-only ceiling: `python -m bench.replay_ceiling LOG OFFSETS`.

The replay's session and both stages up to the stateful step (streaming/spark/query.py
stage_replay and staged_events: files read, parsed and decoded in Spark's tasks, staged in time
slices, the slices streamed with their watermarks), written to Spark's noop sink with the replay's
trigger. No state machine, no driver-side outputs: what a replay end to end could at best reach
on this machine with Spark and this read path. Prints the input rows (lines and records) it read
and the event rows it produced.
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile


def _lines(offset) -> int:
    """The input lines or records a staged source's offset has counted (sources/staged.py)."""
    parsed = json.loads(offset) if isinstance(offset, str) else offset
    return int((parsed or {}).get("lines") or 0)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m bench.replay_ceiling BROKER_LOG OFFSETS_FILE", file=sys.stderr)
        return 2
    from streaming.app.settings import LogInput, OffsetsInput, ReplaySettings, load
    from streaming.app.settings.wiring import log_file, offsets_file, query_options
    from streaming.spark.query import stage_replay, staged_events
    from streaming.spark.session import get_spark
    settings = load(ReplaySettings, cluster="bench")
    spark = get_spark(settings.spark_master, settings.shuffle_partitions, conf=settings.spark_conf,
                      driver_memory=settings.driver_memory)
    options = query_options(settings)
    staging = tempfile.mkdtemp(prefix="replay-ceiling-stage-")
    checkpoint = tempfile.mkdtemp(prefix="replay-ceiling-")
    try:
        staged = stage_replay(spark, options, [log_file(LogInput(path=argv[0], cluster="bench"))],
                              [offsets_file(OffsetsInput(path=argv[1], cluster="bench"))], staging)
        query = (staged_events(spark, options, staged).writeStream.format("noop")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        if query.exception() is not None:
            print(f"bench/replay_ceiling: query failed: {query.exception()}", file=sys.stderr)
            return 1
        progress = query.recentProgress
        events = sum(p["numInputRows"] for p in progress)
        inputs = sum(_lines(s["endOffset"]) - _lines(s["startOffset"]) for p in progress for s in p["sources"])
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(checkpoint, ignore_errors=True)
    print(f"read-only ceiling: {inputs} input rows, {events} event rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
