"""`rebalance-monitor replay`: the streaming query over broker log files and offsets inputs."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streaming.app.cli.options import (
    BROKER_ID, CONFIG, END_OFFSETS, LOG_READING, QUERY, ROWS_PER_BATCH, broker_ids, flags_of
)
from streaming.app.probe import check_inputs
from streaming.app.settings import ConfigError, LogInput, OffsetsInput, ReplaySettings, load, make_inputs


def add_parser(sub: Any) -> None:
    p = sub.add_parser("replay", parents=[CONFIG, LOG_READING, BROKER_ID, QUERY, ROWS_PER_BATCH, END_OFFSETS],
                       help="batch run over broker logs and __consumer_offsets dumps or segments",
                       description="Replays broker server.log files and __consumer_offsets inputs through the "
                                   "streaming query, writes its outputs (docs/output.md) and report.html "
                                   "(rebalance-monitor report) into --out, and prints a summary.")
    p.add_argument("--broker-log", nargs="+", action="extend", default=[], metavar="PATH",
                   help="broker server.log file(s)")
    p.add_argument("--offsets", nargs="+", action="extend", default=[], metavar="PATH",
                   help="__consumer_offsets input(s): a JSONL dump (partition, offset, timestamp, key_b64, "
                        "value_b64|null), a copy of a broker's __consumer_offsets-N directory, a parent of such "
                        "directories (replicas are merged), or a .log segment")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.set_defaults(func=run)


def inputs(settings: ReplaySettings, args: argparse.Namespace) -> tuple[list[LogInput], list[OffsetsInput]]:
    """The replay's inputs, checked before Spark starts: each exists, holds the kind of data its
    flag says (streaming/app/probe.py) and is not empty (an empty one is skipped with a note)."""
    if not args.broker_log and not args.offsets:
        raise ConfigError("replay: give at least one --broker-log or --offsets file")
    logs = make_inputs(LogInput, [{"path": p, "cluster": settings.cluster, "broker_timezone": settings.broker_timezone,
                                   "broker_id": broker_id, "envelope": settings.log_envelope,
                                   "broker_id_field": settings.broker_id_field}
                                  for p, broker_id in zip(args.broker_log,
                                                          broker_ids(args.broker_id, args.broker_log))],
                       "--broker-log")
    offsets = make_inputs(OffsetsInput, [{"path": p, "cluster": settings.cluster} for p in args.offsets], "--offsets")
    keep_logs, keep_offsets = check_inputs("replay", [i.path for i in logs], [i.path for i in offsets])
    return [i for i in logs if i.path in keep_logs], [i for i in offsets if i.path in keep_offsets]


class OutputsNotWritten(RuntimeError):
    """A replay's output files could not be written (after the run: disk full, the directory gone)."""


def check_out_dir(out_dir: str, flag: str = "--out") -> None:
    """The output directory exists or can be made and takes a file: checked before Spark starts, so
    that a replay does not run to its end to fail at its outputs."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConfigError(f"{flag}: {out_dir} is a file, not a directory")
    try:
        os.makedirs(out_dir, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out_dir, prefix=".rebalance-monitor-check-"):
            pass
    except OSError as exc:
        raise ConfigError(f"{flag}: cannot write to {out_dir}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    settings = load(ReplaySettings, args.config, **flags_of(args))
    logs, offsets = inputs(settings, args)
    check_out_dir(args.out)
    from streaming.app.replay import load_end_offsets, progress_line, replay
    end_offsets = load_end_offsets(settings) if settings.end_offsets is not None else None
    from streaming.app.summary import summary_text
    from streaming.offsets.reader import offsets_input_kind
    from streaming.spark.session import get_spark, state_store_conf
    from streaming.spark.sources.replay_files import plan_ahead
    # The input files are cut into read slices while the JVM starts (replay_files.plan_ahead).
    plan_ahead([i.path for i in logs] + [i.path for i in offsets if offsets_input_kind(i.path) == "jsonl"])
    spark = get_spark(settings.spark_master, settings.shuffle_partitions,
                      conf={**state_store_conf(settings.state_store), **settings.spark_conf},
                      driver_memory=settings.driver_memory)
    started = time.monotonic()
    collector = replay(spark, settings, logs, offsets, progress=progress_line("replay"), end_offsets=end_offsets)
    summary: list[str] = []
    write_outputs_and_report(args.out, collector, meanwhile=lambda: summary.append(summary_text(
        collector, outputs=where(args.out, str(report_path(args.out))), max_groups=50, max_events=40)))
    print(summary[0])
    print(f"replay: {len(collector.rebalances)} rebalances, {len(collector.removals)} member removals, "
          f"{len(collector.snapshots)} groups, {len(collector.quarantine)} quarantined inputs, "
          f"{len(collector.anomalies)} anomalies in {time.monotonic() - started:.1f} s "
          f"-> {args.out}", file=sys.stderr)
    return 0


def write_outputs_and_report(out_dir: str, collector: Any, meanwhile: Callable[[], object] | None = None) -> str:
    """A replay's files and its report.html, from the records it holds (reading the files back took
    a 10,000-group day's replay 3 s), sorted once for both; returns the report's path. The same
    page `rebalance-monitor report <out_dir>` makes. The record files and the report are written by
    a forked child while this process writes metrics.prom and runs `meanwhile` (the summary): the
    driver is alone at this point, with a core idle (streaming/app/beside.py; docs/benchmarks.md)."""
    from sinks.report import DEFAULT_MAX_GROUPS, write_report
    from streaming.app.beside import BesideError, run_beside
    from streaming.app.replay import replay_records, write_metrics_file, write_record_files
    records = replay_records(collector)
    path = report_path(out_dir)

    def files_and_report() -> None:
        write_record_files(out_dir, records)
        write_report([Path(out_dir)], path, max_groups=DEFAULT_MAX_GROUPS, records=[records])

    def metrics_and_meanwhile() -> None:
        write_metrics_file(collector, out_dir)
        if meanwhile is not None:
            meanwhile()
    try:
        run_beside(files_and_report, metrics_and_meanwhile)
    except BesideError as exc:
        raise OutputsNotWritten(str(exc)) from None
    except OSError as exc:
        raise OutputsNotWritten(f"{type(exc).__name__}: {exc}") from None
    return str(path)


def report_path(out_dir: str) -> Path:
    return Path(out_dir) / "report.html"


def where(out_dir: str, report: str) -> list[str]:
    """The summary's last lines: where the full records and the report are."""
    return [f"full records: {os.path.join(os.path.abspath(out_dir), '*.jsonl')} (docs/output.md)",
            f"timeline report: {os.path.abspath(report)} (open it in a browser)"]
