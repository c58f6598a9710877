"""The shared words (state/vocabulary.py) are declared once, and the row builders of
streaming/rows.py give rows of the event contract (issue 29)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from sinks.metrics import MetricsSink
from state import events as E
from state import vocabulary as V
from state.outputs import STATISTICS_KINDS, OutputKind
from streaming.app.settings import DEFAULT_DURATION_BUCKETS
from streaming.logs.step import CLASS_OF_OUTCOME
from streaming.quarantine import Quarantined
from streaming.rows import (
    EVENT_ARROW_SCHEMA, EVENT_COLUMNS, event_row, log_stats_row, marker_row, quarantine_row, rows_to_arrow, stats_row
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("state", "streaming", "sinks", "dashboards")
# The vocabulary's names and values: a module that assigns one of them a literal copies it.
WORDS = {name: getattr(V, name) for name in ("METRIC_PREFIX", "SOURCE_KIND_LOG", "SOURCE_KIND_OFFSETS",
                                              "LINE_CLASSES", "UNKNOWN_LAYOUT")}
COPY_NAMES = set(WORDS) | {"PREFIX"}


def _copies(source: str) -> list[str]:
    """Assignments in `source` that declare a vocabulary word again: its name, or the metric prefix
    or the line classes as a literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assign):
            continue
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            continue
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if any(n in COPY_NAMES for n in names) or value in (V.METRIC_PREFIX, V.LINE_CLASSES):
            found.append(f"{', '.join(names)} = {value!r}")
    return found


def test_the_vocabulary_is_declared_once() -> None:
    copies = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path != ROOT / "state" / "vocabulary.py":
                found = _copies(path.read_text(encoding="utf-8"))
                if found:
                    copies[str(path.relative_to(ROOT))] = found
    assert not copies


def test_the_copy_check_sees_a_copy() -> None:
    assert _copies('PREFIX = "rebalance_monitor"\nx = 1\n') == ["PREFIX = 'rebalance_monitor'"]
    assert _copies('CLASSES = ("coordinator", "broker", "not_coordinator", "unknown_template", "unknown_layout", '
                   '"unparseable")\n')
    assert not _copies("from state.vocabulary import METRIC_PREFIX as PREFIX\n")


def test_line_classes_are_the_parse_steps_and_the_documented_ones() -> None:
    assert set(CLASS_OF_OUTCOME.values()) == set(V.LINE_CLASSES)
    metrics_doc = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    section = metrics_doc.split("### rebalance_monitor_log_lines_total", 1)[1].split("###", 1)[0]
    documented = set(re.findall(r"`(\w+)` \(", section.split("label values", 1)[1].split("\n", 1)[0]))
    assert set(V.LINE_CLASSES) <= documented


def test_every_metric_carries_the_prefix() -> None:
    sink = MetricsSink(DEFAULT_DURATION_BUCKETS, registry=CollectorRegistry())
    names = [metric.name for metric in sink.registry.collect()]
    assert names and all(name.startswith(f"{V.METRIC_PREFIX}_") for name in names)


def test_every_row_builder_gives_an_event_row() -> None:
    rows = {
        "event": event_row(E.Event(ts_ms=5, source=E.SOURCE_LOG, source_id="b1", seq=1, kind=E.GROUP_LOADED,
                                   group="g", cluster="c")),
        "quarantine": quarantine_row(Quarantined(source=E.SOURCE_LOG, source_id="b1", seq=2, reason="unparseable_line",
                                               raw="x", detail="d"), "c", 5),
        "marker": marker_row(E.SOURCE_OFFSETS, None),
        "decode_stats": stats_row("c", 5, {(1, 3, "decoded"): 2}),
        "log_stats": log_stats_row("c", "b1", 5, {"default": 1}, {"coordinator": 1}),
    }
    assert all(len(row) == len(EVENT_COLUMNS) for row in rows.values())
    batch = rows_to_arrow(list(rows.values()), EVENT_ARROW_SCHEMA)
    by_kind = {r["kind"]: r for r in batch.to_pylist()}
    # markers and statistics rows belong to no group; statistics name their cluster in their data
    assert by_kind[E.END_OF_INPUT]["group"] is None and by_kind[E.END_OF_INPUT]["ts_ms"] == E.END_OF_INPUT_TS_MS
    for kind in STATISTICS_KINDS:
        assert by_kind[str(kind)]["group"] is None and '"cluster":"c"' in by_kind[str(kind)]["data_json"]
    assert by_kind[str(OutputKind.QUARANTINE)]["group"] is not None
    assert by_kind[E.GROUP_LOADED]["group"] == "g"


def _prefix_literals(source: str) -> list[str]:
    """String literals in `source` that write the metric prefix themselves (docstrings and other
    triple-quoted prose aside)."""
    import io
    import tokenize
    return [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type == tokenize.STRING and f"{V.METRIC_PREFIX}_" in t.string
            and not t.string.lstrip("rRbBuUfF").startswith(('"""', "'''"))]


def test_dashboards_take_the_metric_prefix_from_the_vocabulary() -> None:
    """The dashboards and alert rules name every metric as f"{P}_..." (P: METRIC_PREFIX), so a
    prefix changed in state/vocabulary.py changes them too."""
    found = {str(path.relative_to(ROOT)): literals for path in sorted((ROOT / "dashboards").glob("*.py"))
             if (literals := _prefix_literals(path.read_text(encoding="utf-8")))}
    assert not found


def test_the_prefix_check_sees_a_literal() -> None:
    assert _prefix_literals('Q = "sum(rebalance_monitor_groups)"\n') == ['"sum(rebalance_monitor_groups)"']
    assert not _prefix_literals('Q = f"sum({P}_groups)"\n"""rebalance_monitor_groups in prose"""\n')
