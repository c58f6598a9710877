"""`rebalance-monitor`: the command line, one module per command (flags in options.py)."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from streaming.app.cli import decode_offsets, demo, parse_logs, replay, report, run
from streaming.app.probe import InputError
from streaming.app.settings import ConfigError, StartupError
from streaming.spark.failure import QueryFailed

COMMANDS = (replay, parse_logs, decode_offsets, demo, run, report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rebalance-monitor", description="Kafka consumer-group rebalance monitor")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        message = str(exc)
        print(f"rebalance-monitor: configuration error:{chr(10) if chr(10) in message else ' '}{message}",
              file=sys.stderr)
        return 2
    except InputError as exc:
        for line in str(exc).splitlines():
            print(f"rebalance-monitor {args.command}: {line}", file=sys.stderr)
        return 2
    except StartupError as exc:
        print(f"rebalance-monitor: {exc}", file=sys.stderr)
        return 2
    except QueryFailed as exc:
        print(f"rebalance-monitor {args.command}: the Spark query failed: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:          # `... | head`: the reader is gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
