"""The bed's log layouts and its shipper's rotation path on real brokers: 4.x with the log4j2
ECS JSON layout, 2.8 with the Strimzi pattern on log4j 1.x, both rolling server.log by size so
the tailer must follow a renamed file without losing or repeating a line."""
from __future__ import annotations

import json
import re

import pytest

from tests.support.kafkabed import KafkaCluster, LogShipper, wait_for

from .conftest import NEWEST_4X

pytestmark = pytest.mark.kafka
STRIMZI = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (INFO|WARN|ERROR|DEBUG) +\[[^\]]+\] \S+:\d+ - ")


@pytest.mark.parametrize("version,layout", [(NEWEST_4X, "json"), ("2.8.2", "strimzi4")])
def test_layout_and_rotation(version, layout, tmp_path):
    with KafkaCluster(version, brokers=1, workdir=tmp_path / "cluster", layout=layout,
                      rotate_bytes=30_000) as cluster:
        with LogShipper(cluster, "kafkabed-broker-logs", envelope=True) as shipper:
            tailer = shipper.tailers[1]
            n = 0

            def rotated():
                nonlocal n
                n += 1
                cluster.create_topic(f"layout-{n}", 3, 1)   # each topic logs a few KB
                return tailer.rotations >= 1
            wait_for(rotated, 120, f"server.log of Kafka {version} to roll over (size policy)", interval=0.2)
            current: list = []

            def shipped_in_order():
                """Every line of the new file shipped, in order (the broker may still be writing)."""
                nonlocal current
                current = cluster.server_log_path(1).read_text().splitlines()
                return [ln.text for ln in shipper.lines(1)][-len(current):] == current
            wait_for(shipped_in_order, 30, "the shipper to have shipped the new server.log in order")
            shipper.wait_acked()
        texts = [ln.text for ln in shipper.lines(1)]
        files = list(cluster.server_log_path(1).parent.glob("server.log*"))
        written = [ln for p in files for ln in p.read_text().splitlines()]
        assert set(texts) <= set(written), "shipped a line that no server.log file holds"
        assert all(ln.acked_ms and ln.error is None for ln in shipper.lines(1))
        if layout == "json":
            docs = [json.loads(t) for t in current]
            assert all("message" in d and "log.logger" in d for d in docs), docs[:2]
        else:
            assert sum(1 for t in current if STRIMZI.match(t)) > 0.9 * len(current), current[:3]


# ----------------------------------------------------------------------------- every layout at once
# What each layout's lines are reported as (rebalance_monitor_log_layout_info, docs/broker-logs.md).
REPORTED = {"strimzi4": "strimzi4", "strimzi3": "strimzi3", "padded": "default-padded",
            "location": "default-location", "pipe": "pipe-location", "cfk": "cfk", "json": "ecs-json",
            "jsonlayout": "log4j2-json"}


def _events(paths: list) -> tuple[list[tuple], dict, dict]:
    """The coordinator events of one broker log per broker (the replay's read -> parse path, no
    Spark): comparable tuples without line numbers, the layouts counted per file, and the lines by
    class over all files."""
    from streaming.logs.merge import LogMergeCursor
    from streaming.logs.step import LogSourceSpec, LogSourceStats, parse_log_rows, unwrap_rows
    from streaming.rows import EVENT_COLUMNS
    files = [{"path": str(p), "source_id": f"c:{i}", "tz": "UTC", "envelope": "auto"} for i, p in enumerate(paths)]
    cursor = LogMergeCursor(files)
    rows, _ = cursor.advance(cursor.initial(), 10**9)
    specs = {f["source_id"]: LogSourceSpec("c") for f in files}
    stats = LogSourceStats()
    out = [dict(zip(EVENT_COLUMNS, r)) for r in parse_log_rows(unwrap_rows(rows, specs), specs, stats=stats)]
    docs = [json.loads(r[-1]) for r in stats.rows()]
    classes: dict = {}
    for doc in docs:
        for name, n in doc["classes"].items():
            classes[name] = classes.get(name, 0) + n
    events = sorted((r["ts_ms"], r["broker"], r["kind"], r["group"], r["generation"], r["member_id"], r["reason"],
                     r["data_json"]) for r in out if r["kind"] not in ("end_of_input", "quarantine"))
    return events, {d["source"]: d["layouts"] for d in docs}, classes


@pytest.mark.parametrize("version", ["2.8.2", NEWEST_4X])
def test_every_layout_of_a_real_broker_gives_the_default_layouts_events(version, tmp_path):
    """Real brokers write server.log in Kafka's default layout and, through more appenders, the same
    lines in every other layout their log4j can write; a scenario with a crash-removal runs; every
    layout must give the default layout's events (at second precision for Strimzi 4.x's pattern)."""
    from tests.support.kafkabed import log4jconf
    from tests.support.kafkabed.matrix import run_scenario
    from tests.support.kafkabed.scenarios import SCENARIOS, Ctx, with_group
    family = "log4j2" if version.startswith("4.") else "log4j1"
    extra = tuple(name for name in log4jconf.layouts_of(family) if name != "default")
    scenario = next(s for s in SCENARIOS if s.name == "kill")
    with KafkaCluster(version, brokers=2, workdir=tmp_path / "cluster", extra_layouts=extra) as cluster:
        with LogShipper(cluster, "kafkabed-broker-logs") as shipper:
            ctx = with_group(Ctx(version, "", ""), scenario, "layouts")
            res = run_scenario(cluster, shipper, scenario, ctx, tmp_path / "out")
            assert res.passed, res.error
        brokers = sorted(cluster.brokers)
    # the cluster has stopped: every file is complete
    default, _, default_classes = _events([cluster.server_log_path(b) for b in brokers])
    kinds = {e[2] for e in default if e[3] == ctx.group}
    assert {"prepare_rebalance", "member_failed"} <= kinds, kinds
    for layout in extra:
        events, layouts, classes = _events([cluster.extra_log_path(b, layout) for b in brokers])
        expected = default
        if layout == "strimzi4":          # %d{yyyy-MM-dd HH:mm:ss}: no milliseconds
            expected = sorted((e[0] // 1000 * 1000,) + e[1:] for e in default)
        assert events == expected, layout
        # lines no catalog entry knows (Kafka wordings, not layouts) are the same in every layout
        assert classes.get("unknown_template", 0) == default_classes.get("unknown_template", 0), layout
        assert classes.get("unknown_layout", 0) == 0 and classes.get("unparseable", 0) == 0, (layout, classes)
        for source, counts in layouts.items():
            assert max(counts, key=counts.get) == REPORTED[layout], (layout, source, counts)
            assert not {"generic", "unknown"} & set(counts), (layout, source, counts)
