"""`rebalance-monitor report`: one self-contained HTML page of a replay's outputs or a live event sink."""
from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sinks.report import DEFAULT_MAX_GROUPS
from streaming.app.settings import ConfigError


def _time(text: str) -> int:
    """ISO 8601 (UTC when it carries no zone) or epoch milliseconds -> epoch ms."""
    if text.isdigit():
        return int(text)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (ISO 8601 like 2026-11-21T19:20:00, "
                                         f"UTC unless it has an offset, or epoch milliseconds)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return int(parsed.timestamp() * 1000)


def _pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a regular expression: {text!r} ({exc})") from None


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a whole number >= 1: {text!r}")
    return int(text)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="one self-contained HTML page of a replay's outputs or a live event sink",
        description="Draws the rebalances and member removals of a replay's output directory (replay/demo "
                    "--out) or of the live service's event sink (run --events-dir) as one HTML file without "
                    "external assets: a fleet timeline, per group a timeline of its rebalances beside its "
                    "diagnosis table.")
    p.add_argument("inputs", nargs="+", metavar="DIR",
                   help="a replay's --out directory (rebalances.jsonl, ...) or an event sink (rebalances/"
                        "batch-*.jsonl, ...); several are merged")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the HTML file to write (default: report.html in the first DIR)")
    p.add_argument("--group", type=_pattern, metavar="REGEX", help="only groups whose id matches (re.search)")
    p.add_argument("--cluster", metavar="NAME", help="only this cluster label")
    p.add_argument("--since", type=_time, metavar="TIME",
                   help="only events at or after TIME (ISO 8601, UTC unless it has an offset, or epoch ms)")
    p.add_argument("--until", type=_time, metavar="TIME", help="only events at or before TIME (as --since)")
    p.add_argument("--max-groups", type=_positive, default=DEFAULT_MAX_GROUPS, metavar="N",
                   help="draw at most N groups, those with the most unplanned removals and rebalances "
                        f"(default {DEFAULT_MAX_GROUPS})")
    p.add_argument("--storm-rebalances", type=_positive, default=10, metavar="N",
                   help="a group storm is more than N rebalances of one group within the storm window "
                        "(default 10, as the KafkaConsumerGroupRebalanceStorm alert)")
    p.add_argument("--storm-window-minutes", type=_positive, default=10, metavar="M",
                   help="the storm window (default 10)")
    p.add_argument("--burst-groups", type=_positive, default=5, metavar="N",
                   help="shade a fleet-timeline bin in which at least N groups started a rebalance (default 5)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sinks.report import Filters, ReportInputError, StormRules, write_report
    paths = [Path(p) for p in args.inputs]
    output = Path(args.output) if args.output else paths[0] / "report.html"
    filters = Filters(since_ms=args.since, until_ms=args.until, group=args.group, cluster=args.cluster)
    rules = StormRules(window_ms=args.storm_window_minutes * 60_000, rebalances=args.storm_rebalances,
                       burst_groups=args.burst_groups)
    try:
        report = write_report(paths, output, filters, rules, args.max_groups)
    except ReportInputError as exc:
        raise ConfigError(f"report: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"report: cannot write {output}: {exc.strerror or exc}") from None
    if not report.groups:
        print(f"report: no rebalance or member removal in {', '.join(map(str, paths))}"
              f"{' matched the filters' if args.group or args.cluster or args.since or args.until else ''}; "
              f"the page says so -> {output}", file=sys.stderr)
        return 0
    print(f"report: {len(report.rebalances)} rebalances, {len(report.removals)} member removals in "
          f"{len(report.groups)} groups -> {output}", file=sys.stderr)
    return 0
