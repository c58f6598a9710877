"""Checks of what the broker wrote: expected coordinator lines per scenario (on the shipped
lines), records in `__consumer_offsets`, and the monitor's own `parse-logs` over the
server.log files (the end-to-end smoke: events found vs lines expected)."""
from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from testbed.bed.procs import BedTimeout, wait_for
from testbed.monitor import REPO, monitor_command


@dataclass
class LineCheck:
    label: str
    pattern: str
    kind: str | None
    expected: int
    found: int
    lines: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.found >= self.expected


def check_lines(shipper, since: dict, group: str, expects: list, timeout: float = 20.0) -> list[LineCheck]:
    """Waits (bounded) for each expected line to have been shipped after `since`."""
    out = []
    for e in expects:
        rx = e.regex(group)

        def matches(rx=rx):
            return [ln for ln in shipper.lines() if ln.seq >= since.get(ln.broker_id, 0) and rx.search(ln.text)]

        def enough(e=e) -> bool:
            return len(matches()) >= e.min_count
        try:
            wait_for(enough, timeout, f"{e.min_count} x {e.label} line of {group}")
        except BedTimeout:
            pass
        found = matches()
        out.append(LineCheck(e.label, rx.pattern, e.kind, e.min_count, len(found), [ln.text for ln in found]))
    return out


def each_offsets_record(bootstrap: str, client_group: str, on_record: Callable[[Any], None],
                        timeout: float = 30.0) -> None:
    """Every record of __consumer_offsets (all partitions, to their current end) to `on_record`
    (confluent-kafka messages); nothing when the topic does not exist yet."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": client_group,
                  "enable.auto.commit": False, "log_level": 2})
    try:
        md = c.list_topics("__consumer_offsets", timeout=10).topics.get("__consumer_offsets")
        if md is None or md.error is not None:
            return
        ends = {}
        for p in md.partitions:
            lo, hi = c.get_watermark_offsets(TopicPartition("__consumer_offsets", p), timeout=10)
            if hi > lo:
                ends[p] = hi
        c.assign([TopicPartition("__consumer_offsets", p, 0) for p in ends])
        done: set = set()

        def read() -> bool:
            for msg in c.consume(500, 0.5):
                if msg.error() is not None:
                    continue
                on_record(msg)
                offset = msg.offset()
                assert offset is not None, "a consumed message without an error has its offset"
                if offset + 1 >= ends[msg.partition()]:
                    done.add(msg.partition())
            return len(done) == len(ends)
        wait_for(read, timeout, "__consumer_offsets to be read to its end", interval=0)
    finally:
        c.close()


def offsets_records(bootstrap: str, groups: list | None = None, timeout: float = 30.0) -> Counter:
    """Records in __consumer_offsets (all partitions, to their current end), per group whose
    name appears in the key (every key type starts with the group id); '*' counts all."""
    counts: Counter = Counter()

    def count(msg: Any) -> None:
        counts["*"] += 1
        key = msg.key() or b""
        for g in groups or []:
            if g.encode() in key:
                counts[g] += 1
    each_offsets_record(bootstrap, "kafkabed-offsets-reader", count, timeout)
    return counts


def parse_logs(paths: list, extra: list | None = None, timeout: float = 300.0) -> tuple[list[dict], str]:
    """`rebalance-monitor parse-logs PATH...`: (events, stderr summary)."""
    proc = subprocess.run([*monitor_command(), "parse-logs", *map(str, paths), *(extra or [])],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=""))
    if proc.returncode != 0:
        raise RuntimeError(f"rebalance-monitor parse-logs failed ({proc.returncode}): {proc.stderr[-800:]}")
    events = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return events, proc.stderr.strip()


def smoke(events: list[dict], group: str, checks: list[LineCheck]) -> list[tuple]:
    """(kind, lines the broker wrote, events parse-logs found) for each check with a kind."""
    by_kind = Counter(e["kind"] for e in events if e.get("group") == group)
    return [(c.kind, c.found, by_kind.get(c.kind, 0)) for c in checks if c.kind]
