"""`rebalance-monitor`: the command line, one module per command (flags in options.py)."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from streaming.app.cli import decode_offsets, demo, parse_logs, replay, report, run
from streaming.app.cli.replay import OutputsNotWritten
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
    except OutputsNotWritten as exc:
        print(f"rebalance-monitor {args.command}: writing the outputs failed: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:          # `... | head`: the reader is gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def entry() -> None:
    """The console script: main(), then out at once. The interpreter's own exit frees every object
    a replay still holds one by one (2.5 s after a 10,000-group day's replay, bench/cost); the
    kernel frees them with the process. Spark's JVM exits as it always does when its Python parent
    is gone (its stdin closes), running its own shutdown hooks."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):     # the reader is gone, or the stream is closed
            pass
    os._exit(code)
