"""What a rebalance cost: `records_delayed`, the records that arrived on the partitions it stopped
while each was stopped, and `catch_up_seconds`, how long after it the group's lag on them was back
to its level before (pure Python; `run` only, docs/impact.md "Records delayed and catch-up").

The state machine says when each partition a measured rebalance ended the stop of had stopped
(a PARTITION_STOPS row): a classic rebalance's stops all end at its completion; a consumer
(KIP-848) group's partition stops when its owner's assignment record releases it (or the owner
is removed) and resumes when a member's record gains it, so each of its stops has its own end
(and a partition may stop twice before the rebalance record, across superseded epochs). The
driver's lag sampler knows the partitions' end offsets over the last HISTORY_SAMPLES samples
(state/lag.py). A stop's delayed records are its partition's end offset at the stop's end minus
its end offset when it stopped, each interpolated between the samples around it. So a rebalance
waits here until a sample at or after its last stop's end has come (about one sampling
interval), then its rebalance_cost record goes out, once:

- measured: `records_delayed` and the figure per topic; `lag_before`, the group's lag on those
  partitions when each stopped (its end offset then minus the offset committed when a batch first
  showed the group rebalancing, note_rebalancing), and `catch_up_deadline_ms`;
- not measurable: null, and `records_delayed_unknown_reason` says why (a stop older than the
  kept samples, such as a backlog read long after; a partition whose end offsets could not be
  had; no sample after the completion within MAX_WAIT_SAMPLES intervals).

Then the catch-up is awaited. From the PARTITION_STOPS row on, each micro-batch notes each
stopped partition's newest commit when it is a new one after the completion. The group's lag on
the stopped partitions is judged at the completion and at each of those commits, in time order,
as soon as the samples reach that moment: a partition committed since counts its lag at its own
newest commit by then, one not committed since its end offset then minus the offset committed by
the completion (nobody consumed it). The first moment that lag is at most `lag_before` is when
the group caught up: `catch_up_seconds` from the completion. Its catch_up record goes out then,
or at the deadline (`lag.catch_up_deadline_seconds` after the completion) with null and
`not_caught_up`.

A replay given a file of end offsets (`replay --end-offsets`) measures records_delayed the same
way, all its samples at hand; not lag_before nor the catch-up (`catch_up`, below).

Not measured: share and streams groups (no partition stops are measured for them), and what a
later poll-timeout decision adds to a leave's stops (rebalance_trigger records).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from state.lag import END_LATER, LagBook
from state.outputs import catch_up_record, rebalance_cost_record, stop_span
from state.vocabulary import Protocol

# A rebalance waits at most this many sampling intervals after its completion for a sample.
MAX_WAIT_SAMPLES = 3
# Rebalances waiting at most, for their records or their catch-up (a burst beyond it: the oldest
# go out unmeasured).
MAX_PENDING = 10_000
# A watched rebalance whose group a batch showed out of it is dropped when its PARTITION_STOPS
# row has not come this long after (none comes when no partition stopped, or it was superseded).
ROW_GRACE_S = 60.0
# Commits after the completion kept per partition until their samples come (the oldest go first).
MAX_COMMITS_SEEN = 64
REASON_TOO_MANY = "too_many_waiting"
REASON_NOT_CAUGHT_UP = "not_caught_up"            # its lag was still above lag_before at the deadline
REASON_COMMITTED_UNKNOWN = "committed_unknown"    # no commit of some partition by the completion
DEFAULT_CATCH_UP_DEADLINE_S = 600.0

Partition = tuple[str, int]
# The groups whose rebalances have PARTITION_STOPS rows (state/impact.py).
_MEASURED = (Protocol.CLASSIC, Protocol.CONSUMER)


@dataclass
class Tracked:
    """A measured rebalance's stops, from its PARTITION_STOPS row until its catch-up."""
    stops: dict[str, Any]
    partitions: list[Partition]                  # each stopped partition once (topics by name)
    stopped_at: list[list[int] | None]           # [offset, commit ms] each partition stopped at
    at_completion: list[int | None]              # the offset committed by the completion
    seen: list[list[tuple[int, int]]]            # (commit ms, offset) after the completion, per batch
    spans: list[tuple[Partition, int, int]] = field(default_factory=list)   # each stop: from, to ms
    lag_before: int | None = None
    deadline_ms: int | None = None
    lag_last: int | None = None                  # the lag at the last moment judged
    judged_ms: int = -1                          # the last moment judged (not caught up then)

    @property
    def key(self) -> tuple[str, str]:
        return self.stops["cluster"], self.stops["group"]

    def observe(self, book: LagBook) -> None:
        """The newest commit of each partition, when it is one after the completion not seen yet."""
        committed = book.committed_of(self.key)
        for tp, seen in zip(self.partitions, self.seen):
            entry = committed.get(tp)
            if entry is not None:
                _note_commit(seen, entry, self.stops["completed_at_ms"])


@dataclass
class Watch:
    """A classic group seen rebalancing: its committed offsets then, and each newer commit of
    each partition seen since (per batch, the last MAX_COMMITS_SEEN)."""
    before: dict[Partition, tuple[int, int]]
    seen: dict[Partition, list[tuple[int, int]]]       # (commit ms, offset)
    since_s: float
    ended_s: float | None = None     # when a batch first showed the group no longer in it

    def observe(self, book: LagBook, key: tuple[str, str]) -> None:
        for tp, entry in book.committed_of(key).items():
            _note_commit(self.seen.setdefault(tp, []), entry, self.before.get(tp, (0, -1))[1])


def _note_commit(seen: list[tuple[int, int]], entry: tuple[int, int], after_ms: int) -> None:
    """Adds a partition's newest commit (`entry`: offset, commit ms) to `seen` when it is newer than
    the last one there (or, with none, than `after_ms`); keeps the last MAX_COMMITS_SEEN."""
    offset, ms = entry
    if ms > (seen[-1][0] if seen else after_ms):
        seen.append((ms, offset))
        del seen[:-MAX_COMMITS_SEEN]


class RebalanceCosts:
    """The PARTITION_STOPS rows waiting for the end offsets around their stops, then for their
    group to catch up."""

    def __init__(self, sample_seconds: float, catch_up_deadline_s: float = DEFAULT_CATCH_UP_DEADLINE_S,
                 catch_up: bool = True) -> None:
        self.max_wait_s = MAX_WAIT_SAMPLES * sample_seconds
        self.catch_up_deadline_ms = int(catch_up_deadline_s * 1000)
        # False (a replay): records_delayed only. Its batches bring each partition's newest commit
        # of a time slice, not the commits around a stop and after it that lag_before and the
        # catch-up are judged at.
        self.catch_up = catch_up
        self.pending: list[Tracked] = []
        self.catching_up: list[Tracked] = []
        # (cluster, group, rebalance start) -> its commits from the first batch that showed it
        # rebalancing on, until its PARTITION_STOPS row
        self.watching: dict[tuple[str, str, int], Watch] = {}
        self.watched: dict[tuple[str, str], set[tuple[str, str, int]]] = {}     # the keys of each group

    def note_rebalancing(self, snapshots: list[dict[str, Any]], book: LagBook, now_s: float) -> None:
        """The group snapshots of a batch: a classic or consumer group first seen rebalancing is watched. Its
        committed offsets then are the ones its stops began at (a consumer's commit on revoke
        comes after the stop); its commits from then on are noted each batch, for the catch-up
        (its PARTITION_STOPS row comes a few seconds after the completion)."""
        for snap in snapshots:
            group = (snap["cluster"], snap["group"])
            o = snap.get("rebalance_in_progress")
            start = None if o is None or snap.get("protocol") not in _MEASURED else o.get("started_at_ms")
            for key in self.watched.get(group, ()):
                watch = self.watching[key]
                if key[2] != start and watch.ended_s is None:
                    watch.ended_s = now_s
            if start is None or (*group, start) in self.watching:
                continue
            self.watching[(*group, start)] = Watch(book.committed_of(group), {}, now_s)
            self.watched.setdefault(group, set()).add((*group, start))
            while len(self.watching) > MAX_PENDING:
                self._unwatch(next(iter(self.watching)))

    def _unwatch(self, key: tuple[str, str, int]) -> Watch | None:
        watch = self.watching.pop(key, None)
        keys = self.watched.get(key[:2])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.watched[key[:2]]
        return watch

    def note(self, stops: dict[str, Any], book: LagBook) -> None:
        """A PARTITION_STOPS row: the offset each stopped partition's consumption stopped at (as
        the group's watch kept it, else the newest of its last two commits made by the completion:
        a rebalance that began and ended within one micro-batch), the offset committed by the
        completion, and the commits seen after it."""
        cluster, group, completed = stops["cluster"], stops["group"], stops["completed_at_ms"]
        watch = self._unwatch((cluster, group, stops["started_at_ms"])) or Watch({}, {}, 0.0)
        spans = stop_spans(stops, book.topic_names(cluster))
        first = first_stops(spans)
        partitions = list(first)
        newest = book.committed_before((cluster, group), [(tp, completed) for tp in partitions])
        # a consumer group's partition stopped when its owner released it, after its commit on revoke
        own = book.committed_before((cluster, group), [(tp, first[tp]) for tp in partitions]) \
            if any(len(stop) > 3 for stop in stops["stops"]) else [None] * len(partitions)
        stopped_at, at_completion, seen = [], [], []
        for tp, c, at_stop in zip(partitions, newest, own):
            kept = at_stop if at_stop is not None else watch.before.get(tp)
            stopped_at.append(list(kept) if kept is not None else (None if c is None else list(c)))
            commits = watch.seen.get(tp, [])
            by_end = [o for ms, o in commits if ms <= completed]
            at_completion.append(by_end[-1] if by_end else c[0] if c is not None else
                                 kept[0] if kept is not None else None)
            seen.append([(ms, o) for ms, o in commits if ms > completed])
        self.pending.append(Tracked(stops, partitions, stopped_at, at_completion, seen, spans))

    def due(self, book: LagBook, now_s: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The rebalance_cost and catch_up records that can be had at `now_s` (Unix seconds); the
        others wait."""
        out: list[dict[str, Any]] = []
        now_ms = int(now_s * 1000)
        while len(self.pending) > MAX_PENDING:
            out.append(rebalance_cost_record(self.pending.pop(0).stops, None, {}, REASON_TOO_MANY, now_ms))
        for key, watch in list(self.watching.items()):
            if (watch.ended_s is not None and now_s - watch.ended_s > ROW_GRACE_S) \
                    or now_s - watch.since_s > self.catch_up_deadline_ms / 1000:
                self._unwatch(key)        # no row came (no partition stopped, superseded, no news)
            else:
                watch.observe(book, key[:2])
        waiting = []
        for t in self.pending:
            t.observe(book)
            record = self._measure(book, t, now_s)
            if record is None:
                waiting.append(t)
            else:
                out.append(record)
        self.pending = waiting
        return out, self._catch_ups(book, now_s)

    def _measure(self, book: LagBook, t: Tracked, now_s: float) -> dict[str, Any] | None:
        stops = t.stops
        completed_s = stops["completed_at_ms"] / 1000
        asks: list[tuple[Partition, float]] = []
        for tp, start_ms, end_ms in t.spans:        # the end offsets at each stop's two ends
            asks += [(tp, min(start_ms, end_ms) / 1000), (tp, end_ms / 1000)]
        first = first_stops(t.spans)
        for tp, c in zip(t.partitions, t.stopped_at):
            stop_s = min(first[tp] / 1000, completed_s)
            # the lag before: at the stop, or at the commit that came after it (on revoke)
            asks.append((tp, stop_s if c is None else min(max(stop_s, c[1] / 1000), completed_s)))
        ends = book.ends_at(stops["cluster"], asks)
        reason = next((e for e in ends if isinstance(e, str) and e != END_LATER), None)
        if reason is None and END_LATER in ends:
            last_s = max([completed_s] + [end_ms / 1000 for _, _, end_ms in t.spans])
            if now_s - last_s <= self.max_wait_s:
                return None
            reason = END_LATER
        if reason is not None:
            return rebalance_cost_record(stops, None, {}, reason, int(now_s * 1000))
        by_topic: dict[str, int] = {}
        for i, ((topic, _), _, _) in enumerate(t.spans):
            start, end = ends[2 * i], ends[2 * i + 1]
            assert isinstance(start, int) and isinstance(end, int)
            by_topic[topic] = by_topic.get(topic, 0) + max(0, end - start)
        befores = ends[2 * len(t.spans):]
        t.lag_before = _lag_before(t.stopped_at, [e for e in befores if isinstance(e, int)]) if self.catch_up else None
        if t.lag_before is not None:
            t.deadline_ms = stops["completed_at_ms"] + self.catch_up_deadline_ms
            self.catching_up.append(t)
        return rebalance_cost_record(stops, sum(by_topic.values()), by_topic, None, int(now_s * 1000),
                                     t.lag_before, t.deadline_ms)

    def _catch_ups(self, book: LagBook, now_s: float) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        now_ms = int(now_s * 1000)
        while len(self.catching_up) > MAX_PENDING:
            c = self.catching_up.pop(0)
            out.append(catch_up_record(c.stops, c.lag_before or 0, None, None, REASON_TOO_MANY, now_ms))
        waiting = []
        for t in self.catching_up:
            t.observe(book)
            at_ms, reason = _caught_up_at(book, t)
            assert t.lag_before is not None and t.deadline_ms is not None
            if at_ms is not None:
                out.append(catch_up_record(t.stops, t.lag_before, t.lag_last, at_ms, None, now_ms))
            elif now_ms >= t.deadline_ms:
                why = REASON_NOT_CAUGHT_UP if reason in (None, END_LATER) else reason
                out.append(catch_up_record(t.stops, t.lag_before, t.lag_last, None, why, now_ms))
            else:
                waiting.append(t)
        self.catching_up = waiting
        return out


def stop_spans(stops: dict[str, Any], topic_names: dict[str, str]) -> list[tuple[Partition, int, int]]:
    """A PARTITION_STOPS row's stops as ((topic name, partition), from ms, to ms): a classic
    rebalance's end at its completion; a consumer group's name their topic by id, which
    `topic_names` ({id: name}, the sampler's metadata) turns into the name its commits carry."""
    out = []
    for stop in stops["stops"]:
        topic, partition, start, end = stop_span(stop, stops["completed_at_ms"])
        out.append(((topic_names.get(topic, topic) if len(stop) > 3 else topic, int(partition)), int(start), int(end)))
    return out


def first_stops(spans: list[tuple[Partition, int, int]]) -> dict[Partition, int]:
    """Each stopped partition's first stop (ms), in the order the spans name them."""
    first: dict[Partition, int] = {}
    for tp, start, _ in spans:
        first[tp] = min(first.get(tp, start), start)
    return first


def _lag_before(committed: list[list[int] | None], ends_before: list[int]) -> int | None:
    """The group's lag on the stopped partitions when each stopped: the end offset then minus
    the offset committed; None when a partition's is not known."""
    if any(c is None for c in committed):
        return None
    return sum(max(0, end - c[0]) for end, c in zip(ends_before, committed) if c is not None)


def _caught_up_at(book: LagBook, t: Tracked) -> tuple[int | None, str | None]:
    """The first moment, from the completion on, at which the group's lag on the stopped
    partitions is at most lag_before (see above), judged at the completion and at each commit seen
    since, in time order, as far as the samples reach; or None and why not yet (END_LATER: the
    samples do not reach the next moment yet). Moments judged and not caught up are dropped."""
    completed = t.stops["completed_at_ms"]
    moments = sorted({completed, *(ms for seen in t.seen for ms, _ in seen)})
    for moment in moments:
        if moment <= t.judged_ms:
            continue
        asks: list[tuple[Partition, float]] = []
        offsets: list[int] = []
        for tp, seen, before in zip(t.partitions, t.seen, t.at_completion):
            last = next((c for c in reversed(seen) if c[0] <= moment), None)
            if last is not None:
                asks.append((tp, last[0] / 1000))      # its lag at its own commit
                offsets.append(last[1])
            elif before is None:
                return None, REASON_COMMITTED_UNKNOWN
            else:
                asks.append((tp, moment / 1000))       # not committed since: nobody consumed it
                offsets.append(before)
        ends = book.ends_at(t.stops["cluster"], asks)
        reason = next((e for e in ends if isinstance(e, str)), None)
        if reason is not None:
            return None, reason
        t.lag_last = sum(max(0, int(e) - o) for e, o in zip(ends, offsets))
        if t.lag_last <= (t.lag_before or 0):
            return moment, None
        t.judged_ms = moment
        for seen in t.seen:                            # keep each partition's newest commit up to it
            while len(seen) > 1 and seen[1][0] <= moment:
                seen.pop(0)
    return None, None


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["cluster"], r["group"], r.get("generation"), r.get("started_at_ms"))


def apply_rebalance_costs(rebalances: list[dict[str, Any]], costs: list[dict[str, Any]],
                          catch_ups: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The rebalance records with what their rebalance_costs record says (`records_delayed`, and
    `records_delayed_unknown_reason` when null) and their catch_up record (`catch_up_seconds`, and
    `catch_up_unknown_reason` when null): what `report` shows of an event sink."""
    by_key = {_key(c): c for c in costs}
    caught = {_key(c): c for c in catch_ups or ()}
    out = []
    for r in rebalances:
        cost, catch_up = by_key.get(_key(r)), caught.get(_key(r))
        if cost is not None:
            r = {**r, "records_delayed": cost.get("records_delayed"),
                 "records_delayed_unknown_reason": cost.get("records_delayed_unknown_reason")}
        if catch_up is not None:
            r = {**r, "catch_up_seconds": catch_up.get("catch_up_seconds"),
                 "catch_up_unknown_reason": catch_up.get("catch_up_unknown_reason")}
        out.append(r)
    return out
