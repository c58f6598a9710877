"""`rebalance-monitor run`: the live service over Kafka topics (streaming/app/live.py)."""
from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any

from streaming.app.cli.options import CONFIG, LIVE, LOG_READING, QUERY, SERVING, flags_of
from streaming.app.settings import RunSettings, load


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
    settings = run_settings(args)
    from streaming.app.live import run as run_service
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return run_service(settings, stop)
