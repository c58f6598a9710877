"""`rebalance-monitor run`: the live service over Kafka topics (streaming/app/service.py)."""
from __future__ import annotations

import argparse
import logging
import re
import signal
import threading
from typing import Any

from streaming.app.cli.options import CONFIG, LIVE, LOG_READING, QUERY, SERVING, flags_of
from streaming.app.settings import RunSettings, load


class RepeatFilter(logging.Filter):
    """Lets each kind of message of `logger` (and its children) through once per `every_s`
    (kind: the message with its digits removed). kafka-python logs four lines per failed
    connection and reconnects with backoff from 0.1 s; while a broker is down, the monitor's
    own line per failed check says what failed. A record with an exception keeps its message and
    the exception's one-line form, without the traceback."""

    def __init__(self, logger: str, every_s: float = 300.0) -> None:
        super().__init__()
        self.logger, self.every_s = logger, every_s
        self._last: dict[tuple[str, int, str], float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != self.logger and not record.name.startswith(self.logger + "."):
            return True
        key = (record.name, record.levelno, re.sub(r"\d+", "#", record.getMessage()))
        last = self._last.get(key)
        if last is not None and record.created - last < self.every_s:
            return False
        self._last[key] = record.created
        if record.exc_info:    # a connection reset is not the monitor's bug: its message, not a traceback
            record.msg = f"{record.getMessage()} ({record.exc_info[1]!r})"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", parents=[CONFIG, LIVE, LOG_READING, QUERY, SERVING],
                       help="the live service: read Kafka topics, serve /metrics",
                       description="Reads a topic of broker log lines and __consumer_offsets, serves /metrics "
                                   "and resumes from its checkpoint after a restart (docs/configuration.md).")
    p.set_defaults(func=run)


def run_settings(args: argparse.Namespace) -> RunSettings:
    """Settings of `run`: only the kafka.* keys given as flags override the file's [kafka] table."""
    return load(RunSettings, args.config, **flags_of(args))


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)     # kafka-python: INFO logs every connection
    for handler in logging.getLogger().handlers:
        handler.addFilter(RepeatFilter("kafka"))
    settings = run_settings(args)
    from streaming.app.service import run as run_service
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return run_service(settings, stop)
