"""`rebalance-monitor demo`: replay the bundled real captures, serve /metrics, print a summary."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from streaming.app.cli.options import CONFIG, ROWS_PER_BATCH, SERVING, flags_of
from streaming.app.settings import ConfigError, DemoSettings, LogInput, OffsetsInput, load

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_OUT = Path(tempfile.gettempdir()) / "rebalance-monitor-demo"
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
    p.add_argument("--out", metavar="DIR", help="where to write the replay outputs and report.html "
                                               f"(default {DEFAULT_OUT})")
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
    from sinks.metrics import MetricsSink
    from streaming.app.collector import RunCollector
    from streaming.app.cli.replay import check_out_dir, where, write_outputs_and_report
    from streaming.app.replay import progress_line, replay
    from streaming.app.serving import serve_metrics
    from streaming.app.settings.wiring import metrics_sink_options
    from streaming.app.summary import print_summary
    from streaming.spark.session import get_spark, state_store_conf
    out_dir = args.out or str(DEFAULT_OUT)
    check_out_dir(out_dir)
    metrics = MetricsSink(settings.duration_buckets, **metrics_sink_options(settings))
    server = serve_metrics(settings, metrics.registry)
    port = server.server_port
    print(f"demo: serving http://{settings.metrics_host}:{port}/metrics while replaying the bundled "
          f"real captures (Kafka 2.7 and 4.0) through the streaming query", file=sys.stderr)
    spark = get_spark(settings.spark_master, settings.shuffle_partitions,
                      conf={**state_store_conf(settings.state_store), **settings.spark_conf},
                      driver_memory=settings.driver_memory)
    collector = RunCollector(metrics)
    replay(spark, settings, logs, offsets, collector=collector, progress=progress_line("demo"))
    print_summary(collector, outputs=where(out_dir, write_outputs_and_report(out_dir, collector)))
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
