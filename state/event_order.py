"""The order the state machine applies a group's events in, and the times of lines whose layout
writes whole seconds.

`Event.sort_key` is (ts_ms, source rank, source_id, seq): at one millisecond, log lines before
`__consumer_offsets` records, each file in its order. A line of a layout without milliseconds
(Strimzi's Kafka 4.x `%d{yyyy-MM-dd HH:mm:ss}`: data[TS_PRECISION], set by the parser) carries the
start of its second, while the records of that second keep their milliseconds: by time alone
every line of the second would come before every record of it, e.g. a LeaveGroup before the
GroupMetadata record of the generation its member was still in, which then reads as the member's
rejoin. The second's records put its lines back in place: the coordinator appends the record of
a fact it logs right after the line (`_LINE_ANCHORS` / `_record_anchor`: the pairs of the clock-skew
probe, state/machine/clock_skew.py, and a member's own records after its join, assignment or leave
line). Within the span of a coarse line (its second):

- a line takes the time of the first record that follows a line of its file at or after it (its
  time is at most that one: the line came before it) and is applied before the records of that
  millisecond, as lines and records of one millisecond are;
- a line after the last line of its file that a record follows takes the time of that record and
  is applied right after it (before any other record of that millisecond); without one, the
  span's start, before the span's records;
- records keep their times and order, each file's lines theirs (a line never goes before a record
  of an earlier millisecond that follows an earlier line of its file).

A placed line carries in data[TS_LATEST] the latest its time can be (that first record's time, or
the span's end): the diagnosis reads a commit of that second as possibly before a LeaveGroup
(state/diagnosis/holding.py). What no line says stays open: within one span, the order of two
files' lines that no record separates (by source id, as for lines of one millisecond), and of a
line and a record that follows no line (a commit). Input without coarse lines keeps
`Event.sort_key` order exactly, and its events are not copied.
"""
from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from state import events as E

# The key a coarse line shares with the record the coordinator appends right after it.
_LINE_ANCHORS: dict[str, Callable[[E.Event], str]] = {
    E.ASSIGNMENT_RECEIVED: lambda ev: f"classic1:{ev.generation}",
    E.GROUP_EMPTY: lambda ev: f"classic0:{ev.generation}",
    E.GROUP_EPOCH_BUMPED: lambda ev: f"epoch:{ev.generation}",
    E.TARGET_ASSIGNMENT: lambda ev: f"target:{ev.generation}",
    E.CONSUMER_MEMBER_JOINED: lambda ev: f"member:{ev.member_id}",
    E.CONSUMER_MEMBER_LEFT: lambda ev: f"gone:{ev.member_id}",
    E.CONSUMER_MEMBER_FENCED: lambda ev: f"gone:{ev.member_id}",
    E.MEMBER_ASSIGNMENT_STATE: lambda ev: f"assignment:{ev.member_id}:{ev.data.get('member_epoch')}",
    E.GROUP_DEAD: lambda ev: "dead",
    E.GROUP_DELETED: lambda ev: "dead",
}
_MEMBER_RECORDS = (E.CG_MEMBER, E.CG_MEMBER_ASSIGNMENT, E.CG_TARGET_MEMBER)


def _record_anchor(ev: E.Event) -> str | None:
    d, kind = ev.data, ev.kind
    if kind == E.GROUP_METADATA:
        return f"classic{'1' if d.get('members') else '0'}:{ev.generation}"
    if kind == E.GROUP_TOMBSTONE:
        return "dead"
    if d.get("tombstone"):
        # a leaving or fenced member's records go: its assignment, target and member record
        return f"gone:{ev.member_id}" if kind in _MEMBER_RECORDS else None
    if kind == E.CG_EPOCH:
        return f"epoch:{ev.generation}"
    if kind == E.CG_TARGET_EPOCH:
        return f"target:{ev.generation}"
    if kind == E.CG_MEMBER:
        return f"member:{ev.member_id}"
    if kind == E.CG_MEMBER_ASSIGNMENT:
        return f"assignment:{ev.member_id}:{d.get('member_epoch')}"
    return None


def coarse_precision(ev: E.Event) -> int:
    """How many ms the event's time spans: more than 1 only for lines of layouts without milliseconds."""
    if ev.source != E.SOURCE_LOG or not ev.data:
        return 1
    return int(ev.data.get(E.TS_PRECISION) or 1)


def latest_ms(ev: E.Event) -> int | None:
    """The latest time a coarse line placed by `in_event_order` can have happened; None for an
    event whose time is exact (to the millisecond)."""
    value = ev.data.get(E.TS_LATEST) if ev.source == E.SOURCE_LOG and ev.data else None
    return None if value is None else int(value)


# Sort classes at one time: coarse lines placed before the records of that millisecond, then the
# events of the millisecond in Event.sort_key order. A coarse line placed right after a record
# extends that record's key.
_BEFORE, _AT = 0, 1
Key = tuple[Any, ...]


def in_event_order(events: Iterable[E.Event]) -> list[E.Event]:
    """The events in the order the machine applies them (module docstring); coarse lines are
    copies with the time of their place and TS_LATEST."""
    evs = sorted(events, key=E.Event.sort_key)
    spans: dict[tuple[int, int], list[int]] = {}
    for i, ev in enumerate(evs):
        p = coarse_precision(ev)
        if p > 1:
            spans.setdefault((ev.ts_ms, p), []).append(i)
    if not spans:
        return evs
    keys: list[Key] = [(ev.ts_ms, _AT, E.SOURCE_RANK.get(ev.source, 9), ev.source_id, ev.seq) for ev in evs]
    latest: dict[int, int] = {}
    times = [ev.ts_ms for ev in evs]
    for (start, precision), lines in spans.items():
        coarse = set(lines)
        span = range(bisect_left(times, start), bisect_left(times, start + precision))
        followed = _anchors(evs, lines, [j for j in span if j not in coarse])
        files: dict[str, list[int]] = {}
        for i in lines:
            files.setdefault(evs[i].source_id, []).append(i)
        for file_lines in files.values():
            _place(evs, file_lines, followed, keys, latest, start, start + precision - 1)
    order = sorted(range(len(evs)), key=keys.__getitem__)
    return [evs[i] if i not in latest else replace(evs[i], ts_ms=keys[i][0], data={
        **evs[i].data, E.TS_LATEST: max(keys[i][0], latest[i])}) for i in order]


def _anchors(evs: list[E.Event], lines: list[int], records: list[int]) -> dict[int, list[int]]:
    """Line -> the records of its span that follow it: each record with an anchor key follows the
    first line (in file order) with that key that no earlier record follows."""
    free: dict[str, list[int]] = {}
    for i in lines:
        anchor = _LINE_ANCHORS.get(evs[i].kind)
        if anchor is not None:
            free.setdefault(anchor(evs[i]), []).append(i)
    followed: dict[int, list[int]] = {}
    for j in records:
        key = _record_anchor(evs[j])
        if key is not None and free.get(key):
            followed.setdefault(free[key].pop(0), []).append(j)
    return followed


def _place(evs: list[E.Event], lines: list[int], followed: dict[int, list[int]], keys: list[Key],
           latest: dict[int, int], start: int, end: int) -> None:
    """The sort keys (their first item is the time) and latest times of one file's coarse lines
    of one span (module docstring)."""
    ahead: list[int | None] = [None] * len(lines)     # the first record following a line at or after
    first: int | None = None
    for k in range(len(lines) - 1, -1, -1):
        for j in followed.get(lines[k], ()):
            first = j if first is None or keys[j] < keys[first] else first
        ahead[k] = first
    behind: int | None = None                         # the last record following a line before
    for k, i in enumerate(lines):
        own = (E.SOURCE_RANK.get(evs[i].source, 9), evs[i].source_id, evs[i].seq)
        after = None if behind is None else (*keys[behind], *own)
        nxt = ahead[k]
        if nxt is not None:
            keys[i] = (keys[nxt][0], _BEFORE, *own)
            latest[i] = keys[nxt][0]
            if after is not None and after[0] > keys[i][0]:
                keys[i] = after
        else:
            keys[i] = after if after is not None else (start, _BEFORE, *own)
            latest[i] = end
        for j in followed.get(i, ()):
            behind = j if behind is None or keys[behind] < keys[j] else behind
