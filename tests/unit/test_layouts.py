"""Reading broker lines in every layout (streaming/logs/header.py, layout.py, envelope.py, timeutil.py).

Real lines: tests/fixtures/layouts/ holds what real Kafka 2.8.2 (log4j 1.2.17) and 4.4.0 (log4j2
2.25) brokers of the test bed wrote, at the same moments, through one appender per layout
(tests/e2e/kafka/test_bed_layouts.py runs the same comparison on the full files of a fresh run).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from state.events import Event
from streaming.logs import layout as L
from streaming.logs.envelope import unwrap
from streaming.logs.header import read_header, strip_prefixes
from streaming.logs.merge import LogMergeCursor, file_shape, line_ts
from streaming.logs.parser import OUTCOME_EVENTS, OUTCOME_NOT_COORDINATOR, OUTCOME_UNKNOWN_LAYOUT, parse_line_detailed
from streaming.logs.step import LogSourceSpec, LogSourceStats, parse_log_rows, unwrap_rows
from streaming.logs.timeutil import UTC, precision_ms, to_epoch_ms, zone
from streaming.quarantine import Quarantined
from streaming.rows import EVENT_COLUMNS
from tests.support.capture_expectations import FIXTURES

REAL = FIXTURES / "layouts"
BERLIN = zone("Europe/Berlin")
GC = "kafka.coordinator.group.GroupCoordinator"
REPORTED = {"default": "default", "strimzi4": "strimzi4", "strimzi3": "strimzi3", "padded": "default-padded",
            "location": "default-location", "pipe": "pipe-location", "cfk": "cfk", "json": "ecs-json",
            "jsonlayout": "log4j2-json"}


def _events(paths: list[Path]) -> tuple[list[tuple], dict]:
    files = [{"path": str(p), "source_id": f"c:{p.name}", "tz": "UTC", "envelope": "auto"} for p in paths]
    cursor = LogMergeCursor(files)
    rows, _ = cursor.advance(cursor.initial(), 10**9)
    specs = {f["source_id"]: LogSourceSpec("c") for f in files}
    stats = LogSourceStats()
    out = [dict(zip(EVENT_COLUMNS, r)) for r in parse_log_rows(unwrap_rows(rows, specs), specs, stats=stats)]
    assert [r for r in out if r["kind"] == "quarantine"] == []
    layouts = {json.loads(r[-1])["source"]: json.loads(r[-1])["layouts"] for r in stats.rows()}
    return sorted((r["ts_ms"], r["broker"], r["kind"], r["group"], r["generation"], r["member_id"], r["reason"],
                   r["data_json"]) for r in out if r["kind"] != "end_of_input"), layouts


def _whole_seconds(data_json: str | None) -> str:
    return json.dumps({**json.loads(data_json or "{}"), "ts_precision_ms": 1000}, separators=(",", ":"), sort_keys=True)


REAL_CASES = sorted((d.name, p.name.split("-", 1)[1][:-4]) for d in REAL.iterdir() if d.is_dir()
                    for p in d.glob("broker1-*.log"))


@pytest.mark.parametrize(("version", "layout"), REAL_CASES)
def test_real_lines_of_every_layout_give_the_default_layouts_events(version, layout):
    default, _ = _events(sorted((REAL / version).glob("broker*-default.log")))
    assert {"prepare_rebalance", "member_failed", "join_complete"} <= {e[2] for e in default}
    events, layouts = _events(sorted((REAL / version).glob(f"broker*-{layout}.log")))
    if layout == "strimzi4":
        # whole seconds, and the events say so (state/event_order.py places them)
        default = sorted((e[0] // 1000 * 1000,) + e[1:-1] + (_whole_seconds(e[-1]),) for e in default)
    assert events == default
    for counts in layouts.values():
        assert max(counts, key=counts.get) == REPORTED[layout] and "generic" not in counts, counts


def test_real_strimzi4_files_use_short_names_and_the_reader_keeps_their_coordinator_lines():
    paths = sorted((REAL / "kafka-4.4.0").glob("broker*-strimzi4.log"))
    assert not any(file_shape(str(p), "auto").full_names for p in paths)
    assert all(file_shape(str(p), "auto").full_names for p in (REAL / "kafka-4.4.0").glob("broker*-json.log"))


# ----------------------------------------------------------------------------- one line each
LINE = "[GroupCoordinator 2]: Stabilized group g1 generation 5 (__consumer_offsets-12) with 1 members"


@pytest.mark.parametrize(("line", "layout", "ts", "level", "logger"), [
    (f"[2026-11-21 19:21:26,163] INFO {LINE} ({GC})", "default", "2026-11-21 19:21:26,163", "INFO", GC),
    (f"[2026-11-21 19:21:26,163] INFO  {LINE} ({GC})", "default-padded", "2026-11-21 19:21:26,163", "INFO", GC),
    (f"[2026-11-21 19:21:26,163] WARN {LINE} ({GC}:68)", "default-location", "2026-11-21 19:21:26,163", "WARN", GC),
    (f"2026-11-21 19:21:26 INFO  [executor-Rebalance] GroupCoordinator:68 - {LINE}", "strimzi4",
     "2026-11-21 19:21:26", "INFO", "GroupCoordinator"),
    (f"2026-11-21 19:21:26,163 INFO {LINE} ({GC}) [executor-Rebalance]", "strimzi3", "2026-11-21 19:21:26,163",
     "INFO", GC),
    (f"2026-11-21T19:21:26,163 INFO {LINE} ({GC}) [executor-Rebalance]", "strimzi3", "2026-11-21T19:21:26,163",
     "INFO", GC),
    (f"[INFO] 2026-11-21 19:21:26,163 [executor-Rebalance] {GC} info - app=kafka, clusterId=Mk3, server=0 - {LINE}",
     "cfk", "2026-11-21 19:21:26,163", "INFO", GC),
    (f"2026-11-21 19:21:26,163 | INFO  | [executor-Rebalance] | {LINE} | {GC} (GroupCoordinator.scala:68)",
     "pipe-location", "2026-11-21 19:21:26,163", "INFO", GC),
    (f"2026-11-21 19:21:26.163 | ERROR | {LINE} | {GC}", "pipe", "2026-11-21 19:21:26.163", "ERROR", GC),
    (f"2026-11-21T19:21:26.163456789Z stdout F [2026-11-21 19:21:26,163] INFO {LINE} ({GC})", "cri+default",
     "2026-11-21 19:21:26,163", "INFO", GC),
    (f"2026-11-21T19:21:26.163456789Z [2026-11-21 19:21:26,163] INFO {LINE} ({GC})", "kubectl+default",
     "2026-11-21 19:21:26,163", "INFO", GC),
    (f"kafka_1  | [2026-11-21 19:21:26,163] INFO {LINE} ({GC})", "compose+default", "2026-11-21 19:21:26,163",
     "INFO", GC),
    (f"kafka-broker-1     | 2026-11-21T19:21:26.163Z [2026-11-21 19:21:26,163] INFO {LINE} ({GC})",
     "compose+kubectl+default", "2026-11-21 19:21:26,163", "INFO", GC),
    (f"Nov 21 19:21:26 host1 kafka[1234]: [2026-11-21 19:21:26,163] INFO {LINE} ({GC})", "syslog+default",
     "2026-11-21 19:21:26,163", "INFO", GC),
    (f"<14>1 2026-11-21T19:21:26.163Z host1 kafka 1234 - - [2026-11-21 19:21:26,163] INFO {LINE} ({GC})",
     "syslog+default", "2026-11-21 19:21:26,163", "INFO", GC),
    # a layout no table lists: read by position from the coordinator prefix on
    (f"<I> 2026-11-21 19:21:26.163+01:00 INFO ~ {LINE} ~ ({GC})", "generic", "2026-11-21 19:21:26.163+01:00",
     "INFO", GC),
])
def test_header_of_each_layout(line, layout, ts, level, logger):
    header = read_header(line)
    assert header is not None
    assert (header.layout, header.ts, header.level, header.logger) == (layout, ts, level, logger)
    parsed = parse_line_detailed(line, source_id="f", seq=1, tz=UTC)
    assert parsed.outcome == OUTCOME_EVENTS and parsed.layout == layout
    assert isinstance(parsed.result, list)
    assert parsed.result[0].broker == 2 and parsed.result[0].kind == "join_complete"


def test_prefix_time_is_used_when_the_line_has_none():
    line = f"2026-11-21T19:21:26.163Z stdout F INFO ~ {LINE}"
    header = read_header(line)
    assert header is not None and (header.layout, header.ts) == ("cri+generic", "2026-11-21T19:21:26.163Z")
    assert strip_prefixes(line)[0] == ("cri",)


@pytest.mark.parametrize(("text", "tz", "ms"), [
    ("2026-11-21 19:21:26,163", UTC, 1795288886163),
    ("2026-11-21 19:21:26.163", UTC, 1795288886163),
    ("2026-11-21T19:21:26,163", UTC, 1795288886163),
    ("2026-11-21 19:21:26", UTC, 1795288886000),
    ("2026-11-21 20:21:26,163", BERLIN, 1795288886163),           # zone-less: broker_timezone
    ("2026-11-21T19:21:26.163Z", BERLIN, 1795288886163),          # a zone of its own wins
    ("2026-11-21T20:21:26.163456789+01:00", UTC, 1795288886163),  # RFC 3339, nanoseconds truncated
    ("2026-11-21T14:21:26.1-0500", UTC, 1795288886100),
    ("1795288886163", BERLIN, 1795288886163),                     # epoch ms (%d{UNIX_MILLIS}, JSON)
])
def test_times_in_every_format(text, tz, ms):
    assert to_epoch_ms(text, tz) == ms


@pytest.mark.parametrize(("text", "precision"), [
    ("2026-11-21 19:21:26,163", 1), ("2026-11-21T20:21:26.163456789+01:00", 1), ("1795288886163", 1),
    ("2026-11-21 19:21:26", 1000), ("2026-11-21T19:21:26Z", 1000), ("2026-11-21T14:21:26.1-0500", 100),
    ("2026-11-21 19:21:26,16", 10),
])
def test_a_time_says_how_many_milliseconds_it_spans(text, precision):
    assert precision_ms(text) == precision


def test_a_whole_second_line_says_so_in_its_event():
    def event(line: str) -> Event:
        result = parse_line_detailed(line, source_id="b1", seq=1, tz=UTC).result
        assert isinstance(result, list) and len(result) == 1
        return result[0]
    ev = event(f"2026-11-21 19:21:26 INFO  [executor-Rebalance] GroupCoordinator:68 - {LINE}")
    assert (ev.ts_ms, ev.data["ts_precision_ms"]) == (1795288886000, 1000)
    assert "ts_precision_ms" not in event(f"[2026-11-21 19:21:26,163] INFO {LINE} ({GC})").data


@pytest.mark.parametrize("text", ["2026-11-21 19:61:26", "2026-11-21 19:21:61", "21/11/2026 19:21:26", "17952888",
                                  "2026-11-21T19:21:26.163Q"])
def test_bad_times_raise(text):
    with pytest.raises(ValueError):
        to_epoch_ms(text, UTC)


# ----------------------------------------------------------------------------- loggers and families
def test_every_coordinator_logger_of_the_template_table_has_its_short_name():
    """Short logger names (`%c{1}`) map to the families their full names belong to, and every one
    passes the marker filters of the JVM and the replay reader."""
    loggers = {json.loads(line)["logger"] for line in (Path(__file__).parents[1] / "data" /
                                                       "coordinator_templates.jsonl").read_text().splitlines()}
    assert len(loggers) > 20
    for logger in sorted(loggers):
        family = L.full_logger_family(logger)
        short = logger.rsplit(".", 1)[-1]
        assert family is not None, logger
        assert family in L.SHORT_LOGGER_FAMILIES.get(short, ()), (logger, short)
        assert L.has_coordinator_marker(logger) and L.has_coordinator_marker(f" {short}:66 - "), logger


@pytest.mark.parametrize(("logger", "message", "families"), [
    ("GroupCoordinator", "[GroupCoordinator 1]: Stabilized group g", ("scala",)),
    ("GroupMetadataManager", "[GroupMetadataManager brokerId=1] Finished loading", ("scala",)),
    ("GroupMetadataManager", "[Group Metadata Manager on Broker 1]: Removed 0 expired offsets", ("scala",)),
    ("GroupMetadataManager", "[GroupCoordinator id=1 topic=__consumer_offsets partition=3] [GroupId g] x", ("java",)),
    ("GroupCoordinator", "no prefix at all", ("scala", "java")),
    ("CoordinatorRuntime", "[GroupCoordinator id=1] x", ("java",)),
    ("GroupMetadata$", "Group leader ...", ("scala",)),
    ("kafka.coordinator.GroupCoordinator", "[GroupCoordinator 1]: x", ("scala",)),      # 0.10.2
    ("kafka.coordinator.GroupMetadataManager", "[Group Metadata Manager on Broker 1]: x", ("scala",)),
    ("kafka.coordinator.transaction.TransactionCoordinator", "[TransactionCoordinator id=1] x", ()),
    ("KafkaApis", "[GroupCoordinator 1]: not ours", ()),
    (None, "[GroupCoordinator id=1] x", ("java",)),
])
def test_logger_families(logger, message, families):
    assert L.logger_families(logger, message) == families


def test_old_group_metadata_manager_prefix_names_the_broker():
    assert L.split_coordinator_prefix("[Group Metadata Manager on Broker 3]: Removed 2 expired offsets in 1 "
                                      "milliseconds.") == (3, None, "Removed 2 expired offsets in 1 milliseconds.")


# ----------------------------------------------------------------------------- not understood
def test_a_coordinator_line_in_an_unknown_layout_is_counted_as_such():
    line = f"@@ 19:21:26 {LINE} {GC}"        # no date: no time to give an event
    parsed = parse_line_detailed(line, source_id="f", seq=4, tz=UTC)
    assert parsed.outcome == OUTCOME_UNKNOWN_LAYOUT and isinstance(parsed.result, Quarantined)
    assert parsed.result.reason == "unparseable_line"
    assert "layout is not understood" in parsed.result.detail
    odd = "@@ 2026-11-21 19:21:26 KafkaServer started"
    assert parse_line_detailed(odd, source_id="f", seq=4, tz=UTC).outcome == OUTCOME_NOT_COORDINATOR


def test_first_line_of_a_multi_line_message_has_its_layout_and_time():
    for line, layout in [("[2026-11-21 19:21:26,163] INFO KafkaConfig values: ", "default"),
                         ("[2026-11-21 19:21:26,163] INFO  KafkaConfig values: ", "default-padded"),
                         ("2026-11-21 19:21:26,163 INFO KafkaConfig values: ", "strimzi3"),
                         ("2026-11-21 19:21:26,163 | INFO  | [main] | KafkaConfig values: ", "pipe")]:
        header = read_header(line)
        assert header is not None and (header.layout, header.logger) == (layout, None)
        assert line_ts(line, UTC, False) == 1795288886163


# ----------------------------------------------------------------------------- JSON layouts
ECS = {"@timestamp": "2026-11-21T19:21:26.163Z", "ecs.version": "1.2.0", "log.level": "INFO", "message": LINE,
       "process.thread.name": "executor-Rebalance", "log.logger": GC}
JSONLAYOUT = {"instant": {"epochSecond": 1795288886, "nanoOfSecond": 163999999}, "thread": "t", "level": "INFO",
              "loggerName": GC, "message": LINE, "endOfBatch": False}


@pytest.mark.parametrize(("raw", "layout"), [
    (json.dumps(ECS), "ecs-json"),
    (json.dumps({**ECS, "log.level": None, "log": {"level": "info", "logger": GC}}), "ecs-json"),
    (json.dumps(JSONLAYOUT), "log4j2-json"),
    (json.dumps({"timeMillis": 1795288886163, "level": "INFO", "loggerName": GC, "message": LINE}), "log4j2-json"),
    (json.dumps({"@timestamp": "2026-11-21T20:21:26.163+01:00", "level": "INFO", "logger_name": GC,
                 "message": LINE}), "logstash-json"),
    ("2026-11-21T19:21:26.2Z stdout F " + json.dumps(ECS), "ecs-json"),
    (json.dumps({"log": json.dumps(JSONLAYOUT) + "\n", "stream": "stdout"}), "envelope+log4j2-json"),
])
def test_json_layouts_give_message_and_fields(raw, layout):
    u = unwrap(raw)
    assert u.line == LINE and u.fields is not None and u.fields.layout == layout
    parsed = parse_line_detailed(u.line, source_id="f", seq=1, tz=BERLIN, fields=u.fields)
    assert parsed.outcome == OUTCOME_EVENTS and isinstance(parsed.result, list)
    assert parsed.result[0].ts_ms == 1795288886163
    assert line_ts(raw, BERLIN, raw.startswith("{")) == 1795288886163


def test_a_shipper_document_that_keeps_the_whole_line_is_read_from_the_line():
    """Fields added by a shipper do not hide a complete log4j line in `message`."""
    whole = f"[2026-11-21 19:21:26,163] INFO {LINE} ({GC})"
    u = unwrap(json.dumps({"message": whole, "log.level": "INFO", "log.logger": GC}))
    assert u.line is not None
    parsed = parse_line_detailed(u.line, source_id="f", seq=1, tz=UTC, fields=u.fields)
    assert parsed.outcome == OUTCOME_EVENTS and parsed.layout == "default"
