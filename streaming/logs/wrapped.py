"""Coordinator messages that continue over lines: joined back into one entry.

Kafka writes each message on one line, but a line pasted into a ticket, a terminal or a chat is
often wrapped (`assignedPartitions=[foo-0,` / ` foo-1], ...`), and such files are what users
replay after an incident. A line that starts an entry (ENTRY_START) and is not whole (`_whole`: a
layout that ends with the logger, read with it) waits for the next line of its source. When that
line is the very next one (seq + 1) and continues it (no entry, blank line or stack trace of its
own), the lines so far are read again as one: joined by a blank when either side of the break has
one, else both ways, by nothing first (a wrap inside a word) and then by a blank (a wrap that ate
it). A reading that recognises the entry and ends with its logger is kept at once; one in a layout
that ends with the message is kept unless a longer join reads too. Up to MAX_WRAPPED_LINES (layout.py)
lines join; the kept reading carries the first line's seq and the lines it took count as continuations; when no
join reads, every line keeps its own reading. Each caller keeps one joiner per task or file (one
pending entry per source) and emits what `flush` returns at the end.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streaming.logs.layout import ENTRY_START, MAX_WRAPPED_LINES, NOT_CONTINUING
from streaming.logs.parser import (
    OUTCOME_CONTINUATION, OUTCOME_DEBUG, OUTCOME_EVENTS, OUTCOME_IGNORED, OUTCOME_NOT_COORDINATOR, OUTCOME_UNKNOWN,
    OUTCOME_UNKNOWN_LAYOUT, LineParse
)

# Readings tried per line at most (a break without a blank doubles them): the likeliest first.
MAX_JOINS = 8
_STARTS_ENTRY = re.compile(ENTRY_START)
_NOT_JOINED = re.compile(NOT_CONTINUING)
# Layouts that end with the logger: a line read in one of them is whole. The others end with the
# message, so a line read in them may still go on in the next.
_ENDS_WITH_LOGGER = ("default", "default-padded", "default-location", "default-padded-location", "strimzi3",
                     "pipe", "pipe-location")
_READ = (OUTCOME_EVENTS, OUTCOME_IGNORED, OUTCOME_DEBUG)
_WAITS = (OUTCOME_UNKNOWN, OUTCOME_UNKNOWN_LAYOUT)
JOINED_CONTINUATION = LineParse(OUTCOME_CONTINUATION, None)

Parse = Callable[[str], LineParse]


@dataclass
class _Pending:
    seq: int
    texts: list[str]            # the lines so far, joined each way a break allows
    parse: Parse                # reads a text as the first line's (its source, seq, time zone)
    first: tuple[Any, LineParse]
    rest: list[tuple[Any, LineParse]] = field(default_factory=list)
    best: LineParse | None = None   # the best reading of a join so far (one that may go on)
    took: int = 0                   # lines of `rest` that reading took

    def readings(self) -> list[tuple[Any, LineParse]]:
        """The best reading for the first line and continuations for the lines it took; the
        others keep their own."""
        if self.best is None:
            return [self.first, *self.rest]
        return [(self.first[0], self.best), *((c, JOINED_CONTINUATION) for c, _ in self.rest[:self.took]),
                *self.rest[self.took:]]


class WrappedEntries:
    def __init__(self) -> None:
        self.pending: dict[Any, _Pending] = {}

    def feed(self, source: Any, seq: int, line: str, parse: Parse, context: Any) -> list[tuple[Any, LineParse]]:
        """The (context, reading) pairs to emit now, in order, for this line of `source`; `parse`
        reads a text as this line (its seq); `context` is the caller's, handed back."""
        out: list[tuple[Any, LineParse]] = []
        pending = self.pending.pop(source, None)
        if pending is not None:
            if seq == pending.seq + 1 and not _NOT_JOINED.match(line):
                texts = _joined(pending.texts, line)
                pending.rest.append((context, parse(line)))
                pending.seq, pending.texts = seq, texts
                for text in texts:
                    again = pending.parse(text)
                    if again.outcome in _READ:
                        pending.best, pending.took = again, len(pending.rest)
                        if _whole(again):
                            return pending.readings()      # whole: its logger ends it
                        break
                if len(pending.rest) + 1 < MAX_WRAPPED_LINES:
                    self.pending[source] = pending
                    return out
                return pending.readings()
            out += pending.readings()
        parsed = parse(line)
        if _may_continue(line, parsed):
            self.pending[source] = _Pending(seq, [line.rstrip("\r\n")], parse, (context, parsed))
            return out
        out.append((context, parsed))
        return out

    def flush_source(self, source: Any) -> list[tuple[Any, LineParse]]:
        """The lines of `source` still waiting, with their readings (its marker, an unreadable row)."""
        pending = self.pending.pop(source, None)
        return [] if pending is None else pending.readings()

    def flush(self) -> list[tuple[Any, LineParse]]:
        """Every line still waiting, with its reading (the end of a task or file)."""
        out = [pair for pending in self.pending.values() for pair in pending.readings()]
        self.pending.clear()
        return out


def _joined(texts: list[str], line: str) -> list[str]:
    """Each text with `line` after it: by one blank when the break has a blank on either side,
    else by nothing first (a terminal wraps at a column, inside words; free-text fields such as a
    rebalance reason would read a blank put there) and then by a blank (a wrap that ate one)."""
    tail = line.rstrip("\r\n")
    out: list[str] = []
    for text in texts:
        if text[-1:].isspace() or tail[:1].isspace():
            out.append(f"{text.rstrip()} {tail.strip()}")
        else:
            out += [text + tail, f"{text} {tail}"]
    return list(dict.fromkeys(out))[:MAX_JOINS]


def _whole(parsed: LineParse) -> bool:
    """Read in a layout that ends with the logger, logger included: nothing can follow."""
    return parsed.layout in _ENDS_WITH_LOGGER and parsed.logger is not None


def _may_continue(line: str, parsed: LineParse) -> bool:
    """Does this line open an entry that may go on in the next line? One that starts with a time
    and is not whole (`_whole`): a layout's opening without its logger (header.OPENINGS), a line
    read in a layout that ends with the message or by position only. Of those, the coordinator
    lines not read as they are, the lines read, and the lines that may be cut before a coordinator
    logger name."""
    if _whole(parsed) or not _STARTS_ENTRY.match(line):
        return False
    return parsed.outcome in _WAITS or parsed.outcome in _READ or parsed.outcome == OUTCOME_NOT_COORDINATOR


def starts_entry(line: str) -> bool:
    return _STARTS_ENTRY.match(line) is not None


def leading_lines(before: list[tuple[int, str]], seq: int, line: str) -> list[tuple[int, str]]:
    """The lines of `before` (the last few a reader skipped, in order) that begin the entry `line`
    continues: from the last one that starts an entry, when `line` starts none and they run up to
    it without a gap. [] otherwise."""
    if starts_entry(line) or not before or before[-1][0] != seq - 1:
        return []
    for i in range(len(before) - 1, -1, -1):
        if i < len(before) - 1 and before[i][0] != before[i + 1][0] - 1:
            return []
        if starts_entry(before[i][1]):
            return before[i:]
    return []
