"""The machine's component for events that mean the same for classic and epoch-based groups: the
group's death or deletion, coordinator loads and unloads, offset commits and their tombstones."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from state import events as E
from state.diagnosis.holding import note_commit_times
from state.model import DEAD, EMPTY, EPOCH_PROTOCOLS, PROTOCOL_CLASSIC, STABLE, UNKNOWN
from state.vocabulary import Outcome, RemovalCause

if TYPE_CHECKING:
    from state.machine.core import GroupStateMachine


def fold_commit_times(partitions: dict[str, int], prior: dict[str, list[int]], key: str, commit_ts: int,
                      earlier: tuple[int | None, ...] = ()) -> None:
    """A partition's commit time (and the earlier times the reduction kept) into its newest commit
    time (`partitions`) and the next newest ones (`prior`), updated in place: the
    COMMIT_TIMES_KEPT newest distinct times in all (E.newest_commit_times)."""
    old = partitions.get(key)
    if old is None and not any(earlier):
        partitions[key] = commit_ts
        return
    if old is not None and commit_ts > old and not any(earlier):
        # The usual case, live: one new commit, newer than the partition's last.
        was = prior.get(key)
        prior[key] = [old, was[0]] if was else [old]
        partitions[key] = commit_ts
        return
    times = E.newest_commit_times((commit_ts, *earlier, old, *prior.get(key, ())))
    partitions[key] = times[0]
    if len(times) > 1:
        prior[key] = times[1:]


def fold_commit(partitions: dict[str, int], prior: dict[str, list[int]], last_ms: int | None, data: dict[str, Any],
                ts_ms: int) -> tuple[int, int]:
    """One commit (OFFSET_COMMIT data) into the newest commit times per "topic:partition" (updated
    in place: fold_commit_times) and the newest commit time `last_ms`: returns the new newest time
    and the commit's count. Max, top-k and sum: the result does not depend on the order of the
    commits (stateful.py folds them outside a turn this way)."""
    commit_ts = data.get("commit_ts_ms") or ts_ms
    if data.get("topic") is not None and data.get("partition") is not None:
        fold_commit_times(partitions, prior, f"{data['topic']}:{data['partition']}", commit_ts,
                          E.earlier_commit_times(data))
    return (commit_ts if last_ms is None else max(last_ms, commit_ts)), int(data.get("count") or 1)


def fold_commit_event(partitions: dict[str, int], prior: dict[str, list[int]], last_ms: int | None, kind: str,
                      data: dict[str, Any], ts_ms: int) -> tuple[int | None, int]:
    """fold_commit over every commit of an OFFSET_COMMIT or OFFSET_COMMITS event's data: the new
    newest time and the commits' count. A pack's entries are read in place (a dict per entry was
    most of the cost of a commit in a large replay)."""
    if kind != E.OFFSET_COMMITS:
        return fold_commit(partitions, prior, last_ms, data, ts_ms)
    total = 0
    for entry in data.get("commits") or ():
        if len(entry) == 5:
            topic, partition, _offset, commit_ts, count = entry
        else:
            topic, partition, _offset, commit_ts, count = (*entry, None, None, None, None, None)[:5]
        commit_ts = commit_ts or ts_ms
        if topic is not None and partition is not None:
            fold_commit_times(partitions, prior, f"{topic}:{partition}", commit_ts,
                              tuple(entry[5:]) if len(entry) > 5 else ())
        last_ms = commit_ts if last_ms is None or commit_ts > last_ms else last_ms
        total += int(count or 1)
    return last_ms, total


class CommonEvents:
    """Handles the events of every protocol; calls the machine's services through `machine`."""

    def __init__(self, machine: GroupStateMachine) -> None:
        self.machine = machine

    def on_group_dead(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        if m.state == DEAD:
            return
        machine.close_open_as(Outcome.DEAD, ev)
        # Sorted: the members dict comes back key-sorted from to_json/from_json (Spark state),
        # so insertion order would make the output depend on batch boundaries.
        for member_id in sorted(m.members):
            machine.remove_member(member_id, RemovalCause.GROUP_DELETED, ev)
        # Checked against the group's own protocol: a KIP-848 group may die in any state.
        machine.transition_to(DEAD, ev, table=m.protocol)

    def on_group_tombstone(self, ev: E.Event) -> None:
        m = self.machine.m
        if m.protocol in EPOCH_PROTOCOLS and ev.kind == E.GROUP_TOMBSTONE:
            return  # classic -> consumer conversion deletes the classic record, not the group
        o = m.open_rebalance
        if o is not None and o.started_latest_ms is not None and ev.ts_ms <= o.started_latest_ms:
            # Kafka writes no tombstone for a group that is rebalancing: a whole-second start line
            # of this second came after it (a new group's first join, right after its empty
            # record was deleted).
            return
        self.on_group_dead(ev)

    def on_group_unloaded(self, ev: E.Event) -> None:
        self.note_coordinator_move(ev)

    def note_coordinator_move(self, ev: E.Event) -> None:
        if ev.source == E.SOURCE_LOG:
            m = self.machine.m
            m.coordinator_moves = (m.coordinator_moves + [ev.ts_ms])[-4:]

    def on_group_loaded(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        self.note_coordinator_move(ev)
        if ev.generation is not None and m.generation is None:
            machine.enter_generation(ev.generation)
        if m.open_rebalance is not None and m.open_rebalance.completed_at_ms is None \
                and m.protocol == PROTOCOL_CLASSIC:
            # A coordinator move aborts the join in progress; the new coordinator starts from
            # the last persisted generation.
            machine.close_open_as(Outcome.SUPERSEDED, ev)
            loaded_members = ev.data.get("members")
            if loaded_members is not None:
                machine.transition_to(STABLE if loaded_members else EMPTY, ev, table=None)
        elif m.state == UNKNOWN and ev.data.get("members") is not None:
            machine.transition_to(STABLE if ev.data["members"] else EMPTY, ev, table=None)

    def on_offset_commit(self, ev: E.Event) -> None:
        """One commit, or a pack of one group's commits of one millisecond (OFFSET_COMMITS)."""
        m = self.machine.m
        # Kafka writes a commit for a group id only while a group of that id exists: one that died
        # was created again, Empty (a simple consumer's commit, generation -1, makes it).
        self.machine.reincarnate_if_dead(ev)
        m.last_commit_ms, count = fold_commit_event(m.partition_commits, m.partition_prior_commits, m.last_commit_ms,
                                                    ev.kind, ev.data, ev.ts_ms)
        if any(h.commit_partitions for h in m.held_removals):
            for c in E.commits_of(ev):
                if c.get("topic") is not None and c.get("partition") is not None:
                    note_commit_times(m, f"{c['topic']}:{c['partition']}",
                                      (c.get("commit_ts_ms") or ev.ts_ms, *E.earlier_commit_times(c)))
        m.commits_total += count

    def on_offset_tombstone(self, ev: E.Event) -> None:
        if ev.data.get("topic") is not None:
            key = f"{ev.data['topic']}:{ev.data.get('partition')}"
            self.machine.m.partition_commits.pop(key, None)
            self.machine.m.partition_prior_commits.pop(key, None)

