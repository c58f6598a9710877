"""Rewrite real capture logs into older Kafka wordings and into log-shipper JSON envelopes.

Used by the old-version and mixed-envelope tests: the same real events, told the way a Kafka 1.1
or 2.0 broker would log them, or the way Filebeat, Fluent Bit and Vector ship them. Wordings are
the 1.1.0 / 2.0.0 templates (docs/broker-logs.md, catalog entries scala_prepare_rebalance_no_reason
and scala_groups_deleted_1_1). Nothing here uses the monitor's parser.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

HEADER = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ")
# 2.1+ "Preparing to rebalance" -> 1.1/2.0 (no state, no reason)
PREPARE_2_1 = re.compile(r"Preparing to rebalance group (.+?) in state \w+ with old generation (-?\d+) "
                         r"(\(__consumer_offsets-\d+\)) \(reason: .*\) \(kafka\.coordinator\.group\.GroupCoordinator\)$")
DELETED_2_0 = re.compile(r"The following groups were deleted: (.*)\. A total of \d+ offsets were removed\. "
                         r"\(kafka\.coordinator\.group\.GroupCoordinator\)$")
# Lines a 1.1/2.0 broker does not write at INFO: LeaveGroup is DEBUG before 2.2, the member-id
# lines exist from 2.4/2.5, static membership from 2.3, "remove dynamic members" from 2.7.
NOT_IN_OLD_INFO = re.compile(
    r"\]: Member\[group\.instance\.id .*\] in group .* has left, removing it from the group"
    r"|\]: (?:Static|Dynamic) Member with unknown member id joins group "
    r"|\]: Adding new static member "
    r"|\]: Static member "
    r"| remove dynamic members who haven't joined: "
    r"|\) loaded with member id | of group .+ loaded with member id ")


def old_wording(line: str, version: str) -> str:
    """One line in the wording of Kafka `version` ("2.0" or "1.1") where that differs."""
    m = PREPARE_2_1.search(line)
    if m:
        return (line[:m.start()] + f"Preparing to rebalance group {m.group(1)} with old generation {m.group(2)} "
                f"{m.group(3)} (kafka.coordinator.group.GroupCoordinator)")
    if version == "1.1":
        m = DELETED_2_0.search(line)
        if m:
            return line[:m.start()] + f"The following groups were deleted: {m.group(1)} " \
                                      "(kafka.coordinator.group.GroupCoordinator)"
    return line


def as_old_broker(lines: list[str], version: str, drop_missing: bool) -> list[str]:
    """All lines in the old wording; with drop_missing also without the lines that version does
    not write at INFO (so only what a 1.1/2.0 broker's server.log would hold)."""
    return [old_wording(line, version) for line in lines
            if not (drop_missing and NOT_IN_OLD_INFO.search(line))]


def entries(lines: list[str], start: re.Pattern[str] = HEADER) -> list[list[str]]:
    """Log entries: a line that `start` matches (a header) and the continuation lines after it."""
    out: list[list[str]] = []
    for line in lines:
        if start.match(line) or not out:
            out.append([line])
        else:
            out[-1].append(line)
    return out


def filebeat(lines: list[str], host: str, broker_id: int, multiline: str | None = None) -> list[str]:
    """Filebeat with multiline.pattern `multiline` (negate, after; default: Kafka's default header):
    one document per entry, continuation lines joined."""
    docs = []
    for offset, entry in enumerate(entries(lines, re.compile(multiline) if multiline else HEADER)):
        docs.append(json.dumps({
            "@timestamp": "2026-11-21T19:40:00.000Z", "message": "\n".join(entry),
            "host": {"name": host}, "agent": {"type": "filebeat", "version": "8.15.0"},
            "log": {"file": {"path": "/opt/kafka/logs/server.log"}, "offset": offset},
            "fields": {"broker_id": broker_id}, "ecs": {"version": "8.0.0"}}))
    return docs


def fluent_bit(lines: list[str], pod: str) -> list[str]:
    """Fluent Bit tailing a container log: one document per line, `log` ends with a newline."""
    return [json.dumps({"date": 1795289000.0, "log": line + "\n", "stream": "stdout",
                        "kubernetes": {"pod_name": pod, "namespace_name": "kafka", "container_name": "kafka",
                                       "host": "node-1"}}) for line in lines]


def vector(lines: list[str], host: str) -> list[str]:
    """Vector's file source: one document per line, `message`, `host` and `source_type`."""
    return [json.dumps({"message": line, "host": host, "source_type": "file",
                        "file": "/opt/kafka/logs/server.log", "timestamp": "2026-11-21T19:40:00Z"})
            for line in lines]


def write(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def pasted(lines: list[str], width: int = 100) -> list[str]:
    """The lines as they come out of a ticket or a chat after an incident: every group-coordinator
    line mangled one of three ways in turn. Hard-wrapped at `width` (mid-word, as a narrow terminal
    copies it), soft-wrapped at the last blank before `width` (the blank stays at the end of the
    first part, the rest indented by two), or with its blanks doubled, a tab after the level and
    blanks at the end. Other lines stay as they are."""
    out: list[str] = []
    turn = 0
    for line in lines:
        if ("coordinator" not in line and "GroupCoordinator" not in line) or len(line) <= width:
            out.append(line)
            continue
        way, turn = turn % 3, turn + 1
        if way == 0:
            out += [line[i:i + width] for i in range(0, len(line), width)]
        elif way == 1:
            parts, rest = [], line
            while len(rest) > width and rest.rfind(" ", 0, width) > 0:
                cut = rest.rfind(" ", 0, width) + 1
                parts.append(rest[:cut])
                rest = "  " + rest[cut:]
            out += parts + [rest]
        else:
            # The time stays as it is (its blank is part of its format); the blank after the level
            # becomes a tab.
            time = HEADER.match(line) or re.match(r"^\S+ \S+ ", line)
            at = time.end() if time else 0
            out.append(line[:at] + line[at:].replace(" ", "\t", 1).replace(" ", "  ") + "  ")
    return out
