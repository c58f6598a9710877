"""`rebalance-monitor` command line: replay, parse-logs, decode-offsets, demo."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

from streaming.app.settings import ConfigError, LogInput, OffsetsInput, load_settings, make_inputs
from streaming.logs.envelope import ENVELOPES

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CAPTURES = REPO_ROOT / "tests" / "fixtures"
# The bundled real captures the demo replays: (cluster label, directory, log files).
DEMO_CAPTURES = (
    ("kafka-2.7", "kafka-2.7", ("broker1-server.log", "broker2-server.log")),
    ("kafka-4.0", "kafka-4.0", ("node1-server.log", "node2-server.log")),
)
DEMO_ROWS_PER_BATCH = 2000   # several micro-batches, so /metrics fills in while you watch


def _settings(args: argparse.Namespace, **extra):
    return load_settings(getattr(args, "config", None),
                         broker_timezone=getattr(args, "broker_timezone", None),
                         log_envelope=getattr(args, "log_envelope", None),
                         broker_id_field=getattr(args, "broker_id_field", None),
                         cluster=getattr(args, "cluster", None),
                         lateness_seconds=getattr(args, "lateness_seconds", None),
                         metrics_port=getattr(args, "port", None),
                         metrics_host=getattr(args, "host", None), **extra)


# ------------------------------------------------------------------------------ replay
def _broker_ids(ids: Optional[list[int]], paths: list[str]) -> list[Optional[int]]:
    """--broker-id: one id for every file, or one per file in --broker-log order."""
    if not ids:
        return [None] * len(paths)
    if len(ids) == 1:
        return ids * len(paths)
    if len(ids) != len(paths):
        raise ConfigError(f"--broker-id: give one id for all files or one per --broker-log file "
                          f"({len(ids)} ids for {len(paths)} files)")
    return list(ids)


def cmd_replay(args: argparse.Namespace) -> int:
    settings = _settings(args)
    logs = make_inputs(LogInput, [{"path": p, "cluster": settings.cluster,
                                   "broker_timezone": settings.broker_timezone,
                                   "broker_id": broker_id, "envelope": settings.log_envelope,
                                   "broker_id_field": settings.broker_id_field}
                                  for p, broker_id in zip(args.broker_log,
                                                          _broker_ids(args.broker_id, args.broker_log))],
                       "--broker-log")
    offsets = make_inputs(OffsetsInput, [{"path": p, "cluster": settings.cluster}
                                         for p in args.offsets], "--offsets")
    if not logs and not offsets:
        raise ConfigError("replay: give at least one --broker-log or --offsets file")
    from streaming.app.collector import replay
    from streaming.spark.session import get_spark
    spark = get_spark(settings.spark_master, settings.shuffle_partitions)
    started = time.monotonic()
    collector = replay(spark, settings, logs, offsets, out_dir=args.out,
                       max_rows_per_batch=args.max_rows_per_batch)
    print(f"replay: {len(collector.rebalances)} rebalances, {len(collector.removals)} member removals, "
          f"{len(collector.snapshots)} groups, {len(collector.quarantine)} quarantined inputs, "
          f"{len(collector.anomalies)} invalid transitions in {time.monotonic() - started:.1f} s "
          f"-> {args.out}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------------------ decode-offsets
def _decoded_doc(partition: int, offset: int, timestamp: int, key, value) -> tuple[dict, bool]:
    from streaming.offsets.decoder import DecodeError, decode_record
    doc = {"partition": partition, "offset": offset, "timestamp": timestamp}
    try:
        doc.update(decode_record(key, value))
        return doc, True
    except DecodeError as exc:
        doc["error"] = str(exc)
        return doc, False


def cmd_decode_offsets(args: argparse.Namespace) -> int:
    """One JSON object per record, the same for a JSONL dump and for segment files: a segment
    directory prints partition by partition in offset order (transactional records at their
    COMMIT marker); a dump prints in its own line order."""
    from streaming.offsets.decoder import iter_jsonl_dump
    from streaming.quarantine import Quarantined
    from streaming.offsets.segments import SegmentRecord, SegmentStats, is_segment_input, iter_offsets_dir
    decoded = failed = 0
    out = sys.stdout
    for path in args.path:
        if not os.path.exists(path):
            print(f"decode-offsets: no such file or directory: {path}", file=sys.stderr)
            return 2
        if is_segment_input(path):
            stats = SegmentStats()
            for item in iter_offsets_dir(path, stats):
                if isinstance(item, SegmentRecord):
                    doc, ok = _decoded_doc(item.partition, item.offset, item.timestamp, item.key, item.value)
                    decoded += ok
                    failed += not ok
                    out.write(json.dumps(doc, sort_keys=True, default=str) + "\n")
                else:
                    out.write(json.dumps({"file": path, "quarantined": item.to_dict()}) + "\n")
                    failed += 1
            print(f"decode-offsets: {path}: {stats.batches} batches, {stats.records} records, "
                  f"{stats.control_batches} control batches, {stats.aborted_records} aborted records, "
                  f"{stats.duplicate_replica_records} records already read from another replica, "
                  f"{stats.quarantined} quarantined", file=sys.stderr)
            continue
        for line_no, item in iter_jsonl_dump(path):
            if isinstance(item, Quarantined):
                out.write(json.dumps({"file": path, "line": line_no, "quarantined": item.to_dict()}) + "\n")
                failed += 1
                continue
            doc, ok = _decoded_doc(item["partition"], item["offset"], item["timestamp"], item["key"], item["value"])
            decoded += ok
            failed += not ok
            out.write(json.dumps(doc, sort_keys=True, default=str) + "\n")
    print(f"decode-offsets: {decoded} decoded, {failed} failed", file=sys.stderr)
    return 0


# ------------------------------------------------------------------------------ parse-logs
def cmd_parse_logs(args: argparse.Namespace) -> int:
    """One JSON object per coordinator event in broker logs; counts on stderr. No Spark."""
    from collections import Counter

    from streaming.logs.parser import (COORDINATOR_LOGGER_MARKERS, HEADER_RE, OUTCOME_EVENTS, OUTCOME_UNKNOWN,
                                      iter_log_file, parse_line_detailed)
    from streaming.logs.envelope import unwrap
    from streaming.logs.timeutil import zone
    settings = _settings(args)
    inputs = make_inputs(LogInput, [{"path": p, "broker_timezone": settings.broker_timezone,
                                     "broker_id": broker_id, "envelope": settings.log_envelope,
                                     "broker_id_field": settings.broker_id_field}
                                    for p, broker_id in zip(args.path, _broker_ids(args.broker_id, args.path))],
                         "PATH")
    outcomes: Counter = Counter()
    unknown_by_logger: Counter = Counter()
    lines = events = 0
    out = sys.stdout
    for spec in inputs:
        tz = zone(spec.broker_timezone)
        for seq, raw in iter_log_file(spec.path):
            lines += 1
            if not any(marker in raw for marker in COORDINATOR_LOGGER_MARKERS):
                continue
            u = unwrap(raw, spec.envelope, spec.broker_id_field)
            if u.line is None:
                outcomes["unreadable_envelope"] += 1
                continue
            broker = u.broker if u.broker is not None else spec.broker_id
            parsed = parse_line_detailed(u.line, source_id=spec.path, seq=seq, tz=tz, default_broker=broker)
            outcomes[parsed.outcome] += 1
            if parsed.outcome == OUTCOME_UNKNOWN:
                header = HEADER_RE.match(u.line)
                unknown_by_logger[header.group(4) if header else "?"] += 1
            if parsed.outcome != OUTCOME_EVENTS:
                continue
            for ev in parsed.result:
                events += 1
                out.write(json.dumps({
                    "ts_ms": ev.ts_ms, "broker": ev.broker, "kind": ev.kind, "group": ev.group,
                    "generation": ev.generation, "member_id": ev.member_id, "reason": ev.reason,
                    "trigger": ev.data.get("trigger"), "file": spec.path, "line": seq,
                    **({"host": u.host} if u.host else {})}) + "\n")
    coordinator = sum(v for k, v in outcomes.items() if k != "not_coordinator")
    print(f"parse-logs: {lines} lines, {coordinator} coordinator lines: {events} events from "
          f"{outcomes[OUTCOME_EVENTS]} lines, {outcomes['ignored']} recognised without a fact, "
          f"{outcomes['debug']} DEBUG/TRACE skipped, {outcomes['continuation']} continuation, "
          f"{outcomes['unparseable'] + outcomes['unreadable_envelope']} unparseable, "
          f"{sum(unknown_by_logger.values())} unrecognised", file=sys.stderr)
    for logger, count in sorted(unknown_by_logger.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"parse-logs: unrecognised {count} {logger}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------------------ demo
def _utc(ms: Optional[int]) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def _short(member: Optional[str], width: int = 30) -> str:
    if not member:
        return "-"
    return member if len(member) <= width else member[: width - 1] + "…"


def print_summary(collector, out=sys.stdout) -> None:
    rebalances = sorted(collector.rebalances + collector.in_progress_rebalances(),
                        key=lambda r: (r["cluster"], r["group"], r["started_at_ms"] or 0, r["generation"] or 0))
    header = f"{'cluster':<10} {'group':<34} {'proto':<8} {'gen':>7} {'start UTC':<12} " \
             f"{'join s':>7} {'sync s':>7} {'total s':>8} {'trigger':<17} {'outcome':<11} members"
    print(f"\nREBALANCES ({len(rebalances)})\n{header}\n{'-' * len(header)}", file=out)
    for r in rebalances:
        def sec(v):
            return "-" if v is None else f"{v:.3f}"
        gen = f"{r['previous_generation'] if r['previous_generation'] is not None else '?'}->{r['generation'] if r['generation'] is not None else '?'}"
        print(f"{r['cluster']:<10} {r['group'][:34]:<34} {r['protocol']:<8} {gen:>7} {_utc(r['started_at_ms']):<12} "
              f"{sec(r['join_seconds']):>7} {sec(r['sync_seconds']):>7} {sec(r['total_seconds']):>8} "
              f"{r['trigger']:<17} {r['outcome']:<11} {r['members'] if r['members'] is not None else '-'}", file=out)
    removals = sorted(collector.removals, key=lambda r: (r["cluster"], r["group"], r["removed_at_ms"]))
    header = f"{'cluster':<10} {'group':<34} {'member':<31} {'client':<22} {'removed UTC':<12} {'cause':<22} root_cause"
    print(f"\nMEMBER REMOVALS ({len(removals)})\n{header}\n{'-' * len(header)}", file=out)
    for r in removals:
        print(f"{r['cluster']:<10} {r['group'][:34]:<34} {_short(r['member_id']):<31} "
              f"{_short(r['client_id'], 22):<22} {_utc(r['removed_at_ms']):<12} {r['cause']:<22} {r['root_cause']}",
              file=out)
    print_diagnosis(collector, out)
    print(f"\n{len(collector.snapshots)} groups, {len(collector.quarantine)} quarantined inputs, "
          f"{len(collector.anomalies)} invalid transitions", file=out)


def print_diagnosis(collector, out=sys.stdout) -> None:
    """Removals by root cause with their evidence, and the rebalances that hit their timeout."""
    removals = sorted(collector.removals, key=lambda r: (r["cluster"], r["removed_at_ms"], r["group"]))
    by_root: dict[str, list[dict]] = {}
    for r in removals:
        by_root.setdefault(r["root_cause"], []).append(r)
    print(f"\nDIAGNOSIS ({len(removals)} removals)", file=out)
    order = ("process_crash", "process_pause", "slow_processing", "host_wide", "coordinator_wide",
             "graceful_shutdown", "unknown")
    for root in sorted(by_root, key=lambda k: order.index(k) if k in order else len(order)):
        rows = by_root[root]
        print(f"  {root} ({len(rows)})", file=out)
        shown = rows if root != "graceful_shutdown" else rows[:3]
        for r in shown:
            print(f"    {r['cluster']} {_utc(r['removed_at_ms'])} {r['group'][:34]} {r['cause']}: {r['evidence']}",
                  file=out)
        if len(shown) < len(rows):
            print(f"    ... {len(rows) - len(shown)} more", file=out)
    slow = [r for r in collector.rebalances if r.get("hit_rebalance_timeout")]
    if slow:
        print(f"  rebalances that ran into their rebalance timeout ({len(slow)})", file=out)
        for r in slow:
            print(f"    {r['cluster']} {r['group'][:34]} {r['previous_generation']}->{r['generation']}: JOIN "
                  f"{r['join_seconds']} s of {(r['rebalance_timeout_ms'] or 0) / 1000:.1f} s, waited for "
                  f"{_short(r['waited_for_member']) if r['waited_for_member'] else '?'}", file=out)


def demo_inputs(captures_dir: Path) -> tuple[list[LogInput], list[OffsetsInput]]:
    logs, offsets = [], []
    for cluster, folder, log_files in DEMO_CAPTURES:
        base = captures_dir / folder
        logs += [LogInput(path=str(base / name), cluster=cluster) for name in log_files]
        offsets.append(OffsetsInput(path=str(base / "offsets-topic.jsonl"), cluster=cluster))
    return logs, offsets


def cmd_demo(args: argparse.Namespace) -> int:
    settings = _settings(args)
    try:
        logs, offsets = demo_inputs(Path(args.captures))
    except Exception as exc:
        raise ConfigError(f"--captures: {exc}") from None
    from sinks.exposition import serve
    from sinks.metrics import MetricsSink
    from streaming.app.collector import RunCollector, replay
    from streaming.spark.session import get_spark
    metrics = MetricsSink(settings.duration_buckets)
    server, _ = serve(metrics.registry, settings.metrics_host, settings.metrics_port)
    port = server.server_port
    print(f"demo: serving http://{settings.metrics_host}:{port}/metrics while replaying the bundled "
          f"real captures (Kafka 2.7 and 4.0) through the streaming query", file=sys.stderr)
    spark = get_spark(settings.spark_master, settings.shuffle_partitions)
    collector = RunCollector(metrics)
    collector.on_batch = lambda c, batch_id: print(
        f"demo: batch {batch_id}: {len(c.rebalances)} rebalances, {len(c.removals)} removals so far",
        file=sys.stderr)
    replay(spark, settings, logs, offsets, out_dir=args.out,
           max_rows_per_batch=args.max_rows_per_batch or DEMO_ROWS_PER_BATCH, collector=collector)
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


# ------------------------------------------------------------------------------ run
def run_settings(args: argparse.Namespace):
    """Settings of `run`: only the kafka.* keys given as flags override the file's [kafka] table."""
    kafka = {key: value for key, value in (("bootstrap_servers", args.bootstrap_servers),
                                           ("log_topics", args.log_topic),
                                           ("offsets_topic", args.offsets_topic),
                                           ("source", args.kafka_source)) if value}
    return _settings(args, checkpoint_location=args.checkpoint, events_dir=args.events_dir,
                     trigger_interval_seconds=args.trigger_interval_seconds,
                     **({"kafka": kafka} if kafka else {}))


def cmd_run(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = run_settings(args)
    from streaming.app.live import run
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return run(settings, stop)


# ------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rebalance-monitor",
                                     description="Kafka consumer-group rebalance monitor")
    sub = parser.add_subparsers(dest="command", required=True)

    replay = sub.add_parser("replay", help="batch run over broker logs and __consumer_offsets dumps")
    replay.add_argument("--broker-log", nargs="+", action="extend", default=[], metavar="PATH",
                        help="broker server.log file(s)")
    replay.add_argument("--offsets", nargs="+", action="extend", default=[], metavar="PATH",
                        help="__consumer_offsets input(s): a JSONL dump (partition, offset, timestamp, "
                             "key_b64, value_b64|null), a copy of a broker's __consumer_offsets-N "
                             "directory, a parent of such directories (replicas are merged), or a .log segment")
    replay.add_argument("--out", required=True, metavar="DIR", help="output directory")
    replay.add_argument("--broker-timezone", metavar="TZ", help="zone of the log timestamps (default UTC)")
    replay.add_argument("--broker-id", type=int, nargs="+", metavar="N",
                        help="broker id when neither the line nor its envelope names it: one for all "
                             "files, or one per --broker-log file")
    replay.add_argument("--log-envelope", choices=ENVELOPES,
                        help="plain log4j lines, JSON documents of a log shipper (Filebeat, Fluent Bit, "
                             "Vector), or auto: JSON when a line starts with '{' (default auto)")
    replay.add_argument("--broker-id-field", metavar="PATH",
                        help="JSON envelope field with the broker id, e.g. fields.broker_id or "
                             "kubernetes.pod_name (trailing digits are used)")
    replay.add_argument("--cluster", help="cluster label for metrics and records (default: default)")
    replay.add_argument("--config", metavar="FILE", help="TOML settings file")
    replay.add_argument("--lateness-seconds", type=float, help="watermark delay per source")
    replay.add_argument("--max-rows-per-batch", type=int, help="rows per micro-batch per source")
    replay.set_defaults(func=cmd_replay)

    parse_logs = sub.add_parser("parse-logs", help="print the coordinator events of broker logs as JSON lines "
                                "(no Spark); unrecognised coordinator lines are counted by logger on stderr")
    parse_logs.add_argument("path", nargs="+", metavar="PATH", help="server.log file(s), plain or JSON envelopes")
    parse_logs.add_argument("--broker-timezone", metavar="TZ", help="zone of the log timestamps (default UTC)")
    parse_logs.add_argument("--log-envelope", choices=ENVELOPES, help="auto (default), plain or json")
    parse_logs.add_argument("--broker-id", type=int, nargs="+", metavar="N",
                            help="broker id when neither line nor envelope names it: one, or one per PATH")
    parse_logs.add_argument("--broker-id-field", metavar="PATH", help="JSON envelope field with the broker id")
    parse_logs.add_argument("--config", metavar="FILE", help="TOML settings file")
    parse_logs.set_defaults(func=cmd_parse_logs)

    decode = sub.add_parser("decode-offsets", help="decode __consumer_offsets records (JSONL dump or "
                                                   "segment directory), one JSON object per record")
    decode.add_argument("path", nargs="+", help="JSONL dump, __consumer_offsets-N dir, parent dir or .log file")
    decode.set_defaults(func=cmd_decode_offsets)

    demo = sub.add_parser("demo", help="replay the bundled real captures, serve /metrics, print a summary")
    demo.add_argument("--port", type=int, help="metrics port (default 9108; 0 picks a free one)")
    demo.add_argument("--host", help="metrics bind address (default 127.0.0.1)")
    demo.add_argument("--once", action="store_true", help="exit when the input is consumed")
    demo.add_argument("--out", metavar="DIR", help="also write the replay outputs here")
    demo.add_argument("--captures", default=str(DEFAULT_CAPTURES), metavar="DIR",
                      help="directory holding kafka-2.7/ and kafka-4.0/ captures")
    demo.add_argument("--config", metavar="FILE", help="TOML settings file")
    demo.add_argument("--max-rows-per-batch", type=int, help=f"rows per micro-batch (default {DEMO_ROWS_PER_BATCH})")
    demo.set_defaults(func=cmd_demo)
    run = sub.add_parser("run", help="the live service: read Kafka topics, serve /metrics")
    run.add_argument("--config", metavar="FILE", help="TOML settings file (kafka.*, checkpoint_location, ...)")
    run.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="kafka.bootstrap_servers")
    run.add_argument("--log-topic", action="append", metavar="TOPIC", help="kafka.log_topics (repeatable)")
    run.add_argument("--offsets-topic", metavar="TOPIC", help="kafka.offsets_topic (default __consumer_offsets)")
    run.add_argument("--kafka-source", choices=["auto", "python", "spark"], help="kafka.source")
    run.add_argument("--checkpoint", metavar="DIR", help="checkpoint_location")
    run.add_argument("--events-dir", metavar="DIR", help="durable event sink directory")
    run.add_argument("--trigger-interval-seconds", type=float)
    run.add_argument("--broker-timezone", metavar="TZ")
    run.add_argument("--cluster")
    run.add_argument("--lateness-seconds", type=float)
    run.add_argument("--port", type=int, help="metrics port")
    run.add_argument("--host", help="metrics bind address")
    run.set_defaults(func=cmd_run)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"rebalance-monitor: configuration error:\n{exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:          # `... | head`: the reader is gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
