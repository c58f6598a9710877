"""`rebalance-monitor parse-logs`: the coordinator events of broker logs as JSON lines (no Spark);
counts on stderr, unrecognised coordinator lines by logger."""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from streaming.app.cli.options import BROKER_ID, CONFIG, LOG_READING, broker_ids, flags_of
from streaming.app.probe import check_inputs
from streaming.app.settings import LogInput, ParseLogsSettings, load, make_inputs
from streaming.logs.envelope import unwrap
from streaming.logs.files import iter_log_file
from streaming.logs.layout import COORDINATOR_LOGGER_MARKERS, HEADER_RE
from streaming.logs.parser import OUTCOME_EVENTS, OUTCOME_UNKNOWN, parse_line_detailed
from streaming.logs.timeutil import zone


def add_parser(sub: Any) -> None:
    p = sub.add_parser("parse-logs", parents=[CONFIG, LOG_READING, BROKER_ID],
                       help="print the coordinator events of broker logs as JSON lines (no Spark); "
                            "unrecognised coordinator lines are counted by logger on stderr")
    p.add_argument("path", nargs="+", metavar="PATH", help="server.log file(s), plain or JSON envelopes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """One JSON object per coordinator event in broker logs; counts on stderr. No Spark."""
    settings = load(ParseLogsSettings, args.config, **flags_of(args))
    inputs = make_inputs(LogInput, [{"path": p, "broker_timezone": settings.broker_timezone,
                                     "broker_id": broker_id, "envelope": settings.log_envelope,
                                     "broker_id_field": settings.broker_id_field}
                                    for p, broker_id in zip(args.path, broker_ids(args.broker_id, args.path))],
                         "PATH")
    keep, _ = check_inputs("parse-logs", [i.path for i in inputs])
    inputs = [i for i in inputs if i.path in keep]
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
            if parsed.outcome != OUTCOME_EVENTS or not isinstance(parsed.result, list):
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
          f"{outcomes[OUTCOME_EVENTS]} lines, {outcomes['ignored']} known lines not needed "
          f"(loads, elections, offset cleanups), "
          f"{outcomes['debug']} DEBUG/TRACE skipped, {outcomes['continuation']} continuation, "
          f"{outcomes['unparseable'] + outcomes['unreadable_envelope']} unparseable, "
          f"{sum(unknown_by_logger.values())} unrecognised", file=sys.stderr)
    for logger, count in sorted(unknown_by_logger.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"parse-logs: unrecognised {count} {logger}", file=sys.stderr)
    return 0
