"""`rebalance-monitor replay`: the streaming query over broker log files and offsets inputs."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from streaming.app.cli.options import BROKER_ID, CONFIG, LOG_READING, QUERY, ROWS_PER_BATCH, broker_ids, flags_of
from streaming.app.settings import ConfigError, LogInput, OffsetsInput, ReplaySettings, load, make_inputs


def add_parser(sub: Any) -> None:
    p = sub.add_parser("replay", parents=[CONFIG, LOG_READING, BROKER_ID, QUERY, ROWS_PER_BATCH],
                       help="batch run over broker logs and __consumer_offsets dumps or segments",
                       description="Replays broker server.log files and __consumer_offsets inputs through the "
                                   "streaming query and writes its outputs (docs/output.md).")
    p.add_argument("--broker-log", nargs="+", action="extend", default=[], metavar="PATH",
                   help="broker server.log file(s)")
    p.add_argument("--offsets", nargs="+", action="extend", default=[], metavar="PATH",
                   help="__consumer_offsets input(s): a JSONL dump (partition, offset, timestamp, key_b64, "
                        "value_b64|null), a copy of a broker's __consumer_offsets-N directory, a parent of such "
                        "directories (replicas are merged), or a .log segment")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.set_defaults(func=run)


def inputs(settings: ReplaySettings, args: argparse.Namespace) -> tuple[list[LogInput], list[OffsetsInput]]:
    logs = make_inputs(LogInput, [{"path": p, "cluster": settings.cluster, "broker_timezone": settings.broker_timezone,
                                   "broker_id": broker_id, "envelope": settings.log_envelope,
                                   "broker_id_field": settings.broker_id_field}
                                  for p, broker_id in zip(args.broker_log,
                                                          broker_ids(args.broker_id, args.broker_log))],
                       "--broker-log")
    offsets = make_inputs(OffsetsInput, [{"path": p, "cluster": settings.cluster} for p in args.offsets], "--offsets")
    if not logs and not offsets:
        raise ConfigError("replay: give at least one --broker-log or --offsets file")
    return logs, offsets


def run(args: argparse.Namespace) -> int:
    settings = load(ReplaySettings, args.config, **flags_of(args))
    logs, offsets = inputs(settings, args)
    from streaming.app.replay import replay
    from streaming.spark.session import get_spark
    spark = get_spark(settings.spark_master, settings.shuffle_partitions, driver_memory=settings.driver_memory)
    started = time.monotonic()
    collector = replay(spark, settings, logs, offsets, out_dir=args.out)
    print(f"replay: {len(collector.rebalances)} rebalances, {len(collector.removals)} member removals, "
          f"{len(collector.snapshots)} groups, {len(collector.quarantine)} quarantined inputs, "
          f"{len(collector.anomalies)} invalid transitions in {time.monotonic() - started:.1f} s "
          f"-> {args.out}", file=sys.stderr)
    return 0
