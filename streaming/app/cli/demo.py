"""`rebalance-monitor demo`: replay the bundled real captures, serve /metrics, print a summary."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from streaming.app.cli.options import CONFIG, ROWS_PER_BATCH, SERVING, flags_of
from streaming.app.settings import ConfigError, DemoSettings, LogInput, OffsetsInput, load

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_CAPTURES = REPO_ROOT / "tests" / "fixtures"
# The bundled real captures the demo replays: (cluster label, directory, log files).
DEMO_CAPTURES = (
    ("kafka-2.7", "kafka-2.7", ("broker1-server.log", "broker2-server.log")),
    ("kafka-4.0", "kafka-4.0", ("node1-server.log", "node2-server.log")),
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", parents=[CONFIG, SERVING, ROWS_PER_BATCH],
                       help="replay the bundled real captures, serve /metrics, print a summary")
    p.add_argument("--once", action="store_true", help="exit when the input is consumed")
    p.add_argument("--out", metavar="DIR", help="also write the replay outputs here")
    p.add_argument("--captures", default=str(DEFAULT_CAPTURES), metavar="DIR",
                   help="directory holding kafka-2.7/ and kafka-4.0/ captures")
    p.set_defaults(func=run)


def demo_inputs(captures_dir: Path) -> tuple[list[LogInput], list[OffsetsInput]]:
    logs, offsets = [], []
    for cluster, folder, log_files in DEMO_CAPTURES:
        base = captures_dir / folder
        logs += [LogInput(path=str(base / name), cluster=cluster) for name in log_files]
        offsets.append(OffsetsInput(path=str(base / "offsets-topic.jsonl"), cluster=cluster))
    return logs, offsets


def run(args: argparse.Namespace) -> int:
    settings = load(DemoSettings, args.config, **flags_of(args))
    try:
        logs, offsets = demo_inputs(Path(args.captures))
    except Exception as exc:
        raise ConfigError(f"--captures: {exc}") from None
    from sinks.exposition import serve
    from sinks.metrics import MetricsSink
    from streaming.app.collector import RunCollector
    from streaming.app.replay import replay
    from streaming.app.summary import print_summary
    from streaming.spark.session import get_spark
    metrics = MetricsSink(settings.duration_buckets, **settings.metrics_sink_options())
    server, _ = serve(metrics.registry, settings.metrics_host, settings.metrics_port)
    port = server.server_port
    print(f"demo: serving http://{settings.metrics_host}:{port}/metrics while replaying the bundled "
          f"real captures (Kafka 2.7 and 4.0) through the streaming query", file=sys.stderr)
    spark = get_spark(settings.spark_master, settings.shuffle_partitions, driver_memory=settings.driver_memory)
    collector = RunCollector(metrics)
    collector.on_batch = lambda c, batch_id: print(
        f"demo: batch {batch_id}: {len(c.rebalances)} rebalances, {len(c.removals)} removals so far",
        file=sys.stderr)
    replay(spark, settings, logs, offsets, out_dir=args.out, collector=collector)
    print_summary(collector)
    if args.once:
        server.shutdown()
        return 0
    print(f"demo: input consumed; still serving http://{settings.metrics_host}:{port}/metrics "
          f"(Ctrl-C to stop)", file=sys.stderr)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()
    return 0
