"""What a rebalance cost: `records_delayed`, the records that arrived on the partitions it stopped
while each was stopped, and `catch_up_seconds`, how long after it the group's lag on them was back
to its level before (pure Python; `run` only, docs/impact.md "Records delayed and catch-up").

The state machine says when each partition a measured classic rebalance ended the stop of had
stopped (a PARTITION_STOPS row: every stop ends at the rebalance's completion); the driver's lag
sampler knows the partitions' end offsets over the last HISTORY_SAMPLES samples (state/lag.py).
A partition's delayed records are its end offset at the completion minus its end offset when it
stopped, each interpolated between the samples around it. So a rebalance waits here until a
sample at or after its completion has come (about one sampling interval), then its
rebalance_cost record goes out, once:

- measured: `records_delayed` and the figure per topic; `lag_before`, the group's lag on those
  partitions when each stopped (its end offset then minus the offset committed at or before the
  stop), and `catch_up_deadline_ms`;
- not measurable: null, and `records_delayed_unknown_reason` says why (a stop older than the
  kept samples, such as a backlog read long after; a partition whose end offsets could not be
  had; no sample after the completion within MAX_WAIT_SAMPLES intervals).

Then the catch-up is awaited: each micro-batch takes each stopped partition's newest commit. One
made after the completion counts with the end offset at its commit time (lag at that moment),
one from before with the newest sample (nobody consumed it since). The group has caught up when
that lag, summed over the partitions, is at most `lag_before`: `catch_up_seconds` runs from the
completion to the newest of those commits. Its catch_up record goes out then, or at the deadline
(`lag.catch_up_deadline_seconds` after the completion) with null and `not_caught_up`.

Not measured: consumer (KIP-848) groups, whose partitions stop and resume at moments of their
own, and what a later poll-timeout decision adds to a leave's stops (rebalance_trigger records).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from state.lag import END_LATER, REASON_STALE, LagBook
from state.outputs import catch_up_record, rebalance_cost_record

# A rebalance waits at most this many sampling intervals after its completion for a sample.
MAX_WAIT_SAMPLES = 3
# Rebalances waiting at most, for their records or their catch-up (a burst beyond it: the oldest
# go out unmeasured).
MAX_PENDING = 10_000
REASON_TOO_MANY = "too_many_waiting"
REASON_NOT_CAUGHT_UP = "not_caught_up"            # its lag was still above lag_before at the deadline
REASON_COMMITTED_UNKNOWN = "committed_unknown"    # no commit of some partition at or before its stop
DEFAULT_CATCH_UP_DEADLINE_S = 600.0


@dataclass
class CatchUp:
    """A measured rebalance whose group has not caught up yet."""
    stops: dict[str, Any]
    lag_before: int
    deadline_ms: int


class RebalanceCosts:
    """The PARTITION_STOPS rows waiting for the end offsets around their stops, then for their
    group to catch up."""

    def __init__(self, sample_seconds: float, catch_up_deadline_s: float = DEFAULT_CATCH_UP_DEADLINE_S) -> None:
        self.max_wait_s = MAX_WAIT_SAMPLES * sample_seconds
        self.catch_up_deadline_ms = int(catch_up_deadline_s * 1000)
        self.pending: list[dict[str, Any]] = []
        self.catching_up: list[CatchUp] = []

    def note(self, stops: dict[str, Any]) -> None:
        self.pending.append(stops)

    def due(self, book: LagBook, now_s: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The rebalance_cost and catch_up records that can be had at `now_s` (Unix seconds); the
        others wait."""
        out: list[dict[str, Any]] = []
        now_ms = int(now_s * 1000)
        while len(self.pending) > MAX_PENDING:
            out.append(rebalance_cost_record(self.pending.pop(0), None, {}, REASON_TOO_MANY, now_ms))
        waiting = []
        for stops in self.pending:
            record = self._measure(book, stops, now_s)
            if record is None:
                waiting.append(stops)
            else:
                out.append(record)
        self.pending = waiting
        return out, self._catch_ups(book, now_s)

    def _measure(self, book: LagBook, stops: dict[str, Any], now_s: float) -> dict[str, Any] | None:
        end_s = stops["completed_at_ms"] / 1000
        asks = []
        for topic, partition, stopped_at_ms in stops["stops"]:
            asks += [((topic, partition), min(stopped_at_ms / 1000, end_s)), ((topic, partition), end_s)]
        ends = book.ends_at(stops["cluster"], asks)
        reason = next((e for e in ends if isinstance(e, str) and e != END_LATER), None)
        if reason is None and END_LATER in ends:
            if now_s - end_s <= self.max_wait_s:
                return None
            reason = END_LATER
        if reason is not None:
            return rebalance_cost_record(stops, None, {}, reason, int(now_s * 1000))
        by_topic: dict[str, int] = {}
        for i, (topic, _, _) in enumerate(stops["stops"]):
            start, end = ends[2 * i], ends[2 * i + 1]
            assert isinstance(start, int) and isinstance(end, int)
            by_topic[topic] = by_topic.get(topic, 0) + max(0, end - start)
        lag_before = self._lag_before(book, stops, [e for e in ends[::2] if isinstance(e, int)])
        deadline = None
        if lag_before is not None:
            deadline = stops["completed_at_ms"] + self.catch_up_deadline_ms
            self.catching_up.append(CatchUp(stops, lag_before, deadline))
        return rebalance_cost_record(stops, sum(by_topic.values()), by_topic, None, int(now_s * 1000),
                                     lag_before, deadline)

    @staticmethod
    def _lag_before(book: LagBook, stops: dict[str, Any], ends_at_stop: list[int]) -> int | None:
        """The group's lag on the stopped partitions when each stopped, None when a partition's
        committed offset then is not known."""
        committed = book.committed_before((stops["cluster"], stops["group"]),
                                          [((t, p), at_ms) for t, p, at_ms in stops["stops"]])
        if any(c is None for c in committed):
            return None
        return sum(max(0, end - c) for end, c in zip(ends_at_stop, committed) if c is not None)

    def _catch_ups(self, book: LagBook, now_s: float) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        now_ms = int(now_s * 1000)
        while len(self.catching_up) > MAX_PENDING:
            c = self.catching_up.pop(0)
            out.append(catch_up_record(c.stops, c.lag_before, None, None, REASON_TOO_MANY, now_ms))
        waiting = []
        for c in self.catching_up:
            lag, at_ms, reason = _lag_since(book, c.stops, now_s)
            if lag is not None and at_ms is not None and lag <= c.lag_before:
                out.append(catch_up_record(c.stops, c.lag_before, lag, at_ms, None, now_ms))
            elif now_ms >= c.deadline_ms:
                why = REASON_NOT_CAUGHT_UP if reason in (None, END_LATER) else reason
                out.append(catch_up_record(c.stops, c.lag_before, lag, None, why, now_ms))
            else:
                waiting.append(c)
        self.catching_up = waiting
        return out


def _lag_since(book: LagBook, stops: dict[str, Any], now_s: float) -> tuple[int | None, int | None, str | None]:
    """The group's lag on the stopped partitions by their newest commits (see above), the newest
    commit time after the completion among them (the completion when none), or why there is none
    (a sampler's reason; END_LATER while the sample after a commit is awaited)."""
    cluster, completed = stops["cluster"], stops["completed_at_ms"]
    committed = book.committed_of((cluster, stops["group"]))
    since: list[tuple[tuple[str, int], float]] = []      # (partition, commit time): committed after the completion
    lag, at_ms = 0, completed
    for topic, partition, _ in stops["stops"]:
        tp = (topic, partition)
        entry = committed.get(tp)
        if entry is None:
            return None, None, REASON_COMMITTED_UNKNOWN
        offset, commit_ms = entry
        if commit_ms > completed:
            since.append((tp, commit_ms / 1000))
            at_ms = max(at_ms, commit_ms)
            continue
        end = book.fresh_end(cluster, tp, now_s)
        if end is None:
            return None, None, REASON_STALE
        lag += max(0, end - offset)
    ends = book.ends_at(cluster, since)
    reason = next((e for e in ends if isinstance(e, str)), None)
    if reason is not None:
        return None, None, reason
    for (tp, _), at_commit in zip(since, ends):
        lag += max(0, int(at_commit) - committed[tp][0])
    return lag, at_ms, None


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
