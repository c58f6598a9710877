"""Lines as users paste them (streaming/logs/wrapped.py, parser.parse_line_detailed): blanks
doubled or turned into tabs, messages wrapped over lines, hard (inside a word) or soft (at a
blank), and what must stay apart: stack traces, a gap in the lines, a new entry."""
from __future__ import annotations

from datetime import UTC
from functools import partial

import pytest

from state.events import Event
from streaming.logs import parser as bl
from streaming.logs.layout import MAX_WRAPPED_LINES as MAX_LINES
from streaming.logs.wrapped import WrappedEntries

PREPARE = ("[2026-01-01 10:00:00,123] INFO [GroupCoordinator 1]: Preparing to rebalance group my-group in state "
           "PreparingRebalance with old generation 3 (__consumer_offsets-12) (reason: removing member "
           "consumer-1-abc on heartbeat expiration) (kafka.coordinator.group.GroupCoordinator)")
ASSIGNMENT = ("[2026-01-01 10:00:00,456] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=12] "
              "[GroupId my-group] Member w7tKzC0dQhO4rD6Yx1bA9g new assignment state: epoch=12, previousEpoch=11, "
              "state=STABLE, assignedPartitions=zLqP3eNkR0i3mPGrx2Ttaw-[0, 1]. "
              "(org.apache.kafka.coordinator.group.GroupMetadataManager)")
# Kafka 2.3.0, copied from a public report (bitnami/charts#3141): no coordinator prefix, logger GroupMetadata$.
STATIC_2_3 = ("[2020-07-16 14:04:04,953] ERROR given member.id 1-1594907777335 is identified as a known static "
              "member 1,but not matching the expected member.id 1-1594907777144 (kafka.coordinator.group.GroupMetadata$)")


def _read(line: str) -> bl.LineParse:
    return bl.parse_line_detailed(line, source_id="s", seq=1, tz=UTC)


def _feed(lines: list[str], seqs: list[int] | None = None) -> list[tuple[int, bl.LineParse]]:
    joiner = WrappedEntries()
    out = []
    for seq, line in zip(seqs or range(1, len(lines) + 1), lines):
        out += joiner.feed("s", seq, line, partial(bl.parse_line_detailed, source_id="s", seq=seq, tz=UTC), seq)
    return out + joiner.flush()


def _facts(p: bl.LineParse) -> list[Event]:
    """The events of a line read as OUTCOME_EVENTS."""
    assert isinstance(p.result, list), p
    return p.result


def _events(readings: list[tuple[int, bl.LineParse]]) -> list[tuple[int, str, str | None]]:
    return [(seq, e.kind, e.reason) for seq, p in readings if p.outcome == bl.OUTCOME_EVENTS for e in _facts(p)]


@pytest.mark.parametrize("mangle", [
    lambda s: s.replace(" ", "  "),
    lambda s: s.replace("] INFO ", "]\tINFO\t", 1),
    lambda s: s + "   ",
    lambda s: "  " + s.replace(": Preparing", ":  Preparing"),
], ids=["doubled", "tabs", "trailing", "indented"])
def test_a_line_whose_blanks_were_mangled_is_read_as_written(mangle):
    assert _read(PREPARE).outcome == bl.OUTCOME_EVENTS
    mangled = _read(mangle(PREPARE))
    assert mangled.outcome == bl.OUTCOME_EVENTS
    assert [(e.kind, e.group, e.reason) for e in _facts(mangled)] == [(e.kind, e.group, e.reason)
                                                                       for e in _facts(_read(PREPARE))]


def test_a_wild_2_3_static_member_line_is_recognised():
    assert _read(STATIC_2_3).outcome == bl.OUTCOME_IGNORED


@pytest.mark.parametrize("line", [PREPARE, ASSIGNMENT])
@pytest.mark.parametrize("width", [50, 77, 100])
def test_a_hard_wrapped_message_is_read_whole(line, width):
    pieces = [line[i:i + width] for i in range(0, len(line), width)]
    assert 2 <= len(pieces) <= MAX_LINES
    readings = _feed(pieces)
    assert _events(readings) == [(1, *k[1:]) for k in _events([(1, _read(line))])]
    assert [p.outcome for _, p in readings[1:]] == [bl.OUTCOME_CONTINUATION] * (len(pieces) - 1)


def test_a_soft_wrapped_message_is_read_whole():
    words, pieces, current = PREPARE.split(" "), [], ""
    for word in words:
        if len(current) + len(word) > 60:
            pieces.append(current)
            current = "    "
        current += word + " "
    pieces.append(current)
    assert len(pieces) <= MAX_LINES
    assert _events(_feed(pieces)) == [(1, *k[1:]) for k in _events([(1, _read(PREPARE))])]


def test_what_continues_no_message_stays_apart():
    head, tail = PREPARE[:90], PREPARE[90:]
    # a stack trace after a whole line, a new entry, a gap in the lines: never joined
    assert _events(_feed([PREPARE, "java.lang.IllegalStateException: x", "\tat kafka.Foo.bar(Foo.scala:1)"])) == \
        _events([(1, _read(PREPARE))])
    readings = _feed([head, PREPARE])
    assert [p.outcome for _, p in readings] == [bl.OUTCOME_UNKNOWN_LAYOUT, bl.OUTCOME_EVENTS]
    readings = _feed([head, tail], seqs=[1, 3])
    assert bl.OUTCOME_EVENTS not in [p.outcome for _, p in readings]


def test_a_wrap_longer_than_the_join_limit_keeps_each_lines_reading():
    pieces = [PREPARE[i:i + 10] for i in range(0, len(PREPARE), 10)]
    assert len(pieces) > MAX_LINES
    readings = _feed(pieces)
    assert len(readings) == len(pieces) and not _events(readings)
