"""`rebalance-monitor parse-logs`: the coordinator events of broker logs as JSON lines (no Spark);
on stderr the layout found in each file, counts, and unrecognised coordinator lines by logger."""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, deque
from functools import partial
from typing import Any, NamedTuple

from streaming.app.cli.options import BROKER_ID, CONFIG, LOG_READING, broker_ids, flags_of
from streaming.app.probe import check_inputs
from streaming.app.settings import LogInput, ParseLogsSettings, load, make_inputs
from streaming.logs.envelope import unwrap
from streaming.logs.files import iter_log_file
from state.events import BROKER_EVENTS_GROUP
from streaming.logs.layout import has_kept_marker
from streaming.logs.merge import SAMPLE_LINES
from streaming.logs.parser import (
    OUTCOME_BROKER, OUTCOME_CONTINUATION, OUTCOME_EVENTS, OUTCOME_UNKNOWN, OUTCOME_UNKNOWN_LAYOUT, LineParse,
    parse_line_detailed
)
from state.vocabulary import UNKNOWN_LAYOUT
from streaming.logs.step import CLASS_OF_OUTCOME
from streaming.logs.timeutil import zone
from streaming.logs.layout import MAX_WRAPPED_LINES
from streaming.logs.wrapped import WrappedEntries, leading_lines


def add_parser(sub: Any) -> None:
    p = sub.add_parser("parse-logs", parents=[CONFIG, LOG_READING, BROKER_ID],
                       help="print the coordinator events of broker logs as JSON lines (no Spark); "
                            "the layout found per file and unrecognised coordinator lines by logger on stderr")
    p.add_argument("path", nargs="+", metavar="PATH", help="server.log file(s), plain or JSON envelopes")
    p.set_defaults(func=run)


class _Counts:
    def __init__(self) -> None:
        self.outcomes: Counter = Counter()
        self.unknown_by_logger: Counter = Counter()
        self.lines = self.events = 0


def _layout_report(path: str, layouts: Counter, classes: Counter) -> list[str]:
    """stderr lines about one file: its layout, and a warning when it has no coordinator line."""
    known = {k: v for k, v in layouts.items() if k != UNKNOWN_LAYOUT}
    read = sum(layouts.values())
    if known:
        ranked = sorted(known.items(), key=lambda kv: (-kv[1], kv[0]))
        text = ", ".join(f"{name} ({n} of {read} lines read)" for name, n in ranked[:3])
        out = [f"parse-logs: {path}: layout {text}"]
    else:
        out = [f"parse-logs: {path}: layout not understood ({read} lines read; docs/broker-logs.md, \"Layouts\")"]
    if read and not classes["coordinator"]:
        cause = ("their layout is not understood" if not known or classes["unknown_layout"]
                 else "the coordinator loggers are below INFO or filtered out (log4j or shipper), or the "
                      "broker coordinated no group")
        out.append(f"parse-logs: warning: {path}: no group-coordinator line; likely cause: {cause}")
    return out


def _parse_file(spec: LogInput, counts: _Counts, out: Any) -> list[str]:
    tz = zone(spec.broker_timezone)
    layouts: Counter = Counter()
    classes: Counter = Counter()
    wrapped = WrappedEntries()   # a message that continues over lines (streaming/logs/wrapped.py)

    def count(line: _Line, parsed: LineParse) -> None:
        if parsed.outcome != OUTCOME_CONTINUATION:
            layouts[parsed.layout or UNKNOWN_LAYOUT] += 1
        classes[CLASS_OF_OUTCOME[parsed.outcome]] += 1
        if not line.coordinator:
            return     # read for the layout only (the first lines), or a continuation
        counts.outcomes[parsed.outcome] += 1
        if parsed.outcome == OUTCOME_UNKNOWN:
            counts.unknown_by_logger[parsed.logger or "?"] += 1
        if parsed.outcome not in (OUTCOME_EVENTS, OUTCOME_BROKER) or not isinstance(parsed.result, list):
            return
        for ev in parsed.result:
            counts.events += 1
            out.write(json.dumps({
                "ts_ms": ev.ts_ms, "broker": ev.broker, "kind": ev.kind,
                "group": None if ev.group == BROKER_EVENTS_GROUP else ev.group,
                "generation": ev.generation, "member_id": ev.member_id, "reason": ev.reason,
                "trigger": ev.data.get("trigger"), "file": spec.path, "line": line.seq,
                **({"subject": ev.data["subject"]} if "subject" in ev.data else {}),
                **({"host": line.host} if line.host else {})}) + "\n")

    def feed(seq: int, raw: str, coordinator: bool) -> None:
        u = unwrap(raw, spec.envelope, spec.broker_id_field)
        if u.line is None:
            counts.outcomes["unreadable_envelope"] += 1
            return
        broker = u.broker if u.broker is not None else spec.broker_id
        read = partial(parse_line_detailed, source_id=spec.path, seq=seq, tz=tz, default_broker=broker,
                       fields=u.fields)
        for line, parsed in wrapped.feed(spec.path, seq, u.line, read, _Line(seq, u.host, coordinator)):
            count(line, parsed)

    skipped: deque[tuple[int, str]] = deque(maxlen=MAX_WRAPPED_LINES - 1)   # the entry a later line may continue
    for seq, raw in iter_log_file(spec.path):
        counts.lines += 1
        coordinator = has_kept_marker(raw)
        if seq > SAMPLE_LINES and not coordinator and not wrapped.pending:
            skipped.append((seq, raw))
            continue
        if coordinator and not wrapped.pending:
            for before_seq, before in leading_lines(list(skipped), seq, raw):
                feed(before_seq, before, False)
        skipped.clear()
        feed(seq, raw, coordinator)
    for line, parsed in wrapped.flush():
        count(line, parsed)
    return _layout_report(spec.path, layouts, classes)


class _Line(NamedTuple):
    seq: int
    host: str | None
    coordinator: bool      # names a coordinator logger or prefix (else: read for the layout, or continues one)


def run(args: argparse.Namespace) -> int:
    """One JSON object per coordinator event in broker logs; layouts and counts on stderr. No Spark."""
    settings = load(ParseLogsSettings, args.config, **flags_of(args))
    inputs = make_inputs(LogInput, [{"path": p, "broker_timezone": settings.broker_timezone,
                                     "broker_id": broker_id, "envelope": settings.log_envelope,
                                     "broker_id_field": settings.broker_id_field}
                                    for p, broker_id in zip(args.path, broker_ids(args.broker_id, args.path))],
                         "PATH")
    keep, _ = check_inputs("parse-logs", [i.path for i in inputs])
    inputs = [i for i in inputs if i.path in keep]
    counts = _Counts()
    reports: list[str] = []
    for spec in inputs:
        reports += _parse_file(spec, counts, sys.stdout)
    outcomes = counts.outcomes
    coordinator = sum(v for k, v in outcomes.items() if k not in ("not_coordinator", OUTCOME_BROKER))
    for line in reports:
        print(line, file=sys.stderr)
    print(f"parse-logs: {counts.lines} lines, {coordinator} coordinator lines: {counts.events} events from "
          f"{outcomes[OUTCOME_EVENTS] + outcomes[OUTCOME_BROKER]} lines ({outcomes[OUTCOME_BROKER]} of them broker "
          f"lines: a peer unreachable, a broker's start or shutdown), {outcomes['ignored']} known lines not needed "
          f"(loads, elections, offset cleanups), "
          f"{outcomes['debug']} DEBUG/TRACE skipped, {outcomes['continuation']} continuation, "
          f"{outcomes['unparseable'] + outcomes['unreadable_envelope']} unparseable, "
          f"{outcomes[OUTCOME_UNKNOWN_LAYOUT]} in a layout not understood, "
          f"{sum(counts.unknown_by_logger.values())} unrecognised", file=sys.stderr)
    for logger, count in sorted(counts.unknown_by_logger.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"parse-logs: unrecognised {count} {logger}", file=sys.stderr)
    return 0
