"""Streams groups (KIP-1071) complete a rebalance when every member has reached the epoch, from the
members' "new assignment state" lines, their current-assignment records (type 22), or both,
whatever order the members reach the epoch in and however the lines and records interleave.

The inputs are what a 4.4 coordinator writes (as on the capture tests/fixtures/kafka-4.4-modern):
its server.log lines, read by the log catalog, and its `__consumer_offsets` records, encoded here
from Kafka's schemas and read by the offsets decoder. A streams member passes through
UNRELEASED_TASKS (it reached the epoch, and waits for tasks another member still owns) or
UNREVOKED_TASKS (it keeps its old epoch until it has given tasks up) before STABLE; a new member
joins at epoch 0. The streams record's state enum is not the consumer one: 1 STABLE,
2 UNREVOKED_TASKS, 3 UNRELEASED_TASKS."""
from __future__ import annotations

import dataclasses
import itertools
import struct
from collections.abc import Iterable
from datetime import datetime, timezone

import pytest

from state import events as E
from state.machine import GroupStateMachine
from state.machine.modern import MEMBER_STATE_CODES, STREAMS_RECORD_STATES
from state.model import STABLE, GroupModel
from state.outputs import OutputKind
from streaming.logs.parser import parse_line
from streaming.offsets.record_events import record_to_events
from streaming.offsets.records import STREAMS_MEMBER_STATE_NAMES
from tests.support.offsets_encoder import compact, string

G = "orders-streams"
A, B, C = "1bUTTyphTcajPAZGXDh7rQ", "B-ysFiqEQWyUNVomRhCfgQ", "q9Zt0c8QTm2uU5vY1x3JdA"
STREAMS_CODE = {"STABLE": 1, "UNREVOKED_TASKS": 2, "UNRELEASED_TASKS": 3}
HASH = 6909901113733565872
NO_TASKS = "assignedTasks=(active=[], standby=[], warmup=[]) and tasksPendingRevocation=(active=[], standby=[], " \
           "warmup=[])"


class Coordinator:
    """The lines and records one group coordinator writes for a streams group, as events. A record
    is written `lag` ms after the line of the same fact (Kafka appends it after logging)."""

    def __init__(self, lag: int = 0) -> None:
        self.lag = lag
        self.lines: list[E.Event] = []
        self.records: list[E.Event] = []
        self._line_seq = itertools.count()
        self._offset = itertools.count()

    # --- raw writers ------------------------------------------------------------------------
    def line(self, ts: int, text: str) -> None:
        clock = datetime.fromtimestamp(ts / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        raw = (f"[{clock}] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=9] {text} "
               "(org.apache.kafka.coordinator.group.GroupMetadataManager)")
        parsed = parse_line(raw, source_id="broker1/server.log", seq=next(self._line_seq), tz=timezone.utc)
        assert isinstance(parsed, list) and len(parsed) == 1, (raw, parsed)
        self.lines += parsed

    def record(self, ts: int, record_type: int, member: str | None, value: bytes | None) -> None:
        key = struct.pack(">h", record_type) + string(G) + (string(member) if member is not None else b"")
        out = record_to_events(partition=9, offset=next(self._offset), timestamp_ms=ts, key=key,
                               value=None if value is None else struct.pack(">h", 0) + value)
        assert isinstance(out, list) and len(out) == 1, out
        self.records += out

    # --- what the coordinator does ----------------------------------------------------------
    def join(self, ts: int, member: str) -> None:
        self.line(ts, f"[GroupId {G}][MemberId {member}] Member joins the streams group.")
        self.record(ts + self.lag, 19, member,
                    b"\x00\x00" + compact(f"{G}-{member[:4]}-StreamThread-1-consumer".encode())
                    + compact(b"/127.0.0.1") + struct.pack(">ii", 300000, 0) + compact(b"process-" + member.encode())
                    + struct.pack(">b", -1) + b"\x01\x00")

    def bump(self, ts: int, epoch: int, by: str, *, logged: bool = True) -> None:
        """A group epoch bump: a join's or a metadata change's is logged ("Bumped streams group
        epoch"), a fence's or a leave's only written (`logged` False)."""
        if logged:
            self.line(ts, f"[GroupId {G}][MemberId {by}] Bumped streams group epoch to {epoch} with metadata hash "
                          f"{HASH} and validated topic epoch 0.")
        self.record(ts + self.lag, 17, None, struct.pack(">iq", epoch, HASH) + b"\x00")

    def target(self, ts: int, epoch: int, members: Iterable[str], *, logged: bool = True) -> None:
        if logged:
            self.line(ts, f"[GroupId {G}] Computed a new target assignment for epoch {epoch} with 'sticky' "
                          f"assignor in 4ms.")
        for member in members:
            self.record(ts + self.lag, 21, member, b"\x01\x01\x01\x00")
        self.record(ts + self.lag, 20, None, struct.pack(">i", epoch) + b"\x00")

    def state(self, ts: int, member: str, epoch: int, previous: int, name: str, *,
              record_ts: int | None = None) -> None:
        """The member's new assignment state: its line, then its type-22 record."""
        self.line(ts, f"[GroupId {G}][MemberId {member}] Member's new assignment state: epoch={epoch}, "
                      f"previousEpoch={previous}, state={name}, {NO_TASKS}.")
        self.record(ts + self.lag if record_ts is None else record_ts, 22, member,
                    struct.pack(">iib", epoch, previous, STREAMS_CODE[name]) + b"\x01" * 6 + b"\x00")

    def fence(self, ts: int, member: str, next_epoch: int) -> None:
        """Session expiry: the line, the member's tombstones and the new epoch (no "Bumped" line)."""
        self.line(ts, f"[GroupId {G}] Streams member {member} fenced from the group because the member session "
                      "expired..")
        for record_type in (22, 21, 19):
            self.record(ts + self.lag, record_type, member, None)
        self.bump(ts, next_epoch, member, logged=False)

    # --- inputs ---------------------------------------------------------------------------------
    def events(self, sources: str) -> list[E.Event]:
        return {"logs": self.lines, "records": self.records, "both": self.lines + self.records}[sources]


SOURCES = ("logs", "records", "both")


def run(events: list[E.Event]) -> GroupStateMachine:
    machine = GroupStateMachine(GroupModel(cluster="default", group=G))
    machine.apply_all(events)
    return machine


def rebalances(machine: GroupStateMachine) -> dict[int, dict]:
    return {r["generation"]: r for kind, r in machine.outputs if kind == OutputKind.REBALANCE}


def first_epoch(c: Coordinator) -> None:
    """A starts the group: epoch 2, A STABLE at 2 (done at 1300)."""
    c.join(1000, A)
    c.bump(1100, 2, A)
    c.target(1200, 2, [A])
    c.state(1300, A, 2, 0, "STABLE")


def test_the_decoded_streams_record_says_its_state_by_name():
    """The record's code is of the streams enum (STABLE is 1, the consumer enum's UNREVOKED); the
    decoder names it."""
    c = Coordinator()
    c.state(1300, A, 2, 0, "STABLE")
    c.state(1400, A, 2, 2, "UNREVOKED_TASKS")
    c.state(1500, A, 3, 2, "UNRELEASED_TASKS")
    assert [(r.data["state"], r.data["state_name"], r.data["group_type"]) for r in c.records] == [
        (1, "STABLE", "streams"), (2, "UNREVOKED_TASKS", "streams"), (3, "UNRELEASED_TASKS", "streams")]


def test_a_streams_record_without_its_name_is_read_in_the_streams_enum():
    """The machine reads a state by name; a record without one (hand-made) by its code, which for a
    streams record is of the streams enum (the decoder's table, streaming/offsets/records.py)."""
    assert {code: STREAMS_MEMBER_STATE_NAMES[code] for code in STREAMS_RECORD_STATES} == \
        {code: next(n for n, c in MEMBER_STATE_CODES.items() if c == ours and n.endswith(("TASKS", "STABLE")))
         for code, ours in STREAMS_RECORD_STATES.items()}
    c = Coordinator()
    first_epoch(c)
    nameless = [dataclasses.replace(r, data={k: v for k, v in r.data.items() if k != "state_name"})
                for r in c.records]
    r = rebalances(run(nameless))[2]
    assert (r["outcome"], r["completed_at_ms"]) == ("stable", 1300)


@pytest.mark.parametrize("sources", SOURCES)
@pytest.mark.parametrize("lag", [0, 1])
def test_first_member_completes_its_epoch(sources, lag):
    c = Coordinator(lag)
    first_epoch(c)
    machine = run(c.events(sources))
    r = rebalances(machine)[2]
    assert (r["protocol"], r["outcome"], r["members"]) == ("streams", "stable", 1)
    assert r["completed_at_ms"] == (1300 + lag if sources == "records" else 1300)
    assert machine.m.state == STABLE and machine.m.open_rebalance is None


def join_of_b(c: Coordinator, last: str) -> int:
    """B joins at epoch 0 and the group goes to epoch 3 (as on the 4.4 capture). `last`: which
    member reaches epoch 3 STABLE last. B new: B takes a task A still owns (B UNRELEASED_TASKS at 3
    until A has revoked it). A old: B takes only free tasks (STABLE at 3 at once) and A still revokes
    one (UNREVOKED_TASKS at 2). Returns the time of the last member's STABLE line."""
    c.join(5000, B)
    c.bump(5002, 3, B)
    c.target(5006, 3, [B, A])
    if last == "new":
        c.state(5007, B, 3, 0, "UNRELEASED_TASKS")
        c.state(5083, A, 2, 2, "UNREVOKED_TASKS")
        c.state(5163, A, 3, 2, "STABLE")
        c.state(5227, B, 3, 3, "STABLE")
        return 5227
    c.state(5007, B, 3, 0, "STABLE")
    c.state(5083, A, 2, 2, "UNREVOKED_TASKS")
    c.state(5163, A, 3, 2, "STABLE")
    return 5163


@pytest.mark.parametrize("sources", SOURCES)
@pytest.mark.parametrize("lag", [0, 1])
@pytest.mark.parametrize("last", ["new", "old"])
def test_a_join_completes_whichever_member_reaches_the_epoch_last(sources, lag, last):
    c = Coordinator(lag)
    first_epoch(c)
    done = join_of_b(c, last)
    machine = run(c.events(sources))
    r = rebalances(machine)[3]
    assert (r["outcome"], r["members"]) == ("stable", 2)
    if sources != "records":      # the join line names the trigger (records alone do not)
        assert (r["trigger"], r["trigger_member"]) == ("member_join", B)
    assert r["completed_at_ms"] == (done + lag if sources == "records" else done)
    assert r["started_at_ms"] == (5002 + lag if sources == "records" else 5002)
    assert machine.m.state == STABLE and machine.m.open_rebalance is None


@pytest.mark.parametrize("last", ["new", "old"])
def test_records_of_each_state_after_the_next_line(last):
    """Each record written in the millisecond of the member's next line (its time sorts it after
    that line): the model sees a member's older state again after its newer one, then the newer
    one's record. The rebalance still completes, in the millisecond of the last STABLE line."""
    c = Coordinator()
    first_epoch(c)
    done = join_of_b(c, last)
    lines = sorted(c.lines, key=E.Event.sort_key)
    late: list[E.Event] = []
    for record in c.records:
        later = [line.ts_ms for line in lines if line.ts_ms > record.ts_ms]
        late.append(dataclasses.replace(record, ts_ms=later[0] if later else record.ts_ms))
    machine = run(c.lines + late)
    r = rebalances(machine)[3]
    assert (r["outcome"], r["completed_at_ms"], r["members"]) == ("stable", done, 2)
    assert machine.m.state == STABLE


@pytest.mark.parametrize("sources", SOURCES)
def test_the_last_stable_line_before_or_after_the_target_assignment_record(sources):
    """The last member's STABLE line in the same millisecond as the epoch's target-assignment
    record (a line sorts before a record of its millisecond), or before it (the record read late):
    complete either way, at that line."""
    for target_ms in (5227, 5300):
        c = Coordinator()
        first_epoch(c)
        c.join(5000, B)
        c.bump(5002, 3, B)
        c.line(5006, f"[GroupId {G}] Computed a new target assignment for epoch 3 with 'sticky' assignor in 4ms.")
        c.state(5007, B, 3, 0, "UNRELEASED_TASKS")
        c.state(5163, A, 3, 2, "STABLE")
        c.state(5227, B, 3, 3, "STABLE")
        c.target(target_ms, 3, [B, A], logged=False)
        r = rebalances(run(c.events(sources)))[3]
        assert (r["outcome"], r["members"]) == ("stable", 2), target_ms
        assert r["completed_at_ms"] == 5227, target_ms


@pytest.mark.parametrize("sources", SOURCES)
def test_a_new_member_reconciled_to_the_previous_target_first(sources):
    """4.4 computes the target assignment after the bump (group.streams.assignor.offload.enable):
    the joining member is first reconciled to the previous target (epoch 2, STABLE without tasks).
    That is not epoch 3: the rebalance completes when both are STABLE at 3."""
    c = Coordinator()
    first_epoch(c)
    c.join(5000, B)
    c.bump(5002, 3, B)
    c.state(5007, B, 2, 0, "STABLE")
    machine = run(c.events(sources))
    assert 3 not in rebalances(machine) and machine.m.open_rebalance is not None
    c.target(5500, 3, [B, A])
    c.state(5583, A, 2, 2, "UNREVOKED_TASKS")
    c.state(5600, B, 3, 2, "UNRELEASED_TASKS")
    c.state(5663, A, 3, 2, "STABLE")
    c.state(5727, B, 3, 3, "STABLE")
    r = rebalances(run(c.events(sources)))[3]
    assert (r["outcome"], r["members"], r["assigned_at_ms"]) == ("stable", 2, 5500)
    assert r["completed_at_ms"] == 5727


@pytest.mark.parametrize("sources", SOURCES)
def test_two_bumps_in_a_row(sources):
    """B joins (epoch 3) and C joins (epoch 4) before anyone reached 3: 3 is superseded, and 4
    completes when A, B and C are STABLE at 4, whoever is last."""
    c = Coordinator()
    first_epoch(c)
    c.join(5000, B)
    c.bump(5002, 3, B)
    c.target(5006, 3, [B, A])
    c.state(5007, B, 3, 0, "UNRELEASED_TASKS")
    c.join(5050, C)
    c.bump(5052, 4, C)
    c.target(5056, 4, [C, B, A])
    c.state(5057, C, 4, 0, "UNRELEASED_TASKS")
    c.state(5083, A, 2, 2, "UNREVOKED_TASKS")
    c.state(5163, A, 4, 2, "STABLE")
    c.state(5200, C, 4, 4, "STABLE")
    c.state(5227, B, 4, 3, "STABLE")
    machine = run(c.events(sources))
    r = rebalances(machine)
    assert (r[3]["outcome"], r[3]["ended_at_ms"]) == ("superseded", 5052)
    assert (r[4]["outcome"], r[4]["completed_at_ms"], r[4]["members"]) == ("stable", 5227, 3)
    assert r[4]["trigger_member"] == (None if sources == "records" else C)
    assert machine.m.state == STABLE


def test_a_fence_bumps_the_epoch_and_the_survivors_complete_it():
    """C is fenced while UNRELEASED_TASKS at 4: Kafka writes the bump to 5 without a line; the
    target assignment of 5 is logged, A and B reach 5."""
    c = Coordinator()
    first_epoch(c)
    c.join(5000, B)
    c.bump(5002, 3, B)
    c.target(5006, 3, [B, A])
    c.state(5007, B, 3, 0, "STABLE")
    c.state(5163, A, 3, 2, "STABLE")
    c.join(6000, C)
    c.bump(6002, 4, C)
    c.target(6006, 4, [C, B, A])
    c.state(6007, C, 4, 0, "UNRELEASED_TASKS")
    c.state(6083, B, 3, 3, "UNREVOKED_TASKS")
    c.fence(12000, C, 5)
    c.target(12500, 5, [B, A])
    c.state(12583, A, 5, 3, "STABLE")
    c.state(12600, B, 5, 3, "STABLE")
    for sources in SOURCES:
        r = rebalances(run(c.events(sources)))
        assert r[4]["outcome"] == "superseded", sources
        assert (r[5]["outcome"], r[5]["completed_at_ms"], r[5]["members"]) == ("stable", 12600, 2), sources
        assert r[5]["trigger"] == ("group_epoch_bump" if sources == "records" else "heartbeat_expiry"), sources


@pytest.mark.parametrize("sources", SOURCES)
def test_a_member_fenced_before_it_reached_the_epoch_does_not_complete_it(sources):
    """B is killed while UNRELEASED_TASKS at 3 (as on the 4.2 capture) and fenced: A was STABLE at
    3, but Kafka writes B's tombstones with epoch 4 in one batch, so 3 never completed; it is
    superseded by 4, which completes when A is STABLE at 4. The same from lines, records or both."""
    c = Coordinator()
    first_epoch(c)
    c.join(5000, B)
    c.bump(5002, 3, B)
    c.target(5006, 3, [B, A])
    c.state(5007, B, 3, 0, "UNRELEASED_TASKS")
    c.state(5083, A, 2, 2, "UNREVOKED_TASKS")
    c.state(5163, A, 3, 2, "STABLE")
    c.fence(11000, B, 4)
    c.target(11500, 4, [A])
    c.state(11583, A, 4, 3, "STABLE")
    machine = run(c.events(sources))
    r = rebalances(machine)
    assert (r[3]["outcome"], r[3]["completed_at_ms"], r[3]["ended_at_ms"]) == \
        ("superseded", None, 11500 if sources == "logs" else 11000)
    assert (r[4]["outcome"], r[4]["completed_at_ms"], r[4]["members"]) == ("stable", 11583, 1)
    assert machine.m.state == STABLE


def two_stable_members(c: Coordinator) -> None:
    """A and B STABLE at 3 (done at 5163)."""
    first_epoch(c)
    c.join(5000, B)
    c.bump(5002, 3, B)
    c.target(5006, 3, [B, A])
    c.state(5007, B, 3, 0, "STABLE")
    c.state(5083, A, 2, 2, "UNREVOKED_TASKS")
    c.state(5163, A, 3, 2, "STABLE")


@pytest.mark.parametrize("sources", ["logs", "both"])
def test_a_member_at_an_epoch_not_seen_yet_shows_its_bump(sources):
    """B's metadata change bumps the epoch to 4, but the bump's and the target assignment's lines are
    not in the input (its coordinator died before its log was shipped) and its records, when read,
    sort after A's line (same millisecond). A member's epoch never passes the group's: A's STABLE at
    4 shows the bump. Epoch 4 starts there and completes at B's STABLE line."""
    c = Coordinator()
    two_stable_members(c)
    c.line(9000, f"[GroupId {G}][MemberId {B}] Member updated its member metadata to StreamsGroupMember[memberId={B}, "
                 "memberEpoch=3, previousMemberEpoch=3, state=STABLE].")
    c.bump(9010, 4, B, logged=False)
    c.target(9010, 4, [B, A], logged=False)
    c.state(9010, A, 4, 3, "STABLE")
    c.state(9020, B, 4, 3, "STABLE")
    machine = run(c.events(sources))
    r = rebalances(machine)
    assert r[3]["outcome"] == "stable"
    assert (r[4]["outcome"], r[4]["trigger"], r[4]["trigger_member"], r[4]["started_at_ms"], r[4]["completed_at_ms"],
            r[4]["members"]) == ("stable", "metadata_change", B, 9010, 9020, 2)
    assert machine.m.state == STABLE and machine.m.generation == 4


@pytest.mark.parametrize("sources", ["logs", "both"])
def test_a_second_bump_seen_only_in_the_members_epochs(sources):
    """Epoch 3 (B's join) is reconciling when the group goes to 4 without a line in the input; A,
    then B, report STABLE at 4 (B passes UNRELEASED_TASKS at 4): 3 is superseded where 4 shows,
    and 4 completes."""
    c = Coordinator()
    first_epoch(c)
    c.join(5000, B)
    c.bump(5002, 3, B)
    c.target(5006, 3, [B, A])
    c.state(5007, B, 3, 0, "UNRELEASED_TASKS")
    c.state(5083, A, 2, 2, "UNREVOKED_TASKS")
    c.state(5100, B, 4, 3, "UNRELEASED_TASKS")
    c.bump(5100, 4, B, logged=False)
    c.target(5100, 4, [B, A], logged=False)
    c.state(5163, A, 4, 2, "STABLE")
    c.state(5227, B, 4, 4, "STABLE")
    machine = run(c.events(sources))
    r = rebalances(machine)
    assert (r[3]["outcome"], r[3]["ended_at_ms"], r[3]["completed_at_ms"]) == ("superseded", 5100, None)
    assert (r[4]["outcome"], r[4]["started_at_ms"], r[4]["completed_at_ms"], r[4]["members"]) == \
        ("stable", 5100, 5227, 2)
    assert machine.m.state == STABLE
