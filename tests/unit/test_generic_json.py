"""Generic JSON lines (streaming/logs/envelope.py `generic_json_fields`, layout `generic-json`): a
document with a message and a time field that no named JSON layout claims, e.g. log4j2's
JsonTemplateLayout with Strimzi's test template `{"instant": "...Z", "someConstant": 1, "message": ...}`.

The whole captures in that template: tests/unit/test_layouts_replay.py (`strimzi-json`); every
template of the coordinator table in it: tests/unit/test_coordinator_templates.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.logs.envelope import GENERIC_JSON, epoch_millis, unwrap
from streaming.logs.merge import file_shape, line_ts
from streaming.logs.parser import (
    OUTCOME_CONTINUATION, OUTCOME_DEBUG, OUTCOME_EVENTS, OUTCOME_IGNORED, OUTCOME_NOT_COORDINATOR,
    OUTCOME_UNKNOWN_LAYOUT, OUTCOME_UNPARSEABLE, LineParse, parse_line_detailed
)
from streaming.logs.step import LogSourceSpec, LogSourceStats, parse_log_rows, unwrap_rows
from streaming.logs.timeutil import UTC, zone
from streaming.quarantine import Quarantined
from streaming.rows import EVENT_COLUMNS

BERLIN = zone("Europe/Berlin")
GC = "kafka.coordinator.group.GroupCoordinator"
GMM = "org.apache.kafka.coordinator.group.GroupMetadataManager"
# A Scala coordinator message with its prefix (the broker and the coordinator are in it)
LINE = "[GroupCoordinator 2]: Stabilized group g1 generation 5 (__consumer_offsets-12) with 1 members"
JAVA_LINE = ("[GroupCoordinator id=2 topic=__consumer_offsets partition=12] [GroupId g1] Member m1 joins the "
             "consumer group using the consumer protocol.")
# A recognised message without a prefix (kafka.coordinator.group.GroupMetadata, no fact)
NO_PREFIX = ("Group leader [member.id: c-1-ab, group.instance.id: None] failed to join before rebalance timeout, "
             "while new leader MemberMetadata(memberId=c-2) was elected.")
MS = 1795288886163          # 2026-11-21 19:21:26.163 UTC
STRIMZI = {"instant": "2026-11-21T19:21:26.163Z", "someConstant": 1, "message": LINE}


def read(doc: dict | str, tz=UTC) -> tuple[LineParse, str | None]:
    """The parse of a document, and the layout of its fields."""
    u = unwrap(doc if isinstance(doc, str) else json.dumps(doc))
    assert u.line is not None, u
    parsed = parse_line_detailed(u.line, source_id="f", seq=1, tz=tz, fields=u.fields)
    return parsed, None if u.fields is None else u.fields.layout


# ----------------------------------------------------------------------------- every time form
@pytest.mark.parametrize(("doc", "ms"), [
    (STRIMZI, MS),                                                                      # Strimzi's template
    ({"instant": {"epochSecond": 1795288886, "nanoOfSecond": 163999999}, "message": LINE}, MS),
    ({"instant": 1795288886163, "message": LINE}, MS),
    ({"@timestamp": "2026-11-21T20:21:26.163+01:00", "message": LINE}, MS),
    ({"time": "2026-11-21T19:21:26.163456789Z", "msg": LINE}, MS),
    ({"timestamp": "2026-11-21 20:21:26,163", "message": LINE}, MS),                    # zone-less: BERLIN
    ({"timeMillis": MS, "message": LINE}, MS),
    ({"timestamp": 1795288886, "message": LINE}, MS - 163),                             # epoch seconds
    ({"time": 1795288886.163, "message": LINE}, MS),                                    # ... with a fraction
    ({"timestamp": MS, "message": LINE}, MS),                                           # epoch milliseconds
    ({"time": str(MS), "log": LINE + "\n"}, MS),                                        # ... as a text
    ({"time": "1795288886.163", "message": LINE}, MS),
    ({"time": 1.795288886163e9, "message": LINE}, MS),
    ({"instant": "not a time", "time": MS, "message": LINE}, MS),                       # the first that reads
])
def test_each_time_form_gives_the_events_time(doc, ms):
    parsed, layout = read(doc, BERLIN)
    assert layout == GENERIC_JSON
    assert parsed.outcome == OUTCOME_EVENTS and parsed.layout == GENERIC_JSON, parsed
    assert isinstance(parsed.result, list)
    event = parsed.result[0]
    assert (event.ts_ms, event.kind, event.group, event.broker) == (ms, "join_complete", "g1", 2)
    # the replay reader orders the rows by the same time
    assert line_ts(json.dumps(doc), BERLIN, True) == ms


@pytest.mark.parametrize(("value", "ms"), [
    (1795288886, "1795288886000"), (1795288886.5, "1795288886500"), ("1795288886", "1795288886000"),
    (1795288886163, "1795288886163"), (1795288886163.9, "1795288886163"), ("1795288886163", "1795288886163"),
    (1000000000, "1000000000000"), (9999999999.999, "9999999999999"), (10**12, "1000000000000"),
    # neither: a duration, a year, microseconds, nanoseconds, between the ranges, negative, not a number
    (35, None), (2026, None), (1795288886163000, None), (1795288886163000000, None), (10**11, None),
    (-1795288886, None), ("-1795288886", None), (" 1795288886", None), ("1795288886s", None), (True, None),
    (None, None), ([1795288886], None), ({"epochSecond": 1795288886}, None), (float("nan"), None),
    (float("inf"), None), ("1e400", None), (10**400, None),
])
def test_epoch_seconds_and_milliseconds_are_told_apart_by_magnitude(value, ms):
    assert epoch_millis(value) == ms


def test_every_millisecond_of_a_fractional_second_survives_the_double():
    for millis in range(1000):
        assert epoch_millis(json.loads(f"1795288886.{millis:03d}")) == str(1795288886000 + millis)


# ----------------------------------------------------------------------------- level and logger
@pytest.mark.parametrize(("extra", "level"), [
    ({"level": "WARN"}, "WARN"), ({"level": "warning"}, "WARN"), ({"severity": "ERROR"}, "ERROR"),
    ({"log.level": "info"}, "INFO"), ({"log": {"level": "Error"}}, "ERROR"),
    ({"level": "I", "severity": "WARNING"}, "WARN"),      # a word that is no level: the next field
    ({"level": 30}, None), ({"level": "verbose"}, None), ({}, None),
])
def test_level_fields(extra, level):
    u = unwrap(json.dumps({**STRIMZI, **extra}))
    assert u.fields is not None and u.fields.level == level
    parsed = parse_line_detailed(LINE, source_id="f", seq=1, tz=UTC, fields=u.fields)
    assert parsed.outcome == OUTCOME_EVENTS        # without a level: taken as INFO


def test_a_debug_level_field_keeps_its_line_from_being_read_as_a_fact():
    parsed, _ = read({**STRIMZI, "level": "DEBUG"})
    assert parsed.outcome == OUTCOME_DEBUG


@pytest.mark.parametrize("key", ["loggerName", "logger", "log.logger", "logger_name"])
def test_logger_fields_make_a_message_without_prefix_a_coordinator_line(key):
    doc = {"timestamp": MS, "message": NO_PREFIX}        # (with a `level`, loggerName and logger_name
    named = {**doc, key: "kafka.coordinator.group.GroupMetadata"}   # would be log4j2-json, logstash-json)
    parsed, layout = read(named)
    assert (layout, parsed.outcome, parsed.logger) == (GENERIC_JSON, OUTCOME_IGNORED,
                                                       "kafka.coordinator.group.GroupMetadata")
    assert parsed.entry is not None
    # without the logger the message says nothing of a coordinator: not a coordinator line
    assert read(doc)[0].outcome == OUTCOME_NOT_COORDINATOR
    # a logger that is not a coordinator's
    assert read({**doc, key: "kafka.server.KafkaApis"})[0].outcome == OUTCOME_NOT_COORDINATOR


def test_a_short_logger_name_and_a_java_prefix():
    parsed, _ = read({"time": MS, "logger": "GroupMetadataManager", "message": JAVA_LINE})
    assert parsed.outcome == OUTCOME_EVENTS and isinstance(parsed.result, list)
    assert (parsed.result[0].kind, parsed.result[0].broker) == ("consumer_member_joined", 2)
    assert parsed.result[0].data["offsets_partition"] == 12


def test_a_share_coordinator_line_is_not_a_group_coordinator_line():
    parsed, _ = read({"time": MS, "logger": "CoordinatorRuntime",
                      "message": "[ShareCoordinator id=2] Finished loading of metadata"})
    assert parsed.outcome == OUTCOME_NOT_COORDINATOR


# ----------------------------------------------------------------------------- missing or odd fields
@pytest.mark.parametrize("doc", [
    {"message": LINE},                                          # no time field at all
    {"time": 35, "message": LINE},                              # a duration, not a time
    {"time": "yesterday", "message": LINE},
    {"timestamp": -1795288886, "message": LINE},
    {"timestamp": True, "message": LINE},
    {"timestamp": 1e20, "message": LINE},
    {"time": [MS], "message": LINE},
    {"time": {"epochSecond": 1795288886}, "message": LINE},     # that object only in `instant`
    {"instant": {"epochSecond": "x"}, "message": LINE},
    {"instant": {"epochSecond": 10**20}, "message": LINE},
    {"instant": None, "@timestamp": None, "message": LINE},
])
def test_a_message_without_a_readable_time_is_no_generic_json(doc):
    """Its message is read as a line, as before: a coordinator message without a time is a line
    whose layout is not understood, quarantined with that one reason."""
    parsed, layout = read(doc)
    assert layout is None
    assert parsed.outcome == OUTCOME_UNKNOWN_LAYOUT and isinstance(parsed.result, Quarantined)
    assert parsed.result.reason == "unparseable_line" and "layout is not understood" in parsed.result.detail


def test_a_time_that_starts_like_a_date_but_is_none_is_a_bad_timestamp():
    parsed, layout = read({"time": "2026-13-45T99:99:99Z", "message": LINE})
    assert layout == GENERIC_JSON and parsed.outcome == OUTCOME_UNPARSEABLE
    assert isinstance(parsed.result, Quarantined) and "bad timestamp" in parsed.result.detail


def test_a_document_without_a_message_says_so():
    u = unwrap(json.dumps({"instant": "2026-11-21T19:21:26.163Z", "someConstant": 1, "text": LINE}))
    assert u.line is None and u.fields is None
    assert u.error is not None and "no string field message/log/msg" in u.error


def test_other_lines_of_a_generic_json_source_are_read_in_its_layout():
    parsed, _ = read({**STRIMZI, "message": "[KafkaServer id=2] Starting controlled shutdown"})
    assert (parsed.outcome, parsed.layout) == (OUTCOME_NOT_COORDINATOR, GENERIC_JSON)


ODD = ['{"instant": {}, "message": "[GroupCoordinator 1]: x"}', '{"time": NaN, "message": "[GroupCoordinator 1]: x"}',
       '{"time": Infinity, "message": "[GroupCoordinator 1]: x"}', '{"time": 1e999, "log": "GroupCoordinator"}',
       '{"timestamp": 1795288886163, "message": ""}', '{"timestamp": 1795288886163, "message": "\\n"}',
       '{"timestamp": 1795288886163, "message": "[GroupCoordinator id=1 topic=__consumer_offsets partition=x] y"}',
       '{"timestamp": 1795288886163, "level": {"x": 1}, "logger": ["GroupCoordinator"], "message": "GroupCoordinator"}',
       '{"timestamp": 1795288886163, "logger": "GroupCoordinator", "message": "[GroupCoordinator 1]: Unknown words"}',
       '{"timestamp": 1795288886163, "message": "\\tat kafka.coordinator.group.GroupCoordinator.f(GC.scala:1)"}',
       '{"time": "2026-11-21T19:21:26Z", "message": {"text": "[GroupCoordinator 1]: x"}}',
       '{"time": "2026-11-21T19:21:26Z"}', '{"time": "2026-11-21T19:21:26Z", "message": "GroupCoordinator"',
       '[{"time": "2026-11-21T19:21:26Z", "message": "GroupCoordinator"}]']


def test_odd_documents_are_counted_never_a_traceback():
    specs = {"s": LogSourceSpec("c")}
    rows = [("s", i, raw, MS, False) for i, raw in enumerate(ODD, start=1)]
    stats = LogSourceStats()
    out = [dict(zip(EVENT_COLUMNS, r)) for r in parse_log_rows(unwrap_rows(rows, specs), specs, stats=stats)]
    assert all(r["kind"] == "quarantine" for r in out)
    classes = json.loads(stats.rows()[0][-1])["classes"]
    assert sum(classes.values()) == len(ODD)
    assert classes.get("coordinator", 0) == 0


# ----------------------------------------------------------------------------- shippers' documents
def test_a_whole_line_in_a_shippers_message_keeps_its_own_time_level_and_logger():
    """Filebeat's `@timestamp` is when it read the line: the line's own header wins."""
    line = f"2026-11-21 19:21:26 WARN  [executor-Rebalance] GroupCoordinator:68 - {LINE}"
    doc = {"@timestamp": "2026-11-21T19:30:00.000Z", "message": line, "host": {"name": "kafka-2"}}
    parsed, layout = read(doc)
    assert layout == GENERIC_JSON and parsed.layout == "strimzi4" and parsed.logger == "GroupCoordinator"
    assert isinstance(parsed.result, list) and parsed.result[0].ts_ms == MS - 163
    assert line_ts(json.dumps(doc), UTC, True) == MS - 163
    # Kafka's default layout inside it takes the fast path
    default = {**doc, "message": f"[2026-11-21 19:21:26,163] INFO {LINE} ({GC})"}
    assert read(default)[0].layout == "default"


def test_a_docker_json_file_line_without_a_time_takes_the_documents():
    doc = {"log": LINE + "\n", "stream": "stdout", "time": "2026-11-21T19:21:26.163456789Z"}
    parsed, layout = read(doc)
    assert layout == parsed.layout == GENERIC_JSON
    assert isinstance(parsed.result, list) and parsed.result[0].ts_ms == MS
    trace = {**doc, "log": "\tat kafka.coordinator.group.GroupCoordinator.f(GroupCoordinator.scala:1)\n"}
    assert read(trace)[0].outcome == OUTCOME_CONTINUATION


def test_a_generic_json_document_inside_a_shippers_message():
    outer = {"log": json.dumps(STRIMZI) + "\n", "stream": "stdout", "time": "2026-11-21T19:30:00Z",
             "kubernetes": {"pod_name": "my-cluster-kafka-2"}}
    u = unwrap(json.dumps(outer))
    assert u.line == LINE and u.fields is not None and u.host == "my-cluster-kafka-2"
    assert (u.fields.layout, u.fields.ts) == ("envelope+" + GENERIC_JSON, "2026-11-21T19:21:26.163Z")
    cri = "2026-11-21T19:30:00.000000001Z stdout F " + json.dumps(STRIMZI)
    assert line_ts(cri, UTC, False) == MS
    assert unwrap(cri).fields is not None and unwrap(cri).line == LINE


def test_named_json_layouts_still_win():
    doc = {"instant": {"epochSecond": 1795288886, "nanoOfSecond": 163000000}, "level": "INFO", "loggerName": GC,
           "message": LINE}
    assert read(doc)[1] == "log4j2-json"


# ----------------------------------------------------------------------------- the file reader
def test_file_shape_of_generic_json_files(tmp_path: Path):
    """A file that names its loggers in full is searched for the full names; Strimzi's template has
    no logger, so its file is searched for every coordinator marker (the prefixes included)."""
    full = tmp_path / "full.log"
    full.write_text("".join(json.dumps({"timestamp": MS + i, "level": "INFO", "logger": GC if i % 2 else
                                        "kafka.server.KafkaApis", "message": LINE}) + "\n" for i in range(30)))
    bare = tmp_path / "bare.log"
    bare.write_text("".join(json.dumps({**STRIMZI, "message": LINE if i % 2 else "started"}) + "\n"
                            for i in range(30)))
    assert file_shape(str(full), "auto").full_names
    assert not file_shape(str(bare), "auto").full_names


def test_a_stack_trace_line_in_a_docker_document_takes_the_time_of_its_entry():
    """The replay reader gives a continuation line the time of the header line before it, not the
    time docker stamped it with."""
    trace = {"log": "\tat kafka.coordinator.group.GroupCoordinator.f(GroupCoordinator.scala:1)\n",
             "stream": "stderr", "time": "2026-11-21T19:30:00Z"}
    assert line_ts(json.dumps(trace), UTC, True) is None
    assert line_ts(json.dumps({**trace, "log": LINE + "\n"}), UTC, True) == MS - 163 + 514_000   # 19:30:00
