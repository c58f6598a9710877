"""The bed's log layouts and its shipper's rotation path on real brokers: 4.x with the log4j2
ECS JSON layout, 2.8 with the Strimzi pattern on log4j 1.x, both rolling server.log by size so
the tailer must follow a renamed file without losing or repeating a line."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from testbed.bed import KafkaCluster, LogShipper, wait_for

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


_HOURLY_ROLL = re.compile(r"\.\d{4}-\d{2}-\d{2}-\d{2}$")


def _whole(path: Path, scratch: Path) -> Path:
    """The broker's whole log: Kafka's appenders roll server.log every hour (server.log.<hour>),
    so a run over an hour's end left its first lines in the rolled file (CI: no events at all)."""
    rolled = sorted(p for p in path.parent.glob(path.name + ".*") if _HOURLY_ROLL.search(p.name))
    if not rolled:
        return path
    whole = scratch / ("whole" + str(path).replace("/", "-"))
    whole.write_bytes(b"".join(p.read_bytes() for p in [*rolled, path]))
    return whole


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


def _whole_seconds(data_json: str | None) -> str:
    return json.dumps({**json.loads(data_json or "{}"), "ts_precision_ms": 1000}, separators=(",", ":"), sort_keys=True)


_ENTRY_START = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ")
_MILLIS = re.compile(r"^(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d{3}\]")


def _topic_rows(bootstrap: str, topic: str) -> list[tuple]:
    """Every record of a log topic as the live source reads it (streaming/spark/sources/kafka.py):
    (source id, offset, line, record time, eof). The source id is `logs-<partition>` for every
    layout's topic, so records that name their source compare across topics."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkabed-layouts", "enable.auto.commit": False,
                  "log_level": 2})
    rows: list[tuple] = []
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        ends = {p: hi for p, hi in ends.items() if hi > 0}
        c.assign([TopicPartition(topic, p, 0) for p in ends])
        done: set[int] = set()

        def read() -> bool:
            for msg in c.consume(500, 0.5):
                if msg.error() is None:
                    partition, offset, value = msg.partition(), msg.offset(), msg.value()
                    assert partition is not None and offset is not None and value is not None, msg
                    rows.append((f"logs-{partition}", offset, value.decode("utf-8", "replace"),
                                 msg.timestamp()[1], False))
                    if offset + 1 >= ends[partition]:
                        done.add(partition)
            return len(done) == len(ends)
        wait_for(read, 60, f"log topic {topic} to be read to its end", interval=0)
    finally:
        c.close()
    return sorted(rows, key=lambda r: (r[0], r[1]))


def _until(rows: list[tuple], cut_ms: int, json_rows: bool) -> list[tuple]:
    """The rows of entries written at or before cut_ms (continuation lines follow their entry)."""
    from streaming.logs.merge import line_ts
    from streaming.logs.timeutil import UTC
    out, keep, source = [], True, None
    for row in rows:
        if row[0] != source:
            source, keep = row[0], True
        ts = line_ts(row[2], UTC, json_rows)
        if ts is not None:
            keep = ts <= cut_ms
        if keep:
            out.append(row)
    return out


def _records(rows: list[tuple]) -> tuple[list[str], list[str]]:
    """Rebalance and removal records of log-topic rows through the live path's envelope and parse
    steps and the state machine (no Spark): sorted JSON texts."""
    from state.local import run_events
    from state.outputs import OutputKind
    from streaming.logs.step import LogSourceSpec, parse_log_rows, unwrap_rows
    from streaming.rows import EVENT_KIND, row_to_event
    spec = LogSourceSpec("bed")
    event_rows = parse_log_rows(unwrap_rows(rows, {}, spec), {}, default_spec=spec)
    out = run_events([row_to_event(list(r)) for r in event_rows if r[EVENT_KIND] != str(OutputKind.QUARANTINE)])

    def dump(records: list[dict]) -> list[str]:
        return sorted(json.dumps(r, sort_keys=True, separators=(",", ":")) for r in records)
    return dump(out[OutputKind.REBALANCE]), dump(out[OutputKind.REMOVAL])


def _json_seq(rows: list[tuple], default_rows: list[tuple]) -> list[tuple]:
    """A JSON layout writes one document per entry: its record k of a partition is the entry that
    starts at the k-th entry start of the default layout's partition; give it that offset."""
    starts: dict[str, list[int]] = {}
    for source, offset, line, *_ in default_rows:
        if _ENTRY_START.match(line):
            starts.setdefault(source, []).append(offset)
    counts = {source: sum(1 for r in rows if r[0] == source) for source in starts}
    assert counts == {source: len(v) for source, v in starts.items()}, "JSON documents != default entries"
    return [(r[0], starts[r[0]][r[1]], *r[2:]) for r in rows]


@pytest.mark.parametrize("version", ["2.8.2", NEWEST_4X])
def test_every_layout_of_a_real_broker_gives_the_default_layouts_events(version, tmp_path):
    """Real brokers write server.log in Kafka's default layout and, through more appenders, the same
    lines in every other layout their log4j can write; a scenario with a crash-removal runs; every
    layout must give the default layout's events (at second precision for Strimzi 4.x's pattern),
    read from the files and, shipped line by line through a log topic per layout, the default
    layout's rebalance and removal records byte for byte."""
    from testbed.bed import log4jconf
    from testbed.bed.running import run_scenario
    from testbed.bed.scenarios import SCENARIOS, Ctx, with_group
    from testbed.bed.shipper import now_ms
    family = "log4j2" if version.startswith("4.") else "log4j1"
    extra = tuple(name for name in log4jconf.layouts_of(family) if name != "default")
    scenario = next(s for s in SCENARIOS if s.name == "kill")
    with KafkaCluster(version, brokers=2, workdir=tmp_path / "cluster", extra_layouts=extra) as cluster:
        brokers = sorted(cluster.brokers)
        with LogShipper(cluster, "kafkabed-broker-logs") as shipper:
            layout_shippers = {layout: LogShipper(cluster, f"kafkabed-logs-{layout}",
                                                  paths={b: cluster.extra_log_path(b, layout) for b in brokers})
                               for layout in extra}
            try:
                for s in layout_shippers.values():
                    s.start()
                ctx = with_group(Ctx(version, "", ""), scenario, "layouts")
                res = run_scenario(cluster, shipper, scenario, ctx, tmp_path / "out")
                assert res.passed, res.error
                # Compare the entries up to the end of the second the scenario ended in (whole
                # seconds: Strimzi 4.x's layout has no milliseconds), once that second is over, so
                # every file holds them all, the scenario's last lines included. (The cut was the
                # second before: an expiry and the scenario's end in one second left the expiry out.)
                cut_ms = (now_ms() // 1000 + 1) * 1000 - 1
                wait_for(lambda: now_ms() > cut_ms, 5, "the scenario's last second to end", interval=0.05)
                shippers = {"default": shipper, **layout_shippers}
                written = {(name, b): len((cluster.server_log_path(b) if name == "default" else
                                           cluster.extra_log_path(b, name)).read_text().splitlines())
                           for name in shippers for b in brokers}
                wait_for(lambda: all(len(s.lines(b)) >= written[(name, b)] for name, s in shippers.items()
                                     for b in brokers), 60, "every layout's shipper to ship what its file holds")
                for s in shippers.values():
                    s.wait_acked()
            finally:
                for s in layout_shippers.values():
                    s.stop()
            topic_rows = {name: _topic_rows(cluster.bootstrap, s.topic) for name, s in shippers.items()}
    # the cluster has stopped: every file is complete
    default, _, default_classes = _events([_whole(cluster.server_log_path(b), tmp_path) for b in brokers])
    kinds = {e[2] for e in default if e[3] == ctx.group}
    assert {"prepare_rebalance", "member_failed"} <= kinds, kinds
    default_rows = _until(topic_rows["default"], cut_ms, False)
    reference = _records(default_rows)
    # the default layout with `%d{yyyy-MM-dd HH:mm:ss}`: whole seconds, read as such (state/event_order.py)
    seconds = _records([(r[0], r[1], _MILLIS.sub(r"\1]", r[2]), *r[3:]) for r in default_rows])
    assert any(ctx.group in r and "heartbeat_expiry" in r for r in reference[1]), reference[1]
    for layout in extra:
        events, layouts, classes = _events([_whole(cluster.extra_log_path(b, layout), tmp_path) for b in brokers])
        expected = default
        if layout == "strimzi4":          # %d{yyyy-MM-dd HH:mm:ss}: no milliseconds, and the events say so
            expected = sorted((e[0] // 1000 * 1000,) + e[1:-1] + (_whole_seconds(e[-1]),) for e in default)
        assert events == expected, layout
        # lines no catalog entry knows (Kafka wordings, not layouts) are the same in every layout
        assert classes.get("unknown_template", 0) == default_classes.get("unknown_template", 0), layout
        assert classes.get("unknown_layout", 0) == 0 and classes.get("unparseable", 0) == 0, (layout, classes)
        for source, counts in layouts.items():
            assert max(counts, key=counts.get) == REPORTED[layout], (layout, source, counts)
            assert not {"generic", "unknown"} & set(counts), (layout, source, counts)
        # through the log topic
        json_layout = layout in ("json", "jsonlayout")
        rows = _until(topic_rows[layout], cut_ms, json_layout)
        if json_layout:
            rows = _json_seq(rows, default_rows)
        assert _records(rows) == (seconds if layout == "strimzi4" else reference), layout
