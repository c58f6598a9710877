"""The real captures rewritten into every layout brokers are run with (tests/support/layouts.py)
give byte-identical rebalance and removal records to Kafka's default layout, through the same
read -> parse -> state machine path the replay runs (streaming/app/local.py, no Spark; the Spark
replay of the same rewrites: tests/spark/test_layouts_spark.py).

Two documented differences, which the comparison applies to the reference, not to the result:
- layouts without milliseconds (Strimzi's Kafka 4.x pattern) are compared with the default layout
  at second precision (`default-seconds`, `[%d{yyyy-MM-dd HH:mm:ss}]`): the information is not in
  the line, and such lines' times are placed among the offsets records of their second
  (state/event_order.py); that their verdicts are the millisecond layout's:
  tests/unit/test_layout_verdicts.py;
- JSON layouts write one document per entry, so a removal's `seq` (its line number) is translated
  back to the original line through the rewrite's line map.

Strimzi's JSON template (`strimzi-json`: time and message, no level, no logger) loses the coordinator
lines without a coordinator prefix (Scala's GroupMetadata$ "Loaded member", the event processor
threads): they are not coordinator lines there, and none of them carries a fact (the records match).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from state.outputs import OutputKind
from streaming.app.local import run_local
from streaming.app.settings import LogInput, OffsetsInput
from streaming.logs.merge import LogMergeCursor
from streaming.logs.step import LogSourceSpec, LogSourceStats, parse_log_rows, unwrap_rows
from tests.support.capture_expectations import FIXTURES, LOG_FILES
from tests.support.layouts import CASES, JSON_LAYOUTS, SECONDS_ONLY, entries, rewrite

_cache: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
# The layout name the monitor must report for each case (metric rebalance_monitor_log_layout_info).
_NAMES = {"padded": "default-padded", "location": "default-location", "pipe": "pipe-location",
          "compose-v1": "compose", "compose-v2": "compose", "docker-json": "envelope", "strimzi-json": "generic-json"}
_PREFIXES = ("compose-v1", "compose-v2", "cri", "kubectl", "syslog", "docker-json")


def expected_layout(case: str) -> str:
    parts = case.split("+")
    if parts[-1] in _PREFIXES:
        parts.append("default")
    return "+".join(_NAMES.get(p, p) for p in parts)


def reported_layouts(logs: list[LogInput]) -> dict[str, dict[str, int]]:
    """Lines per layout of each file, as the parse step counts them for the layout report."""
    files = [{"path": i.path, "source_id": f"default:{Path(i.path).name}", "tz": "UTC", "envelope": "auto"}
             for i in logs]
    cursor = LogMergeCursor(files)
    rows, _ = cursor.advance(cursor.initial(), 10**9)
    specs = {f["source_id"]: LogSourceSpec("default") for f in files}
    stats = LogSourceStats()
    parse_log_rows(unwrap_rows(rows, specs), specs, stats=stats)
    return {json.loads(r[-1])["source"]: json.loads(r[-1])["layouts"] for r in stats.rows()}


def write_capture(tmp: Path, capture: str, layout: str) -> tuple[list[LogInput], dict[str, list[int]]]:
    """The capture's logs in `layout` under tmp/<layout>/ (same file names); line maps per source id."""
    directory = tmp / layout.replace("+", "_")
    directory.mkdir(parents=True, exist_ok=True)
    inputs, maps = [], {}
    for broker, name in enumerate(LOG_FILES[capture], start=1):
        lines = (FIXTURES / capture / name).read_text(errors="replace").splitlines()
        out, origin = rewrite(lines, layout, broker)
        (directory / name).write_text("\n".join(out) + "\n")
        inputs.append(LogInput(path=str(directory / name)))
        maps[f"default:{name}"] = origin
    return inputs, maps


def records(capture: str, logs: list[LogInput], maps: dict[str, list[int]] | None = None) -> tuple[list[str], list[str]]:
    """Rebalance and removal records as replay writes them (sorted, one JSON text each)."""
    out = run_local(logs, [OffsetsInput(path=str(FIXTURES / capture / "offsets-topic.jsonl"))])
    removals = out[OutputKind.REMOVAL]
    if maps is not None:
        removals = [dict(r, seq=maps[r["source_id"]][r["seq"] - 1]) for r in removals]

    def dump(rows: list[dict]) -> list[str]:
        return sorted(json.dumps(r, sort_keys=True, separators=(",", ":")) for r in rows)
    return dump(out[OutputKind.REBALANCE]), dump(removals)


def reference(tmp: Path, capture: str, layout: str) -> tuple[list[str], list[str]]:
    base = "default-seconds" if any(part in SECONDS_ONLY for part in layout.split("+")) else "default"
    if (capture, base) not in _cache:
        logs, _ = write_capture(tmp, capture, base)
        _cache[(capture, base)] = records(capture, logs)
    return _cache[(capture, base)]


@pytest.mark.parametrize("capture", sorted(LOG_FILES))
@pytest.mark.parametrize("layout", CASES)
def test_layout_gives_the_records_of_the_default_layout(tmp_path_factory, capture, layout):
    tmp = tmp_path_factory.getbasetemp() / "layouts" / capture
    expected_rebalances, expected_removals = reference(tmp, capture, layout)
    logs, maps = write_capture(tmp, capture, layout)
    json_layout = any(part in JSON_LAYOUTS for part in layout.split("+"))
    rebalances, removals = records(capture, logs, maps if json_layout else None)
    # the reference is not empty: the records of each capture's default layout (the modern captures:
    # their README, 3 share and 2 streams removals), at second precision as well
    assert len(expected_rebalances) == {"kafka-2.7": 82, "kafka-4.0": 106, "kafka-4.2-modern": 12,
                                        "kafka-4.4-modern": 11}[capture]
    assert len(expected_removals) == {"kafka-2.7": 76, "kafka-4.0": 79, "kafka-4.2-modern": 5,
                                      "kafka-4.4-modern": 5}[capture]
    assert rebalances == expected_rebalances
    assert removals == expected_removals
    # every line read in the layout's own reading (not by position: `generic`), and reported as such;
    # the opening line of a multi-line message cannot show the location written after the logger
    expected = expected_layout(layout)
    for source, layouts in reported_layouts(logs).items():
        name = source.split(":", 1)[1]
        openings = multi_line_messages((FIXTURES / capture / name).read_text(errors="replace").splitlines())
        others = {k: v for k, v in layouts.items() if k != expected}
        assert max(layouts, key=lambda k: layouts[k]) == expected, (source, layouts)
        assert all(expected.startswith(k) and expected.endswith("-location") for k in others), (source, layouts)
        assert sum(others.values()) <= openings, (source, layouts, openings)


def multi_line_messages(lines: list[str]) -> int:
    return sum(1 for e in entries(lines) if e.message_lines > 1)


def test_the_default_rewrite_is_the_capture_itself(tmp_path):
    for capture in LOG_FILES:
        for broker, name in enumerate(LOG_FILES[capture], start=1):
            lines = (FIXTURES / capture / name).read_text(errors="replace").splitlines()
            assert rewrite(lines, "default", broker) == (lines, list(range(1, len(lines) + 1)))
