"""Every group-coordinator message Kafka 0.10.2-4.4 prints, rendered as the broker prints it, is
recognised: it becomes the events its words promise, or it is an entry that says why it carries
no fact. The table (tests/data/coordinator_templates.jsonl) is read from each release's own code
by scripts/extract-coordinator-templates, not written by hand; tests/data/README.md says how."""
from __future__ import annotations

import json
import re
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from state import events as ev
from streaming.logs import catalog, layout
from streaming.logs import parser as bl
from streaming.logs.envelope import GENERIC_JSON, unwrap
from streaming.logs.reasons import classify_rebalance_reason

DATA = Path(__file__).resolve().parents[1] / "data"
ROWS = [json.loads(line) for line in (DATA / "coordinator_templates.jsonl").read_text().splitlines()]
REASONS = [json.loads(line) for line in (DATA / "rebalance_reasons.jsonl").read_text().splitlines()]
EXAMPLE_GROUPS = ("my-group", "other-group")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _fill(template: str, args: list[Any]) -> str:
    pieces = template.split("{}")
    assert len(pieces) == len(args) + 1, template
    return pieces[0] + "".join(str(a) + p for a, p in zip(args, pieces[1:]))


def render(row: dict[str, Any]) -> str:
    """`[time] LEVEL prefix message (logger)`: the broker's default layout."""
    prefix = _fill(row["prefix"], row.get("prefix_example_args") or [])
    return f"[2026-01-01 10:00:00,123] {row['level']} {prefix}{_fill(row['template'], row['example_args'])} " \
           f"({row['logger']})"


# 0.10.2-1.0 lines are read by the same parser (their logger names and prefixes differ); the
# table keeps only the wordings 1.1 does not print for them, and they are held to the same rules.
SUPPORTED = ROWS
INFO_PLUS = [r for r in SUPPORTED if r["level"] in ("INFO", "WARN", "ERROR")]
DEBUG = [r for r in SUPPORTED if r["level"] == "DEBUG"]


def _row_id(row: dict[str, Any]) -> str:
    return f"{row['logger'].rsplit('.', 1)[-1]}:{row['level']}:{row['versions'][0]}-{row['versions'][-1]}:" \
           f"{row['template'][:60]}"


def _entries_matching(line: str) -> list[catalog.CatalogEntry]:
    """A linear scan of the whole catalog, independent of the parser's first-word dispatch."""
    header = layout.HEADER_RE.match(line)
    assert header is not None, line
    level, message, logger = header.group(2), header.group(3), header.group(4)
    family = "scala" if logger.startswith("kafka.coordinator.") else "java"
    _, _, body = layout.split_coordinator_prefix(message)
    found = [e for e in catalog.CATALOG if e.family in (family, "both") and (e.levels is None or level in e.levels)
             and e.pattern.fullmatch(body)]
    return [e for e in found if not e.fallback] or found


def test_the_table_covers_every_release_line() -> None:
    lines = {v for r in ROWS for v in r["versions"]}
    expected = {"1.1", "2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "3.0", "3.1", "3.2", "3.3",
                "3.4", "3.5", "3.6", "3.7", "3.8", "3.9", "4.0", "4.1", "4.2", "4.3", "4.4"}
    assert expected <= lines
    assert len(INFO_PLUS) > 400


# The templates whose words are all an exception's message: only these may be recognised by a
# free-text entry (`fallback`, e.g. no_fact.group_error_free_text); every other template has words
# of its own for an entry to name.
FREE_TEXT_TEMPLATES = {"[GroupId {}] {}."}


@pytest.mark.parametrize("row", INFO_PLUS, ids=_row_id)
def test_every_info_template_is_recognised_by_exactly_one_entry(row: dict[str, Any]) -> None:
    line = render(row)
    parsed = bl.parse_line_detailed(line, source_id="t", seq=1, tz=UTC)
    assert parsed.outcome in (bl.OUTCOME_EVENTS, bl.OUTCOME_IGNORED), (parsed.outcome, line)
    matching = _entries_matching(line)
    assert parsed.entry is not None, line
    assert [e.name for e in matching] == [parsed.entry.name], line
    assert not parsed.entry.fallback or row["template"] in FREE_TEXT_TEMPLATES, (parsed.entry.name, line)
    if parsed.outcome == bl.OUTCOME_IGNORED:
        assert parsed.entry.kind is None or parsed.result is None
        return
    assert isinstance(parsed.result, list), line
    for event in parsed.result:
        assert event.kind in ev.LOG_KINDS
        assert event.ts_ms == 1767261600123
        # The group the line names (a deletion line names two in the table's example).
        assert event.group in EXAMPLE_GROUPS, (event.group, line)


def _json_line(row: dict[str, Any], **fields: Any) -> str:
    """The line as a log4j2 JsonTemplateLayout writes it with `fields` besides the message."""
    message = _fill(row["prefix"], row.get("prefix_example_args") or []) + _fill(row["template"], row["example_args"])
    return json.dumps({**fields, "message": message})


@pytest.mark.parametrize("shape", ["time and message", "time, level, logger and message"])
def test_every_info_template_in_a_generic_json_layout(shape: str) -> None:
    """A generic JSON line (streaming/logs/envelope.py) gives what the default layout gives.
    Strimzi's test template writes the time and the message alone: a message is then a coordinator
    line by its coordinator prefix only, so the templates without one (loggers of the LoggerFactory,
    Scala's GroupMetadata, the event processor threads' `[group-coordinator-event-processor-N]: `)
    are not coordinator lines (none states a fact), and the level-bound free-text entry has no level
    to go by. Counted, so that a new template of either kind is seen here."""
    bare = shape == "time and message"
    no_prefix, free_text = 0, 0
    for row in INFO_PLUS:
        default = bl.parse_line_detailed(render(row), source_id="t", seq=1, tz=UTC)
        fields: dict[str, Any] = {"instant": "2026-01-01T10:00:00.123Z", "someConstant": 1}
        if not bare:
            fields = {"timestamp": 1767261600123, "severity": row["level"], "logger": row["logger"]}
        u = unwrap(_json_line(row, **fields))
        assert u.line is not None and u.fields is not None and u.fields.layout == GENERIC_JSON, u
        parsed = bl.parse_line_detailed(u.line, source_id="t", seq=1, tz=UTC, fields=u.fields)
        if bare and not u.line.startswith(layout.COORDINATOR_PREFIX_MARKERS):
            assert parsed.outcome == bl.OUTCOME_NOT_COORDINATOR, (parsed.outcome, u.line)
            assert default.outcome == bl.OUTCOME_IGNORED, u.line     # every fact has a prefix
            no_prefix += 1
            continue
        if bare and row["template"] in FREE_TEXT_TEMPLATES:
            assert parsed.outcome == bl.OUTCOME_UNKNOWN and row["level"] == "ERROR", (parsed.outcome, u.line)
            free_text += 1
            continue
        assert (parsed.outcome, parsed.entry) == (default.outcome, default.entry), u.line
        if isinstance(default.result, list):
            assert isinstance(parsed.result, list)
            assert [(e.kind, e.group, e.ts_ms, e.broker, e.data) for e in parsed.result] == \
                [(e.kind, e.group, e.ts_ms, e.broker, e.data) for e in default.result], u.line
    assert (no_prefix, free_text) == ((56, 1) if bare else (0, 0))


@pytest.mark.parametrize("row", DEBUG, ids=_row_id)
def test_debug_templates_are_parsed_only_where_debug_is_the_only_record(row: dict[str, Any]) -> None:
    parsed = bl.parse_line_detailed(render(row), source_id="t", seq=1, tz=UTC)
    if parsed.outcome == bl.OUTCOME_DEBUG:
        return
    assert parsed.outcome == bl.OUTCOME_EVENTS and parsed.entry is not None and parsed.entry.parse_at_debug, render(row)


# What the words of a template promise: (regex on the template, the event kind, data it must carry).
PROMISES: list[tuple[str, str, dict[str, Any]]] = [
    (r"^Preparing to (?:rebalance|restabilize) group ", ev.PREPARE_REBALANCE, {}),
    (r"^Stabilized group ", ev.JOIN_COMPLETE, {}),
    (r"has failed, removing it from the group", ev.MEMBER_FAILED, {}),
    (r"is now empty", ev.GROUP_EMPTY, {}),
    (r"transitioned to Dead", ev.GROUP_DEAD, {}),
    (r"^\[GroupId \{\}\] Bumped group epoch to ", ev.GROUP_EPOCH_BUMPED, {}),
    (r"Bumped streams group epoch to ", ev.GROUP_EPOCH_BUMPED, {"group_type": "streams"}),
    (r"^\[GroupId \{\}\] Member \{\} joins the consumer group", ev.CONSUMER_MEMBER_JOINED, {"group_type": "consumer"}),
    (r"joins the share group", ev.CONSUMER_MEMBER_JOINED, {"group_type": "share"}),
    (r"(?:Member|Static member \{\} with instance id \{\}) joins the streams group", ev.CONSUMER_MEMBER_JOINED,
     {"group_type": "streams"}),
    (r"left the consumer group", ev.CONSUMER_MEMBER_LEFT, {"group_type": "consumer"}),
    (r"left the share group", ev.CONSUMER_MEMBER_LEFT, {"group_type": "share"}),
    (r"left the streams group", ev.CONSUMER_MEMBER_LEFT, {"group_type": "streams"}),
    (r"^\[GroupId \{\}\] Member \{\} fenced from the group", ev.CONSUMER_MEMBER_FENCED, {}),
    (r"Streams member \{\} fenced from the group", ev.CONSUMER_MEMBER_FENCED, {"group_type": "streams"}),
    (r"re-joins the streams group", ev.STATIC_MEMBER_REPLACED, {"group_type": "streams"}),
    (r"Member's new assignment state", ev.MEMBER_ASSIGNMENT_STATE, {"group_type": "streams"}),
    (r"^\[GroupId \{\}\] Member \{\} new assignment state: .*assignedPartitions=\{\}\.$", ev.MEMBER_ASSIGNMENT_STATE,
     {"group_type": "share"}),
    (r"Computed a new target assignment for epoch", ev.TARGET_ASSIGNMENT, {}),
    (r"topology epoch \{\} is now initialized|internal topics are missing for topology epoch",
     ev.STREAMS_TOPOLOGY, {"group_type": "streams"}),
    (r"Converted the .*group to a", ev.GROUP_CONVERTED, {}),
]


def _promised(template: str) -> tuple[str, dict[str, Any]] | None:
    for pattern, kind, data in PROMISES:
        if re.search(pattern, template):
            return kind, data
    return None


def _names_its_group(row: dict[str, Any]) -> bool:
    """4.1's InternalTopicManager names no group (recognised, no fact)."""
    return not row["logger"].endswith("InternalTopicManager") or "[GroupId" in row["prefix"] + row["template"]


@pytest.mark.parametrize("row", [r for r in INFO_PLUS if _promised(r["template"]) and _names_its_group(r)],
                         ids=_row_id)
def test_templates_become_the_events_their_words_promise(row: dict[str, Any]) -> None:
    kind, data = _promised(row["template"])   # type: ignore[misc]
    line = render(row)
    parsed = bl.parse_line_detailed(line, source_id="t", seq=1, tz=UTC)
    assert parsed.outcome == bl.OUTCOME_EVENTS, line
    assert isinstance(parsed.result, list), line
    assert [e.kind for e in parsed.result] == [kind], line
    for key, value in data.items():
        assert parsed.result[0].data.get(key) == value, (key, line)


def test_share_and_streams_lines_never_claim_to_be_consumer_lines() -> None:
    for row in INFO_PLUS:
        if not re.search(r"\b(?:share|streams) (?:group|protocol|application)\b|Streams member", row["template"]):
            continue
        parsed = bl.parse_line_detailed(render(row), source_id="t", seq=1, tz=UTC)
        events = parsed.result or []
        assert isinstance(events, list), render(row)
        for event in events:
            assert event.data.get("group_type") != "consumer", render(row)


def _reason_text(row: dict[str, Any]) -> str:
    return _fill(row["reason"], row["example_args"])


# Every reason Kafka passes to "Preparing to rebalance", and the trigger it is.
REASON_TRIGGERS = [
    ("Adding new member", "member_join"),
    ("Member {} is joining group", "member_join"),
    ("Member {} joining group", "member_join"),
    ("removing member {} on heartbeat expiration", "heartbeat_expiry"),
    ("emoving member {} on LeaveGroup", "member_leave"),
    ("explicit `LeaveGroup` request", "member_leave"),
    ("eader {} re-joining group", "leader_rejoin"),
    ("Updating metadata for static member", "static_member_replaced"),
    ("Group's selectedProtocol will change because static member", "static_member_replaced"),
    ("Updating metadata for member", "metadata_change"),
    ("on pending sync request expiration", "rebalance_timeout"),
    ("from consumer to classic for member leaving.", "member_leave"),
    ("from consumer to classic for static member replacement", "static_member_replaced"),
    ("from consumer to classic with stale assignment.", "group_conversion"),
    ("from consumer to classic.", "group_conversion"),
    ("Freshly-loaded group", "coordinator_failover"),
    ("when storing group assignment", "assignment_store_failed"),
]


@pytest.mark.parametrize("row", REASONS, ids=lambda r: r["reason"][:70])
def test_every_rebalance_reason_has_its_trigger(row: dict[str, Any]) -> None:
    expected = next(t for fragment, t in REASON_TRIGGERS if fragment in row["reason"])
    assert classify_rebalance_reason(_reason_text(row))["trigger"] == expected
    assert expected in ev.TRIGGERS


# What the Scala coordinator prints for an optional coordinator epoch (seen on real 2.8 and 3.9
# brokers of the test bed when partition leadership moves): the table renders it as a number.
@pytest.mark.parametrize("line", [
    "[GroupCoordinator 1]: Resigned as the group coordinator for partition 8 in epoch OptionalInt[1]",
    "[GroupCoordinator 1]: Elected as the group coordinator for partition 8 in epoch OptionalInt.empty",
    "[GroupCoordinator 1]: Resigned as the group coordinator for partition 8 in epoch Some(3)",
    "[GroupMetadataManager brokerId=1] Finished unloading __consumer_offsets-8 for coordinator epoch "
    "OptionalInt[1]. Removed 0 cached offsets and 2 cached groups.",
])
def test_optional_coordinator_epochs_are_known_lines(line: str) -> None:
    logger = ("GroupCoordinator" if "GroupCoordinator 1" in line else "GroupMetadataManager")
    full = f"[2026-01-01 10:00:00,123] INFO {line} (kafka.coordinator.group.{logger})"
    parsed = bl.parse_line_detailed(full, source_id="t", seq=1, tz=UTC)
    assert parsed.outcome == bl.OUTCOME_IGNORED, (parsed.outcome, full)
