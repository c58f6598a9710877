"""The progress line of a replay on stderr: rows read, rate, share done, ETA.

Fed with each micro-batch's report (RunCollector.on_progress, streaming/app/batch_report.py). The offsets of
a replay's sources (streaming/spark/sources/staged.py) carry the input lines or records read so
far and how many there are, per input kind. On a terminal the line is rewritten in place (from `TTY_AFTER_S` on, at most
every `TTY_EVERY_S`); otherwise (CI logs, files) a new line is printed only for replays that run
longer than `LOG_AFTER_S`, then every `LOG_EVERY_S`: a short replay prints nothing.
"""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from sinks.health import BatchReport

TTY_AFTER_S, TTY_EVERY_S = 1.0, 0.5
LOG_AFTER_S, LOG_EVERY_S = 10.0, 30.0


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class ReplayProgress:
    def __init__(self, label: str = "replay", stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic, tty: bool | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.tty = self.stream.isatty() if tty is None else tty
        self.started = clock()
        self.last_print: float | None = None
        self.sources: dict[str, dict] = {}   # latest end offset per input kind
        self.in_place = False               # a line was written without its newline
        self._lock = threading.Lock()

    def done_share(self) -> tuple[int, float | None]:
        """(rows read, share of the input read) from the latest offsets; share None while unknown."""
        rows = sum(int(o.get("lines") or 0) for o in self.sources.values())
        total = sum(int(o.get("of") or 0) for o in self.sources.values())
        return rows, (min(1.0, rows / total) if total > 0 else None)

    def line(self) -> str:
        rows, share = self.done_share()
        elapsed = max(1e-6, self.clock() - self.started)
        text = f"{self.label}: {rows:,} rows read, {rows / elapsed:,.0f} rows/s"
        if share is not None:
            text += f", {share:.0%}"
            if 0 < share < 1:
                text += f", ETA {_duration(elapsed * (1 - share) / share)}"
        return text

    def staging(self, inputs: int, size_bytes: int) -> None:
        """The first stage starts (its files read, parsed and decoded by Spark tasks, which send
        no progress reports): on a terminal, say so in place until it ends."""
        with self._lock:
            if self.tty:
                self._write(f"{self.label}: reading, parsing and decoding {inputs} input(s), "
                            f"{size_bytes / 1e6:,.1f} MB ...")

    def staged(self, rows: int, batches: int, seconds: float) -> None:
        """The first stage ended: one line (on a terminal; in a log when it took long enough to matter)."""
        with self._lock:
            if self.tty or seconds >= LOG_AFTER_S:
                self._write(f"{self.label}: read {rows:,} event rows in {seconds:,.1f} s, "
                            f"replayed in {batches:,} micro-batch(es)")
                if self.in_place:
                    self.stream.write("\n")
                    self.stream.flush()
                    self.in_place = False

    def update(self, report: BatchReport) -> None:
        """One micro-batch's report (RunCollector.on_progress)."""
        with self._lock:
            for source in report.sources:
                if source.offset.get("source"):
                    self.sources[source.offset["source"]] = source.offset
            now = self.clock()
            elapsed = now - self.started
            since = None if self.last_print is None else now - self.last_print
            if self.tty:
                due = elapsed >= TTY_AFTER_S and (since is None or since >= TTY_EVERY_S)
            else:
                due = elapsed >= LOG_AFTER_S and (since is None or since >= LOG_EVERY_S)
            if due:
                self._write(self.line())
                self.last_print = now

    def _write(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K" + text)
            self.in_place = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        """End the in-place line (terminal) so what follows starts on a new line."""
        with self._lock:
            if self.in_place:
                self._write(self.line())
                self.stream.write("\n")
                self.stream.flush()
                self.in_place = False
