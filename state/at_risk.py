"""Members about to be removed for a poll timeout, before it happens (pure Python; docs/metrics.md,
`rebalance_monitor_group_members_at_risk`).

A classic consumer that does not call poll() within its `max.poll.interval.ms` leaves the group
(Kafka's "poll timeout"), and the rebalance that follows stops every partition of an eager group.
Its commits show it coming: a consumer commits what it consumed from its poll loop (the Java
client's auto-commit runs in poll(); librdkafka commits what changed), so a member that has
records waiting on its partitions and has committed none of them for a while is not getting
through its loop.

A member is at risk when, at once:
- its group is not rebalancing (Stable): during a rebalance no member consumes, and nothing it
  commits or not says anything about its loop;
- some of its partitions have records waiting (end offset above the committed offset, by the
  lag sampler's latest end offsets): an idle partition gives a healthy consumer nothing to commit,
  so idle members are never at risk;
- none of those partitions got a commit for more than `fraction` of its rebalance timeout (the
  Java client sends max.poll.interval.ms as its rebalance timeout in JoinGroup; the group's
  GroupMetadata record keeps it per member), counted from the latest of its newest commit on them,
  the time the group became Stable (its assignment) and the time its coordinator last changed (no
  commit can be made while the group has none: a killed coordinator's group is silent until the
  new one has loaded it), and up to the moment the monitor has read the group's commits through
  (the caller's `now_ms`: state/lag.py `commits_read_through`; a monitor that cannot read the
  coordinator's partition, or is catching up, sees no commit and must not call that a silence).

Classic and consumer (KIP-848) groups' members are judged: a KIP-848 member's rebalance timeout is
its max.poll.interval.ms too (ConsumerGroupHeartbeat's RebalanceTimeoutMs, kept in its member
record), and its assignment names topics by id, which `topic_names` (the sampler's metadata) turns
into the names its commits use. Not evaluated (never at risk): members without a rebalance timeout
or a known assignment, topic ids the metadata does not name, partitions whose newest commit has no
known time (an offset fetched from the cluster after a restart, state/lag.py `seed`: the commit
may be a second or an hour old), share groups (they acknowledge
records, they commit none) and streams groups (their assignments are tasks, not partitions).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from state.vocabulary import GroupState, Protocol

# A member is at risk after this fraction of its rebalance timeout without a commit (lag.at_risk_fraction).
AT_RISK_FRACTION = 0.5

Partition = tuple[str, int]                       # (topic, partition)


@dataclass(frozen=True)
class AtRisk:
    """One member at risk: how long its lagging partitions went without a commit, against its
    rebalance timeout (the poll timeout it is heading for)."""
    member_id: str
    client_id: str | None
    waiting_partitions: int
    silent_ms: int
    rebalance_timeout_ms: int


@lru_cache(maxsize=1 << 18)      # a scrape reads every member's assignment: the same names each time
def named_partition(name: str) -> Partition | None:
    """"topic:partition" of a classic member's assignment as (topic, partition); None for a name
    that is not one (a KIP-848 topic id is 22 characters of base64, still "id:partition", and is
    never a committed topic: it finds no commit and no end offset)."""
    topic, sep, number = name.rpartition(":")
    if not sep or not topic or not number.isdigit():
        return None
    return topic, int(number)


def members_at_risk(snapshot: dict[str, Any], committed: dict[Partition, tuple[int, int]],
                    end_offset: Callable[[Partition], int | None], now_ms: int,
                    fraction: float = AT_RISK_FRACTION, topic_names: Mapping[str, str] | None = None
                    ) -> list[AtRisk]:
    """The members of one group (its snapshot) at risk at `now_ms` (until when its commits are
    known). `committed`: the group's
    (committed offset, commit time ms) per partition; `end_offset`: a partition's latest end
    offset, None when not sampled (or stale: the caller decides); `topic_names`: {topic id: name}
    for a KIP-848 group's assignments."""
    if snapshot.get("state") != GroupState.STABLE:       # REBALANCING_STATES, Empty, Dead: nobody is judged
        return []
    assigned_ms = int(snapshot.get("state_since_ms") or 0)
    coordinators = snapshot.get("coordinators")
    if coordinators:
        assigned_ms = max(assigned_ms, int(coordinators[-1][0]))
    names = topic_names if snapshot.get("protocol") == Protocol.CONSUMER and topic_names else None
    out: list[AtRisk] = []
    for member in snapshot.get("members") or ():
        risk = _member_at_risk(member, committed, end_offset, now_ms, fraction, assigned_ms, names)
        if risk is not None:
            out.append(risk)
    return out


def _member_at_risk(member: dict[str, Any], committed: dict[Partition, tuple[int, int]],
                    end_offset: Callable[[Partition], int | None], now_ms: int, fraction: float,
                    assigned_ms: int, names: Mapping[str, str] | None) -> AtRisk | None:
    timeout_ms = member.get("rebalance_timeout_ms")
    if not timeout_ms or not member.get("partitions"):
        return None
    if now_ms - assigned_ms <= fraction * timeout_ms:
        return None                        # silent at most since the assignment: not long enough
    newest_commit, waiting = assigned_ms, 0
    for name in member["partitions"]:
        tp = named_partition(name)
        if tp is None:
            continue
        if names is not None and tp[0] in names:
            tp = (names[tp[0]], tp[1])      # a KIP-848 assignment's topic id
        offset_and_time = committed.get(tp)
        end = end_offset(tp)
        if offset_and_time is None or offset_and_time[1] <= 0 or end is None or end <= offset_and_time[0]:
            continue                       # never committed, committed when unknown, not sampled, or nothing waiting
        waiting += 1
        newest_commit = max(newest_commit, offset_and_time[1])
    silent_ms = now_ms - newest_commit
    if waiting == 0 or silent_ms <= fraction * timeout_ms:
        return None
    return AtRisk(member["member_id"], member.get("client_id"), waiting, silent_ms, int(timeout_ms))
