"""Rewrite a real broker log in Kafka's default layout `[%d] %p %m (%c)%n` into the other layouts
brokers are run with (docs/broker-logs.md, "Layouts"), entry by entry, the way log4j would have
written the same events. Nothing here uses the monitor's parser: entries are cut with one plain
regex, the layouts are written from their log4j patterns.

`rewrite(lines, layout, broker)` returns the new lines and, for each new line, the number of the
original line it comes from (1-based). Pattern layouts and prefixes keep one line per line; JSON
layouts write one document per entry (a stack trace or multi-line message goes inside it), so
their line numbers differ and `line_map` translates them back.

Thread names and source line numbers do not exist in the default layout: they are made up
(deterministically from the logger), as the monitor does not use them.
"""
from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

ENTRY = re.compile(r"^\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d),(\d{3})\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (.*) "
                   r"\(([\w.$]+)\)$")
# A message of several lines (`KafkaConfig values: ` and its settings): the opening has the time and
# level, the logger ends the message's last line.
OPENING = re.compile(r"^\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d),(\d{3})\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (.*)$")
CLOSING = re.compile(r"^(.*) \(([\w.$]+)\)$")
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_THREADS = ("data-plane-kafka-request-handler-0", "executor-Heartbeat", "executor-Rebalance",
            "group-coordinator-event-processor-0", "kafka-scheduler-3", "main")


@dataclass
class Entry:
    first: int                 # 1-based line number of its header line (0: lines before the first header)
    date: str | None
    clock: str | None          # HH:mm:ss
    millis: str | None
    level: str | None
    message: str | None
    logger: str | None
    lines: list[str]           # the original lines (header line first)
    message_lines: int = 1     # how many of them the message spans (the logger ends the last one)


def _closing(lines: list[str], start: int) -> int | None:
    """Index of the line that ends a multi-line message opened before `start`, if any."""
    for j in range(start, len(lines)):
        if OPENING.match(lines[j]):
            return None
        if CLOSING.match(lines[j]):
            return j
    return None


def entries(lines: list[str]) -> list[Entry]:
    out: list[Entry] = []
    skip_to = 0
    for i, line in enumerate(lines, start=1):
        if i <= skip_to:
            out[-1].lines.append(line)
            continue
        m = ENTRY.match(line)
        opening = OPENING.match(line) if m is None else None
        end = _closing(lines, i) if opening is not None else None
        if opening is not None and end is not None:
            date, clock, millis, level, first = opening.groups()
            last = CLOSING.match(lines[end])
            assert last is not None
            message = "\n".join([first, *lines[i:end], last.group(1)])
            out.append(Entry(i, date, clock, millis, level, message, last.group(2), [line], end - i + 2))
            skip_to = end + 1
            continue
        if m is None:
            if not out:
                out.append(Entry(0, None, None, None, None, None, None, []))
            out[-1].lines.append(line)
            continue
        date, clock, millis, level, message, logger = m.groups()
        out.append(Entry(i, date, clock, millis, level, message, logger, [line]))
    return out


def _thread(logger: str) -> str:
    return _THREADS[zlib.crc32(logger.encode()) % len(_THREADS)]


def _source_line(logger: str) -> int:
    return 40 + zlib.crc32(logger.encode()[::-1]) % 900


def _short(logger: str) -> str:
    return logger.rsplit(".", 1)[-1]


def _file(logger: str) -> str:
    name = _short(logger).split("$", 1)[0]
    return name + (".scala" if logger.startswith("kafka.") else ".java")


# ----------------------------------------------------------------------------- pattern layouts
def _pattern(e: Entry, layout: str, broker: int) -> str:
    ts, level, msg, logger = f"{e.date} {e.clock},{e.millis}", e.level or "", e.message, e.logger or ""
    if layout == "default":
        return f"[{ts}] {level} {msg} ({logger})"
    if layout == "default-seconds":          # [%d{yyyy-MM-dd HH:mm:ss}] %p %m (%c)%n: the reference for
        return f"[{e.date} {e.clock}] {level} {msg} ({logger})"   # layouts without milliseconds
    if layout == "padded":                   # [%d] %-5p %m (%c)%n
        return f"[{ts}] {level:<5} {msg} ({logger})"
    if layout == "location":                 # [%d] %p %m (%c:%L)%n, Kafka's own test log4j
        return f"[{ts}] {level} {msg} ({logger}:{_source_line(logger)})"
    if layout == "strimzi4":                 # %d{yyyy-MM-dd HH:mm:ss} %-5p [%t] %c{1}:%L - %m%n
        return f"{e.date} {e.clock} {level:<5} [{_thread(logger)}] {_short(logger)}:{_source_line(logger)} - {msg}"
    if layout == "strimzi3":                 # %d{ISO8601} %p %m (%c) [%t]%n (log4j 1.x ISO8601)
        return f"{ts} {level} {msg} ({logger}) [{_thread(logger)}]"
    if layout == "cfk":                      # [%p] %d [%t] %c %M - app=kafka, clusterId=..., server=N - %m
        return (f"[{level}] {ts} [{_thread(logger)}] {logger} info - app=kafka, clusterId=Mk3OEYBSD34fcwNTJENDM2Qk, "
                f"server={broker} - {msg}")
    if layout == "pipe":                     # %d | %-5p | [%t] | %m | %c (%F:%L)
        return (f"{ts} | {level:<5} | [{_thread(logger)}] | {msg} | {logger} "
                f"({_file(logger)}:{_source_line(logger)})")
    raise ValueError(layout)


PATTERN_LAYOUTS = ("padded", "location", "strimzi4", "strimzi3", "cfk", "pipe")


# ----------------------------------------------------------------------------- JSON layouts
def _instant(e: Entry) -> tuple[int, int]:
    dt = datetime.strptime(f"{e.date} {e.clock}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    return int(dt.timestamp()), int(e.millis or 0) * 1_000_000 + 123_456


def _json_entry(e: Entry, layout: str) -> str:
    rest = e.lines[e.message_lines:]
    thrown = rest and not rest[0].startswith("\t") and ("Exception" in rest[0] or "Error" in rest[0])
    message = e.message if thrown or not rest else "\n".join([e.message or ""] + rest)
    if layout == "ecs-json":                 # JsonTemplateLayout, classpath:EcsLayout.json
        doc: dict = {"@timestamp": f"{e.date}T{e.clock}.{e.millis}Z", "ecs.version": "1.2.0",
                     "log.level": e.level, "message": message, "process.thread.name": _thread(e.logger or ""),
                     "log.logger": e.logger}
        if thrown:
            doc.update({"error.type": rest[0].split(":", 1)[0], "error.message": rest[0].partition(": ")[2],
                        "error.stack_trace": "\n".join(rest)})
    elif layout == "strimzi-json":           # JsonTemplateLayout with Strimzi's test template (below)
        # (the template has no exception resolver: a stack trace is not written)
        doc = {"instant": f"{e.date}T{e.clock}.{e.millis}Z", "someConstant": 1, "message": message}
    else:                                    # JsonLayout (compact, eventEol) / JsonLayout.json template
        seconds, nanos = _instant(e)
        doc = {"instant": {"epochSecond": seconds, "nanoOfSecond": nanos}, "thread": _thread(e.logger or ""),
               "level": e.level, "loggerName": e.logger, "message": message, "endOfBatch": False,
               "loggerFqcn": "org.apache.logging.slf4j.Log4jLogger", "threadId": 41, "threadPriority": 5}
        if thrown:
            doc["thrown"] = {"name": rest[0].split(":", 1)[0], "message": rest[0].partition(": ")[2],
                             "extendedStackTrace": "\n".join(rest)}
    return json.dumps(doc, separators=(",", ":"))


# Strimzi's system tests configure a broker (Kafka 4.x, log4j2) with JsonTemplateLayout and this event
# template (the one of log4j2's JsonTemplateLayout manual): time and message only, no level, no logger:
#   {"instant": {"$resolver": "timestamp", "pattern": {"format": "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'",
#    "timeZone": "UTC"}}, "someConstant": 1, "message": {"$resolver": "message", "stringified": true}}
JSON_LAYOUTS = ("ecs-json", "log4j2-json", "strimzi-json")


# ----------------------------------------------------------------------------- prefixes
def _rfc3339(e: Entry, micros: int) -> str:
    dt = (datetime.strptime(f"{e.date} {e.clock}.{e.millis}", "%Y-%m-%d %H:%M:%S.%f")
          + timedelta(microseconds=micros))
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f") + f"{micros % 1000:03d}Z"


def _prefixed(e: Entry, line: str, i: int, layout: str, broker: int) -> str:
    if e.date is None:              # lines before the first header: the runtime still stamps them
        e = Entry(0, "2026-11-21", "00:00:00", "000", None, None, None, [])
    if layout == "compose-v1":
        return f"kafka{broker}_1  | {line}"
    if layout == "compose-v2":
        return f"kafka{broker}-1  | {line}"
    if layout == "cri":
        return f"{_rfc3339(e, 200 + i)} {'stdout' if i % 7 else 'stderr'} F {line}"
    if layout == "kubectl":
        return f"{_rfc3339(e, 300 + i)} {line}"
    if layout == "syslog":
        assert e.date is not None       # a header's date, or the stand-in entry's above
        month = _MONTHS[int(e.date[5:7]) - 1]
        return f"{month} {int(e.date[8:10]):2d} {e.clock} kafka-{broker} kafka[{4100 + broker}]: {line}"
    if layout == "docker-json":
        return json.dumps({"log": line + "\n", "stream": "stdout", "time": _rfc3339(e, 400 + i)},
                          separators=(",", ":"))
    raise ValueError(layout)


PREFIX_LAYOUTS = ("compose-v1", "compose-v2", "cri", "kubectl", "syslog", "docker-json")
LAYOUTS = ("default",) + PATTERN_LAYOUTS + JSON_LAYOUTS + PREFIX_LAYOUTS
# Layouts that do not write milliseconds: compare them with `default-seconds`.
SECONDS_ONLY = ("strimzi4",)
# What the replay tests render a capture in: every layout alone, and prefixes in front of other layouts.
CASES = [layout for layout in LAYOUTS if layout != "default"] + [
    "cri+strimzi4", "kubectl+strimzi3", "compose-v2+pipe", "syslog+padded", "docker-json+strimzi4", "cri+cfk",
    "compose-v1+location", "cri+ecs-json", "kubectl+log4j2-json", "docker-json+ecs-json", "compose-v2+log4j2-json",
    "cri+strimzi-json", "docker-json+strimzi-json"]


def rewrite(lines: list[str], layout: str, broker: int = 1) -> tuple[list[str], list[int]]:
    """The lines of a default-layout log in `layout`; and the original line number of each."""
    out: list[str] = []
    origin: list[int] = []
    if "+" in layout:                         # a prefix in front of another layout, e.g. "cri+strimzi4"
        outer, inner = layout.split("+", 1)
        inner_lines, inner_origin = rewrite(lines, inner, broker)
        all_entries = entries(lines)
        entry_of = {max(e.first, 1) + k: e for e in all_entries for k in range(len(e.lines))}
        return ([_prefixed(entry_of[n], line, k, outer, broker)
                 for k, (line, n) in enumerate(zip(inner_lines, inner_origin))], inner_origin)
    for e in entries(lines):
        first = max(e.first, 1)
        if e.date is None:                    # lines before the first header: as they are
            for k, line in enumerate(e.lines):
                out.append(_prefixed(e, line, len(out), layout, broker) if layout in PREFIX_LAYOUTS else line)
                origin.append(first + k)
            continue
        if layout in JSON_LAYOUTS:
            out.append(_json_entry(e, layout))
            origin.append(first)
            continue
        head = [] if layout in PREFIX_LAYOUTS else _pattern(e, layout, broker).split("\n")
        for k, line in enumerate(e.lines):
            if layout in PREFIX_LAYOUTS:
                out.append(_prefixed(e, line, len(out), layout, broker))
            else:
                out.append(head[k] if k < len(head) else line)
            origin.append(first + k)
    return out, origin
